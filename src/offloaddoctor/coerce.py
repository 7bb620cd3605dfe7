"""How a printed or configured value reads as a truth value or a number: one rule for config predicates,
derived config values, offload settings and advice. The bottom layer: it imports nothing of ours."""

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
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value.strip())
        except ValueError:
            return None
    return None


def is_none(value: Any) -> bool:
    """None, or the way YAML, Hydra and Megatron print it (`None`, `null`, `~`, empty)."""
    return value is None or (isinstance(value, str) and value.strip().lower() in ("none", "null", "~", ""))
