"""How a printed or configured value reads as a truth value or a number: one rule for config predicates,
derived config values, offload settings, advice and the whole numbers log lines print (iterations, ranks, GPU
indices, counts). The bottom layer: it imports nothing of ours."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: typing costs start-up time
    from typing import Any


def boolean(value: Any) -> bool | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)) and value in (0, 1):
        return bool(value)
    if isinstance(value, str):
        return {"true": True, "false": False, "1": True, "0": False}.get(value.strip().lower())
    return None


def number(value: Any) -> float | None:
    if isinstance(value, (int, float)):  # and bool
        try:
            return float(value)
        except OverflowError:  # an int past 1.8e308 (YAML reads 400 digits as one): as its spelling `1e400` reads
            return float("inf") if value > 0 else float("-inf")
    if isinstance(value, str):
        try:
            return float(value.strip())
        except ValueError:
            return None
    return None


# The longest digit run read as a whole number. Every count a run prints fits in 20 digits (2**64); past
# 4,300 digits Python's int() raises instead of parsing, and a number that long is noise, not a fact.
DIGITS_MAX = 40


def integer(text: str) -> int | None:
    """Decimal digits (a sign and surrounding blanks allowed) as an int; None for anything else, and for a
    digit run longer than DIGITS_MAX: a log line holding one reads as a line that does not match."""
    text = text.strip()
    digits = text[1:] if text[:1] in "+-" else text
    if not digits or len(digits) > DIGITS_MAX or not (digits.isascii() and digits.isdigit()):
        return None
    return int(text)


def is_none(value: Any) -> bool:
    """None, or the way YAML, Hydra and Megatron print it (`None`, `null`, `~`, empty)."""
    return value is None or (isinstance(value, str) and value.strip().lower() in ("none", "null", "~", ""))


def names(value: Any) -> tuple[str, ...]:
    """A list of names as a config gives it (a YAML list, Hydra's `[a,b]`, Megatron's printed `['a', 'b']`, one
    name): each name once, in order; () for an empty or unset list."""
    if is_none(value):
        return ()
    items = value if isinstance(value, (list, tuple)) else str(value).strip().strip("[]").split(",")
    return tuple(dict.fromkeys(n for n in (str(item).strip(" '\"") for item in items) if n))
