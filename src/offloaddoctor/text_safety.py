"""Log, config and catalogue text is untrusted: nothing from it may act on a terminal or a CI runner.

Control characters are shown as visible escapes; so are the two sequences a GitHub Actions runner
would take for a command: `::` at the start of a line (after any whitespace) and `##[` anywhere.
"""

from __future__ import annotations

from offloaddoctor.lazy_pattern import lazy_compile

# Every control character but tab (a newline in a file name would start a new output line), C1 controls
# (a terminal may take 0x9b as CSI), line/paragraph separators and bidirectional overrides.
_UNSAFE = lazy_compile(r"[\x00-\x08\x0a-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
# In JSON, C0 controls are already escaped; these are the rest, shown as the same data in \u form.
_UNSAFE_IN_JSON = lazy_compile(r"[\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
_RUNNER_COMMAND = lazy_compile(r"^(\s*):(?=:)|#(?=#\[)")


def _escape(char: str) -> str:
    code = ord(char)
    return f"\\x{code:02x}" if code < 256 else f"\\u{code:04x}"


def safe_text(text: object) -> str:
    """Show control characters and runner-command openers as visible escapes instead of letting them act.
    For one line of output: a newline is escaped too."""
    shown = str(text)
    # The searches only where they can match (most text can't; a small run then compiles neither pattern):
    # every character _UNSAFE names is unprintable, and both runner commands hold `::` or `##[`.
    if not shown.isprintable():
        shown = _UNSAFE.sub(lambda m: _escape(m.group()), shown)
    if "::" in shown or "##[" in shown:
        shown = _RUNNER_COMMAND.sub(lambda m: (m.group(1) or "") + _escape(m.group()[-1]), shown)
    return shown


def safe_lines(text: str) -> str:
    """safe_text for text of several lines: each line made safe on its own, the newlines kept."""
    return "\n".join(safe_text(line) for line in text.split("\n"))


def json_document(data: object, **options) -> str:
    """`data` as every versioned `--format json` writes it: indented, non-ASCII kept, made inert, a final newline."""
    import json

    return inert_json(json.dumps(data, indent=2, ensure_ascii=False, default=str, **options)) + "\n"


def inert_json(document: str) -> str:
    """JSON keeps log text exact, so encode `##[` and raw C1/separator/bidi characters (only ever inside
    strings) as the same data, escaped."""
    if not document.isascii() or "\x7f" in document:  # isascii is a flag: no scan of a 50 MB report for nothing
        document = _UNSAFE_IN_JSON.sub(lambda m: f"\\u{ord(m.group()):04x}", document)
    return document.replace("##[", "#\\u0023[")


def cut(text: str, most: int) -> str:
    """Text as a message quotes it: at most `most` characters, the last an ellipsis where it was cut (a
    5,000-digit value or a whole log line named in full would bury the message)."""
    return text if len(text) <= most else text[: most - 1] + "…"
