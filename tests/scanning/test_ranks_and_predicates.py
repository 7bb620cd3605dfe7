from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from offloaddoctor.scanning.ranks import format_ranks, parse_ranks
from offloaddoctor.catalog.predicates import All, AnyOf, Leaf, Not, Ref, evaluate, missing, parse_predicate


def test_compact_rank_sets():
    assert format_ranks([0, 1, 2, 3, 4, 5, 6, 7, 12]) == "0-7,12"
    assert format_ranks([5]) == "5"
    assert format_ranks([]) == ""
    assert format_ranks([3, 1, 2, 2]) == "1-3"


@given(st.sets(st.integers(0, 4096), max_size=200))
def test_rank_sets_round_trip(ranks):
    assert parse_ranks(format_ranks(ranks)) == sorted(ranks)


def lookup_from(values):
    return lambda kind, name: values.get(name, missing())


def test_three_valued_logic():
    pred = parse_predicate({"all": [{"key": "a", "eq": True}, {"key": "b", "gt": 1}]}, "t")
    assert evaluate(pred, lookup_from({"a": True, "b": 4})) is True
    assert evaluate(pred, lookup_from({"a": True})) is None
    assert evaluate(pred, lookup_from({"a": False})) is False  # a known false decides an `all`
    anyp = parse_predicate({"any": [{"key": "a", "eq": True}, {"key": "b", "gt": 1}]}, "t")
    assert evaluate(anyp, lookup_from({"b": 2})) is True  # a known true decides an `any`
    assert evaluate(Not(Leaf("key", "a", "eq", True)), lookup_from({})) is None


def test_coercion_of_printed_values():
    leaf = Leaf("key", "x", "eq", True)
    assert evaluate(leaf, lookup_from({"x": "True"})) is True
    assert evaluate(Leaf("key", "x", "eq", None), lookup_from({"x": "None"})) is True
    assert evaluate(Leaf("key", "x", "ne", "none"), lookup_from({"x": None})) is False
    assert evaluate(Leaf("key", "x", "gt", 1), lookup_from({"x": "4"})) is True
    assert evaluate(Leaf("key", "x", "gt", 1), lookup_from({"x": "four"})) is None


def test_refs_if_missing_and_multiples():
    leaf = Leaf("key", "layers", "ge", Ref("num_layers"))
    assert evaluate(leaf, lookup_from({"layers": 8, "num_layers": 8})) is True
    assert evaluate(leaf, lookup_from({"layers": 8})) is None
    assert evaluate(Leaf("key", "x", "eq", 1, if_missing=False), lookup_from({})) is False
    assert evaluate(Leaf("key", "x", "not_multiple_of", 2), lookup_from({"x": 3})) is True
    assert evaluate(Leaf("key", "x", "exists", True), lookup_from({})) is False


def test_a_list_value_is_in_a_set_when_each_of_its_items_is():
    """`moe_router_load_balancing_type: [aux_loss, seq_aux_loss]`: megatron-core checks each item; one unreadable
    item leaves the answer unknown unless another is known to be outside."""
    inside = Leaf("key", "x", "in", ["aux_loss", "seq_aux_loss"])
    assert evaluate(inside, lookup_from({"x": ["aux_loss", "seq_aux_loss"]})) is True
    assert evaluate(inside, lookup_from({"x": ("aux_loss", "sinkhorn")})) is False
    assert evaluate(inside, lookup_from({"x": []})) is True
    numbers = Leaf("key", "x", "in", [1, 2])
    assert evaluate(numbers, lookup_from({"x": [1, "one"]})) is None  # "one" is no number: unknown
    assert evaluate(numbers, lookup_from({"x": ["one", 3]})) is False  # 3 is known to be outside
    assert evaluate(Leaf("key", "x", "not_in", ["aux_loss"]), lookup_from({"x": ["aux_loss", "sinkhorn"]})) is True


@given(st.lists(st.sampled_from([True, False, None]), min_size=1, max_size=6))
def test_all_and_any_follow_kleene_logic(values):
    leaves = tuple(Leaf("key", f"k{i}", "eq", True) for i in range(len(values)))
    known = {f"k{i}": v for i, v in enumerate(values) if v is not None}
    lookup = lookup_from(known)
    expected_all = False if False in values else (None if None in values else True)
    expected_any = True if True in values else (None if None in values else False)
    assert evaluate(All(leaves), lookup) is expected_all
    assert evaluate(AnyOf(leaves), lookup) is expected_any
