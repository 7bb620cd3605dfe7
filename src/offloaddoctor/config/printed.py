"""Turn printed values back into data: Python reprs from logs, YAML scalars from overrides. Never eval."""

from __future__ import annotations

import ast
import functools

from offloaddoctor.coerce import integer
from offloaddoctor.lazy_pattern import lazy_compile

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: typing costs start-up time
    from typing import Any

_MAX_LITERAL = 10_000
_SCIENTIFIC = lazy_compile(r"[-+]?(?:\d+\.?\d*|\.\d+)[eE][-+]?\d+")
_WORDS = {"true": True, "false": False, "none": None, "null": None}


@functools.lru_cache(maxsize=1)
def _override_loader():
    import yaml  # only when there are overrides: it is a sizeable share of start-up

    class OverrideLoader(yaml.SafeLoader):
        """Hydra's override grammar has no anchors; refusing aliases also keeps `[&a [1,1], [*a,*a], …]`
        from expanding into billions of items when the value is printed."""

        def compose_node(self, parent, index):
            if self.check_event(yaml.AliasEvent):
                raise yaml.YAMLError("aliases are not part of an override")
            return super().compose_node(parent, index)

    return yaml, OverrideLoader


def parse_printed(text: str) -> Any:
    """A value as Megatron prints it (`True`, `None`, `1e-08`, `['p2p']`, `AttnBackend.auto`)."""
    text = text.strip()
    lowered = text.lower()
    if lowered in _WORDS:
        return _WORDS[lowered]
    number = _number(text)
    if number is not None:
        return number
    if text[:1] in "[({'\"" and len(text) <= _MAX_LITERAL:
        try:
            return ast.literal_eval(text)
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            return text
    return text


def parse_override(text: str) -> Any:
    """A value as Hydra/Bridge overrides write it (`True`, `null`, `0.5`, `[a,b]`, `"none"`)."""
    text = text.strip()
    if text.lower() in _WORDS:
        return _WORDS[text.lower()]
    if len(text) > _MAX_LITERAL:
        return text
    if _SCIENTIFIC.fullmatch(text):
        return float(text)  # `1e-4`: YAML 1.1 reads it as a string, Hydra/OmegaConf as a float
    yaml, loader = _override_loader()
    try:
        value = yaml.load(text, Loader=loader)  # a SafeLoader subclass
    except (yaml.YAMLError, RecursionError, ValueError):  # ValueError: int() of more than 4,300 digits
        return text
    if isinstance(value, (str, int, float, bool, list)) or value is None:
        return value
    return text


def _number(text: str) -> int | float | None:
    whole = integer(text)
    if whole is not None:
        return whole
    try:
        value = float(text)
    except ValueError:
        return None
    return value
