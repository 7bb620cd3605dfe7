"""`--set key=value` overrides in the Hydra form Megatron-Bridge's CLI takes."""

from __future__ import annotations

from collections.abc import Sequence

from offloaddoctor.config.keys import canonical_key
from offloaddoctor.config.literals import parse_override
from offloaddoctor.config.values import ConfigValue, Source
from offloaddoctor.errors import UserError
from offloaddoctor.lazy_pattern import lazy_compile

# Dotted parts, none empty: `a..b` and `a.` name no key (Hydra refuses them too).
_KEY = lazy_compile(r"^\+{0,2}[A-Za-z_][\w\-]*(?:\.[\w\-]+)*$")


def parse_overrides(items: Sequence[str]) -> list[ConfigValue]:
    values = []
    for position, item in enumerate(items, start=1):
        key, sep, raw_value = item.partition("=")
        key = key.strip()
        if sep and "." in key and "" in key.lstrip("+").split("."):
            raise UserError(f"--set {item!r}: the key {key!r} has an empty part between dots; expected e.g. optimizer.optimizer_cpu_offload=True")
        if not sep or not _KEY.match(key):
            raise UserError(f"--set {item!r}: expected KEY=VALUE, e.g. optimizer.optimizer_cpu_offload=True")
        values.append(
            ConfigValue(canonical_key(key), parse_override(raw_value), Source("--set", None, f"#{position} {key}"), "set")
        )
    return values
