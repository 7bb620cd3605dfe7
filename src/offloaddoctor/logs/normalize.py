"""Turn a raw log line into the text the training process printed, plus the rank that printed it.

Launchers decorate lines: Slurm's `srun --label` adds `12: `, torchrun adds `[rank3]: ` or `[default0]: `,
loggers add timestamps, and progress bars redraw with `\\r`. Matching works on what is left.
"""

from __future__ import annotations

from offloaddoctor.lazy_pattern import lazy_compile

_ANSI = lazy_compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[@-Z\\-_]")
_CONTROL = lazy_compile(r"[\x00-\x08\x0a-\x1f\x7f]")
_TIMESTAMP = lazy_compile(r"\[?\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?\]?:?\s+")
_SLURM_LABEL = lazy_compile(r"\s*(\d{1,6}): ")
_TORCHRUN_PREFIX = lazy_compile(r"\s*\[(?:rank|default)(\d{1,6})\]:\s?")


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


def normalize_line(raw: str, default_rank: int | None = None) -> tuple[str, int | None]:
    """Return (text without decorations, rank). A torchrun rank wins over a Slurm task label."""
    text = strip_terminal_codes(raw)
    torchrun_rank: int | None = None
    slurm_rank: int | None = None
    for _ in range(4):  # decorations stack in any order, a few deep at most
        stripped = text.lstrip()
        first = stripped[:1]
        if first != "[" and not first.isdigit():  # each decoration starts with one (after spaces): none here
            break
        match = _TORCHRUN_PREFIX.match(text)
        if match:
            torchrun_rank = int(match.group(1))
            text = text[match.end() :]
            continue
        match = _SLURM_LABEL.match(text)
        if match and slurm_rank is None and torchrun_rank is None:
            slurm_rank = int(match.group(1))
            text = text[match.end() :]
            continue
        match = _TIMESTAMP.match(stripped)
        if match:
            text = stripped[match.end() :]
            continue
        break
    if torchrun_rank is not None:
        return text, torchrun_rank
    if slurm_rank is not None:
        return text, slurm_rank
    return text, default_rank
