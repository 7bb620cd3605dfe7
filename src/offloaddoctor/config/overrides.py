"""`--set key=value` overrides in the Hydra form Megatron-Bridge's CLI takes."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from offloaddoctor.config.derived import inputs_of
from offloaddoctor.config.keys import VALUE_CHOICES, VALUE_KINDS, canonical_key, is_known, known_spellings, parse_value
from offloaddoctor.config.values import ConfigValue, Source
from offloaddoctor.errors import UserError
from offloaddoctor.lazy_pattern import lazy_compile
from offloaddoctor.text_safety import cut

# Dotted parts, none empty: `a..b` and `a.` name no key (Hydra refuses them too).
_KEY = lazy_compile(r"^\+{0,2}[A-Za-z_][\w\-]*(?:\.[\w\-]+)*$")


def parse_overrides(items: Sequence[str]) -> list[ConfigValue]:
    values = []
    for position, item in enumerate(items, start=1):
        key, sep, raw_value = item.partition("=")
        key = key.strip()
        if sep and "." in key and "" in key.lstrip("+").split("."):
            raise UserError(
                f"--set {item!r}: the key {key!r} has an empty part between dots; expected e.g. optimizer.optimizer_cpu_offload=True"
            )
        if not sep or not _KEY.match(key):
            raise UserError(f"--set {item!r}: expected KEY=VALUE, e.g. optimizer.optimizer_cpu_offload=True")
        canonical = canonical_key(key)
        value = parse_value(canonical, raw_value)
        problem = type_problem(canonical, value)
        if problem:
            raise UserError(f"--set {cut(item, 60)}: {canonical} takes {problem}, not {cut(raw_value.strip(), 60)!r}")
        written = key if canonical != key else ""
        values.append(ConfigValue(canonical, value, Source("--set", None, f"#{position} {key}"), "set", written))
    return values


_KIND_WORDS = {"bool": "True or False", "int": "a whole number", "number": "a number"}


def type_problem(key: str, value) -> str | None:
    """What a known key takes, when `value` is not that (None, `null`, is always allowed). A YAML config's
    `true`/`0.5` arrive typed; strings that parse as the type (a launch script's `0.5`) are accepted."""
    if value is None:
        return None
    choices = VALUE_CHOICES.get(key)
    if choices:
        return None if str(value) in choices else "one of " + ", ".join(choices)
    kind = VALUE_KINDS.get(key)
    if kind is None:
        return None
    if kind == "bool":
        ok = isinstance(value, bool) or value in (0, 1)
    elif kind == "int":
        ok = isinstance(value, int) and not isinstance(value, bool)
    else:
        ok = (isinstance(value, (int, float)) and not isinstance(value, bool)) or _float_text(value)
    return None if ok else _KIND_WORDS[kind]


def _float_text(value) -> bool:
    """`nan`, `inf`, `-inf` given as text are numbers (Hydra reads them so): the range checks judge them."""
    if not isinstance(value, str):
        return False
    try:
        float(value)
    except ValueError:
        return False
    return True


def unknown_key_notes(values: Sequence[ConfigValue], read_keys: Iterable[str], config_keys: Iterable[str]) -> list[str]:
    """A note per `--set` key no check reads and the config does not have either: most likely a typo,
    which would otherwise change nothing without a word. "Did you mean" draws on both lists."""
    import difflib  # only when there are --set items

    read, present = inputs_of(read_keys), set(config_keys)  # a key a read key is derived from is read too
    notes = []
    for value in values:
        if value.origin != "set" or is_known(value.key) or value.key in read or value.key in present:
            continue
        given = value.source.detail.split(" ", 1)[-1]
        candidates = sorted(read | present | set(known_spellings()))
        close = list(
            dict.fromkeys(canonical_key(c) for c in difflib.get_close_matches(value.key, candidates, n=4, cutoff=0.8))
        )[:2]
        hint = f"; did you mean {' or '.join(close)}?" if close else ""
        notes.append(f"--set {given}: no check reads this key and the config does not have it{hint}")
    return notes
