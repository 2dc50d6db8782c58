"""Assignment designs are pure functions: properties checked without a database."""

from collections import Counter

from hypothesis import given
from hypothesis import strategies as st

from annotate.designs import shuffled_order, top_up_assignments


@st.composite
def design_inputs(draw):
    raters = list(range(draw(st.integers(1, 7))))
    items = list(range(draw(st.integers(0, 40))))
    per_item = draw(st.integers(1, len(raters)))
    return items, raters, per_item, draw(st.integers(0, 2**32))


@given(design_inputs())
def test_every_item_gets_k_distinct_raters_and_workloads_are_within_one(inputs):
    items, raters, per_item, seed = inputs
    pairs = top_up_assignments(items=items, raters=raters, per_item=per_item, seed=seed)
    assert len(set(pairs)) == len(pairs)  # no rater twice on an item
    per = Counter(item for item, _ in pairs)
    assert all(per[item] == per_item for item in items)
    load = Counter(rater for _, rater in pairs)
    loads = [load[r] for r in raters]
    assert max(loads) - min(loads) <= 1


@given(design_inputs())
def test_same_seed_same_design_and_top_up_is_idempotent(inputs):
    items, raters, per_item, seed = inputs
    first = top_up_assignments(items=items, raters=raters, per_item=per_item, seed=seed)
    assert first == top_up_assignments(items=items, raters=raters, per_item=per_item, seed=seed)
    existing = {}
    for item, rater in first:
        existing.setdefault(item, set()).add(rater)
    assert top_up_assignments(items=items, raters=raters, per_item=per_item, existing=existing, seed=seed) == []


def test_top_up_counts_existing_raters():
    pairs = top_up_assignments(items=["a", "b"], raters=["r1", "r2"], per_item=2, existing={"a": {"r1"}}, seed=1)
    assert sorted(pairs) == [("a", "r2"), ("b", "r1"), ("b", "r2")]


def test_shuffled_order_is_a_seeded_permutation():
    ids = list(range(20))
    assert sorted(shuffled_order(ids, seed=3)) == ids
    assert shuffled_order(ids, seed=3) == shuffled_order(list(reversed(ids)), seed=3)
    assert shuffled_order(ids, seed=3) != shuffled_order(ids, seed=4)
