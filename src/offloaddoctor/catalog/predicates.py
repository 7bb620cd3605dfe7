"""Config/fact predicates: data, never `eval`, evaluated in three-valued logic.

A leaf compares one config key (`key:`) or one parsed fact (`fact:`) with an operand. A value that is
not known makes the leaf *unknown* (None) unless the leaf says `if_missing: true|false`. `all`/`any`/`not`
combine leaves with Kleene logic, so "unknown" only becomes true or false when the known parts decide it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import NamedTuple

from offloaddoctor.coerce import boolean, is_none, number
from offloaddoctor.lazy_pattern import lazy_compile

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: typing costs start-up time
    from typing import Any

Truth = bool | None
OPERATORS = (
    "eq",
    "ne",
    "gt",
    "ge",
    "lt",
    "le",
    "in",
    "not_in",
    "contains",
    "not_contains",
    "exists",
    "multiple_of",
    "not_multiple_of",
    "version_lt",
    "version_ge",
)
_MISSING = object()
_RELEASE = lazy_compile(r"\d{1,6}(?:\.\d{1,6}){0,3}")


class Ref(NamedTuple):
    """An operand that is another config key's value, e.g. `{ref: model.num_layers}`."""

    key: str


class Leaf(NamedTuple):
    kind: str  # "key" or "fact"
    name: str
    op: str
    operand: Any
    if_missing: Truth = None


class All(NamedTuple):
    children: tuple[Predicate, ...]


class AnyOf(NamedTuple):
    children: tuple[Predicate, ...]


class Not(NamedTuple):
    child: Predicate


Predicate = Leaf | All | AnyOf | Not
# lookup(kind, name) returns the value, or _MISSING via `missing()` when nothing is known.
Lookup = Callable[[str, str], object]  # a config value or fact, or _MISSING


def missing() -> object:
    return _MISSING


class NotAChoice(NamedTuple):
    """A set value outside the few its key takes (a typo in a Literal field such as `transformer_impl`): a
    lookup hands it over so that no predicate reads it as "not equal", and the check calls it unreadable."""

    value: Any

    def __repr__(self) -> str:
        return repr(self.value)


class PredicateError(ValueError):
    """A predicate in a signature file is malformed; the message says where and why."""


def parse_predicate(raw: Any, where: str) -> Predicate:
    if not isinstance(raw, dict) or not raw:
        raise PredicateError(f"{where}: expected a mapping with all/any/not or key/fact and one operator")
    for combinator, cls in (("all", All), ("any", AnyOf)):
        if combinator in raw:
            if len(raw) != 1 or not isinstance(raw[combinator], list) or not raw[combinator]:
                raise PredicateError(f"{where}.{combinator}: expected a non-empty list and nothing beside it")
            return cls(
                tuple(parse_predicate(item, f"{where}.{combinator}[{i}]") for i, item in enumerate(raw[combinator]))
            )
    if "not" in raw:
        if len(raw) != 1:
            raise PredicateError(f"{where}.not: nothing may stand beside `not`")
        return Not(parse_predicate(raw["not"], f"{where}.not"))
    return _parse_leaf(raw, where)


def _parse_leaf(raw: dict, where: str) -> Leaf:
    kinds = [k for k in ("key", "fact") if k in raw]
    if len(kinds) != 1 or not isinstance(raw[kinds[0]], str) or not raw[kinds[0]]:
        raise PredicateError(f"{where}: a leaf needs exactly one of `key:` or `fact:` naming a value")
    ops = [k for k in raw if k in OPERATORS]
    unknown = sorted(set(raw) - {"key", "fact", "if_missing", *OPERATORS})
    if unknown:
        raise PredicateError(f"{where}: unknown field(s) {', '.join(unknown)} (operators: {', '.join(OPERATORS)})")
    if len(ops) != 1:
        raise PredicateError(f"{where}: a leaf needs exactly one operator, got {len(ops)}")
    op = ops[0]
    operand = raw[op]
    if isinstance(operand, dict):
        if set(operand) != {"ref"} or not isinstance(operand["ref"], str):
            raise PredicateError(f"{where}.{op}: a mapping operand must be {{ref: other.key}}")
        operand = Ref(operand["ref"])
    if op in ("in", "not_in") and not isinstance(operand, list):
        raise PredicateError(f"{where}.{op}: expected a list")
    if op == "exists" and not isinstance(operand, bool):
        raise PredicateError(f"{where}.exists: expected true or false")
    if op.startswith("version_") and release(operand) is None:
        raise PredicateError(f'{where}.{op}: expected a release such as "2.11" or "0.19.0"')
    if_missing = raw.get("if_missing")
    if if_missing is not None and not isinstance(if_missing, bool):
        raise PredicateError(f"{where}.if_missing: expected true or false")
    return Leaf(kinds[0], raw[kinds[0]], op, operand, if_missing)


def evaluate(predicate: Predicate, lookup: Lookup) -> Truth:
    if isinstance(predicate, Leaf):
        return _evaluate_leaf(predicate, lookup)
    if isinstance(predicate, Not):
        inner = evaluate(predicate.child, lookup)
        return None if inner is None else not inner
    results = [evaluate(child, lookup) for child in predicate.children]
    if isinstance(predicate, All):
        if False in results:
            return False
        return None if None in results else True
    if True in results:
        return True
    return None if None in results else False


