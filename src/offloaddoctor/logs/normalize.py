"""Turn a raw log line into the text the training process printed, plus the rank that printed it.

Launchers decorate lines: Slurm's `srun --label` adds `12: `, torchrun adds `[rank3]: ` or `[default0]: `, pdsh a node,
loggers add timestamps, and progress bars redraw with `\\r`. Matching works on what is left.
"""

from __future__ import annotations

from offloaddoctor.lazy_pattern import lazy_compile

_ANSI = lazy_compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[@-Z\\-_]")
# The bytes strip_terminal_codes removes (with the newline, which never reaches it inside a line): a line
# holding none of them (as UTF-8) comes back unchanged. Not \t: it is kept.
CONTROL_BYTES = bytes([*range(0x09), *range(0x0B, 0x20), 0x7F])
_CONTROL = lazy_compile("[" + "".join(f"\\x{byte:02x}" for byte in CONTROL_BYTES) + "\\n]")
# A launcher's or logger's decoration at the start of a line (after its spaces), one search for any of the
# three, tried in this order: torchrun's `[rank3]: ` / `[default0]:`, srun --label's `12: `, a timestamp. A
# label and a timestamp cannot both match at one place: after the digits the label needs `:`, a timestamp `-`.
_TORCHRUN = r"\[(?:rank|default)(?P<torchrun>\d{1,6})\]:\s?"
_TIMESTAMP = r"\[?\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?\]?:?\s+"
# pdsh (DeepSpeed's and others' multi-node launcher) puts the node before each line: `192.168.205.202: `, or its
# host name (with a digit in it, or `localhost`), taken only where torchrun's prefix follows (`v100x16-1: [rank5]:`).
_HOST_IP = r"(?P<host>\d{1,3}(?:\.\d{1,3}){3}): "
_DECORATION = lazy_compile(_TORCHRUN + r"|(?P<slurm>\d{1,6}): |" + _HOST_IP + "|" + _TIMESTAMP)
_HOST_THEN_TORCHRUN = lazy_compile(r"[A-Za-z][\w.-]{0,62}: (?=\[(?:rank|default)\d{1,6}\]:)")
# What most decorated lines start with, torchrun's prefix and maybe a timestamp, in one match: the first one
# or two decorations the loop in normalize_line would strip (after torchrun's, neither of the others can
# match where a timestamp does).
_TORCHRUN_THEN_TIMESTAMP = lazy_compile(_TORCHRUN + r"(?:\s*(?P<timestamp>" + _TIMESTAMP + "))?")


# The rank c10d names inside its own messages: `[Rank 5] Watchdog caught …`, `[PG ID 0 PG GUID 0(default_pg) Rank 5]`.
_MESSAGE_RANK = lazy_compile(r"\[(?:PG\b[^\]]{0,80}\s)?Rank\s+(\d{1,6})\]")


def rank_in_message(text: str) -> int | None:
    """The rank a message names as its own, for a line whose launcher added no prefix (a log of one rank's
    output, or a paste without it): PyTorch's process-group messages say which rank printed them."""
    found = _MESSAGE_RANK.search(text) if "Rank" in text else None
    return int(found.group(1)) if found else None


def strip_terminal_codes(text: str) -> str:
    """Drop ANSI/OSC escapes and other control characters; keep the last redraw of a `\\r` line."""
    if text.isprintable():  # the common line, in one C pass: `\r`, ESC and every control are not printable
        return text
    if "\r" in text:
        text = text.rstrip("\r")
        text = text[text.rfind("\r") + 1 :]
    if "\x1b" in text:
        text = _ANSI.sub("", text)
    return _CONTROL.sub("", text)


def normalize_line(raw: str, default_rank: int | None = None, no_controls: bool = False) -> tuple[str, int | None]:
    """Return (text without decorations, rank). A torchrun rank wins over a Slurm task label.
    `no_controls`: the caller knows the line holds none of CONTROL_BYTES (a whole file checked at once)."""
    text = raw if no_controls else strip_terminal_codes(raw)
    torchrun_rank: int | None = None
    slurm_rank: int | None = None
    left = 4  # decorations stack in any order, a few deep at most
    if text[:1].isalpha() and ": [" in text[:66]:
        host = _HOST_THEN_TORCHRUN.match(text)
        # a node's name (`localhost`, as DeepSpeed's pdsh names the launching node), not `WARNING: `
        if host is not None and (any(char.isdigit() for char in host.group()) or host.group() == "localhost: "):
            text = text[host.end() :]
    if text[:1] == "[":
        common = _TORCHRUN_THEN_TIMESTAMP.match(text)
        if common is not None:
            torchrun_rank = int(common.group("torchrun"))
            left = 3 if common.group("timestamp") is None else 2
            text = text[common.end() :]
    for _ in range(left):
        stripped = text.lstrip()
        first = stripped[:1]
        if first != "[" and not first.isdigit():  # each decoration starts with one (after spaces): none here
            break
        match = _DECORATION.match(stripped)
        if match is None:
            break
        torchrun, slurm = match.group("torchrun", "slurm")
        if torchrun is not None:
            torchrun_rank = int(torchrun)
        elif slurm is not None:
            if slurm_rank is not None or torchrun_rank is not None:
                break  # a second label, or one inside torchrun's prefix: the program's own text
            slurm_rank = int(slurm)
        text = stripped[match.end() :]
    if torchrun_rank is not None:
        return text, torchrun_rank
    if slurm_rank is not None:
        return text, slurm_rank
    return text, default_rank
