"""Turn printed values back into data: Python reprs from logs, YAML scalars from overrides. Never eval."""

from __future__ import annotations

import ast
import functools

from offloaddoctor.coerce import DIGITS_MAX, integer
from offloaddoctor.lazy_pattern import lazy_compile

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: typing costs start-up time
    from typing import Any

_MAX_LITERAL = 10_000
_SCIENTIFIC = lazy_compile(r"[-+]?(?:\d+\.?\d*|\.\d+)[eE][-+]?\d+")
_WORDS = {"true": True, "false": False, "none": None, "null": None}
# Override values YAML reads the same way without PyYAML (a sizeable share of start-up): decimal integers and
# decimals, bare words YAML 1.1 does not resolve to a bool or null, and flow lists of those. Anything else
# goes to YAML.
_PLAIN_SCALAR = r"(?:[-+]?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?|[A-Za-z_][A-Za-z0-9_]*)"
_PLAIN_OVERRIDE = lazy_compile(rf"{_PLAIN_SCALAR}|\[ *(?:{_PLAIN_SCALAR}(?: *, *{_PLAIN_SCALAR})*)? *\]")
_YAML_WORDS = frozenset({"yes", "no", "on", "off", "y", "n", "true", "false", "null", "none"})


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
    if _PLAIN_OVERRIDE.fullmatch(text):
        plain = _plain_override(text)
        if plain is not _NOT_PLAIN:
            return plain
    yaml, loader = _override_loader()
    try:
        value = yaml.load(text, Loader=loader)  # a SafeLoader subclass
    except (yaml.YAMLError, RecursionError, ValueError):  # ValueError: int() of more than 4,300 digits
        return text
    if isinstance(value, (str, int, float, bool, list)) or value is None:
        return value
    return text


_NOT_PLAIN = object()


def _plain_override(text: str) -> Any:
    """`text` (matched by _PLAIN_OVERRIDE) as YAML reads it, or _NOT_PLAIN where a word is one YAML resolves
    or a number is longer than coerce.integer reads (YAML's int() gives up past 4,300 digits)."""
    if text.startswith("["):
        items = [_plain_override(item.strip()) for item in text[1:-1].split(",")] if text[1:-1].strip() else []
        return _NOT_PLAIN if any(item is _NOT_PLAIN for item in items) else items
    if text[:1].isalpha() or text[:1] == "_":
        return _NOT_PLAIN if text.lower() in _YAML_WORDS else text
    if "." in text:
        return float(text) if len(text) <= DIGITS_MAX else _NOT_PLAIN
    whole = integer(text)
    return _NOT_PLAIN if whole is None else whole


def _number(text: str) -> int | float | None:
    whole = integer(text)
    if whole is not None:
        return whole
    try:
        return float(text)
    except ValueError:
        return None