def _evaluate_leaf(leaf: Leaf, lookup: Lookup) -> Truth:
    actual = lookup(leaf.kind, leaf.name)
    if leaf.op == "exists":
        present = actual is not _MISSING
        return present == leaf.operand
    operand = leaf.operand
    if isinstance(operand, Ref):
        operand = lookup("key", operand.key)
        if operand is _MISSING:
            return leaf.if_missing
    if actual is _MISSING:
        return leaf.if_missing
    if isinstance(actual, NotAChoice) or isinstance(operand, NotAChoice):
        return None
    return _compare(leaf.op, actual, operand)


def _compare(op: str, actual: Any, operand: Any) -> Truth:
    if op in ("eq", "ne"):
        equal = _equal(actual, operand)
        return None if equal is None else equal if op == "eq" else not equal
    if op in ("in", "not_in"):  # a list value (load-balancing types) is in the set when each of its items is
        each = [_inside(value, operand) for value in (actual if isinstance(actual, (list, tuple)) else [actual])]
        inside = False if False in each else None if None in each else True
        return None if inside is None else inside if op == "in" else not inside
    if op in ("version_lt", "version_ge"):  # releases as printed (`2.11.0+cu130`, `0.19.0rc1`): their numbers only
        mine, theirs = release(actual), release(operand)
        if mine is None or theirs is None:
            return None
        return mine < theirs if op == "version_lt" else mine >= theirs
    if op in ("contains", "not_contains"):
        if actual is None:
            return op == "not_contains"
        haystack = [str(x) for x in actual] if isinstance(actual, (list, tuple)) else str(actual)
        found = str(operand) in haystack
        return found if op == "contains" else not found
    if is_none(actual) or is_none(operand):
        return False  # a null setting (VPP None, recompute None) is off: no ordering or divisibility holds
    left, right = number(actual), number(operand)
    if left is None or right is None:
        return None  # a non-number cannot be ordered; say "unknown" rather than guess
    if op in ("multiple_of", "not_multiple_of"):
        if right == 0:
            return None
        multiple = left % right == 0
        return multiple if op == "multiple_of" else not multiple
    return {"gt": left > right, "ge": left >= right, "lt": left < right, "le": left <= right}[op]


def release(value: Any) -> tuple[int, ...] | None:
    """A version's leading numbers, padded to three (`2.11` and `2.11.0a0+cu130` are both (2, 11, 0)); None when
    it starts with none."""
    found = _RELEASE.match(str(value).strip()) if value is not None and not isinstance(value, bool) else None
    if found is None:
        return None
    numbers = tuple(int(n) for n in found.group(0).split("."))
    return numbers + (0,) * (3 - len(numbers))


def _inside(value: Any, operand: list) -> Truth:
    results = [_equal(value, item) for item in operand]
    return True if True in results else None if None in results else False


def _equal(actual: Any, expected: Any) -> Truth:
    """None when the value cannot be read as the operand's type (`maybe` for a true/false key, `abc` for a
    number): unknown, never "not equal", so a constraint is not passed on a value it cannot read."""
    if expected is None or actual is None:
        return is_none(actual) and is_none(expected)
    if isinstance(expected, bool) or isinstance(actual, bool):
        truth, wanted = boolean(actual), boolean(expected)
        if truth is None or wanted is None:
            return False if is_none(actual) or is_none(expected) else None
        return truth == wanted
    if isinstance(expected, (int, float)) or isinstance(actual, (int, float)):
        left, right = number(actual), number(expected)
        if left is None or right is None:
            return False if is_none(actual) or is_none(expected) else None
        return left == right
    return str(actual).strip().lower() == str(expected).strip().lower()


def unreadable_values(predicate: Predicate, lookup: Lookup) -> list[tuple[str, Any]]:
    """(key, value) of every set config value a leaf could not read as its operand's type."""
    out: list[tuple[str, Any]] = []
    if isinstance(predicate, Leaf):
        if predicate.kind == "key" and predicate.op not in ("exists", "contains", "not_contains"):
            actual = lookup("key", predicate.name)
            if (
                actual is not _MISSING
                and _evaluate_leaf(predicate, lookup) is None
                and not isinstance(predicate.operand, Ref)
            ):
                out.append((predicate.name, actual))
    elif isinstance(predicate, Not):
        out.extend(unreadable_values(predicate.child, lookup))
    else:
        for child in predicate.children:
            out.extend(unreadable_values(child, lookup))
    return out


def names_in(predicate: Predicate | None, kind: str, needed_only: bool = False) -> Iterator[str]:
    """Every config key (kind="key") or fact (kind="fact") a predicate reads, in order, refs included.
    `needed_only`: not those of leaves that say what their absence means (`if_missing`)."""
    if predicate is None:
        return
    if isinstance(predicate, Leaf):
        if predicate.kind == kind and not (needed_only and predicate.if_missing is not None):
            yield predicate.name
        if kind == "key" and isinstance(predicate.operand, Ref):
            yield predicate.operand.key
    elif isinstance(predicate, Not):
        yield from names_in(predicate.child, kind, needed_only)
    else:
        for child in predicate.children:
            yield from names_in(child, kind, needed_only)


def describe(predicate: Predicate) -> str:
    """Human-readable form, for `explain` and docs."""
    if isinstance(predicate, Leaf):
        operand = f"<{predicate.operand.key}>" if isinstance(predicate.operand, Ref) else repr(predicate.operand)
        text = f"{predicate.name} {predicate.op} {operand}"
        if predicate.kind == "fact":
            text = f"fact {text}"
        if predicate.if_missing is not None:
            text += f" (if missing: {str(predicate.if_missing).lower()})"
        return text
    if isinstance(predicate, Not):
        return f"not ({describe(predicate.child)})"
    joiner = " and " if isinstance(predicate, All) else " or "
    return "(" + joiner.join(describe(child) for child in predicate.children) + ")"
