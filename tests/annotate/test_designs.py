"""Assignment designs are pure functions: properties checked without a database."""

import itertools
import math
from collections import Counter, defaultdict
from decimal import ROUND_HALF_UP, Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from annotate.designs import (
    balanced_by_group,
    insert_attention_checks,
    k_raters,
    pairwise_overlap,
    partial_overlap,
    rater_queue,
    shuffled_order,
    stratified_sample,
    top_up_assignments,
)


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


# --- batch designs -------------------------------------------------------------------

FAST = settings(max_examples=60, deadline=None)
seeds = st.integers(0, 2**32)


def raters_by_item(pairs):
    by_item = defaultdict(list)
    for item, rater in pairs:
        by_item[item].append(rater)
    return by_item


def assert_loads_within_one(pairs, raters):
    load = Counter(rater for _, rater in pairs)
    loads = [load[r] for r in raters]
    assert max(loads) - min(loads) <= 1, load


def assert_sorted_and_distinct(pairs):
    assert len(set(pairs)) == len(pairs)  # no rater twice on an item
    assert pairs == sorted(pairs, key=lambda p: (str(p[0]), str(p[1])))


# stratified_sample


@st.composite
def strata_inputs(draw):
    sizes = draw(st.lists(st.integers(1, 12), min_size=1, max_size=6))
    items = [(f"i{s}-{j}", ("type", s % 3, s)) for s, size in enumerate(sizes) for j in range(size)]
    items = draw(st.permutations(items))
    return items, draw(st.integers(0, len(items))), draw(seeds)


@FAST
@given(strata_inputs())
def test_stratified_sample_gives_each_stratum_floor_or_ceiling_of_its_quota_and_n_in_total(inputs):
    items, n, seed = inputs
    sample = stratified_sample(items, n, seed=seed)
    assert len(sample) == len(set(sample)) == n
    assert sample == sorted(sample, key=str)
    stratum = dict(items)
    size = Counter(stratum.values())
    got = Counter(stratum[i] for i in sample)
    total = len(items)
    for key, c in size.items():
        assert n * c // total <= got[key] <= -(-n * c // total)  # within one item of n·share
    # largest remainder: a stratum rounded up never has a smaller remainder than one rounded down
    up = [n * c % total for key, c in size.items() if got[key] > n * c // total]
    down = [n * c % total for key, c in size.items() if got[key] == n * c // total and n * c % total]
    assert not up or not down or min(up) >= max(down)


@FAST
@given(strata_inputs())
def test_stratified_sample_depends_on_the_seed_not_on_the_input_order(inputs):
    items, n, seed = inputs
    assert stratified_sample(items, n, seed=seed) == stratified_sample(list(reversed(items)), n, seed=seed)


def test_stratified_sample_matches_the_published_largest_remainder_example():
    # Wikipedia, "Largest remainder method", Hare quota: 47,000/16,000/15,800/12,000/
    # 6,100/3,100 votes for 10 seats give 5/2/1/1/1/0 seats (votes scaled by 1/100).
    votes = {"yellow": 470, "white": 160, "red": 158, "green": 120, "blue": 61, "pink": 31}
    items = [(f"{party}-{j}", party) for party, count in votes.items() for j in range(count)]
    sample = stratified_sample(items, 10, seed=0)
    got = Counter(item_id.split("-")[0] for item_id in sample)
    assert [got[p] for p in votes] == [5, 2, 1, 1, 1, 0]


def test_stratified_sample_is_random_within_a_stratum():
    items = [(i, "one stratum") for i in range(100)]
    assert stratified_sample(items, 5, seed=1) != stratified_sample(items, 5, seed=2)


def test_stratified_sample_breaks_ties_between_equal_remainders_by_seed_not_by_key():
    items = [(1, "a"), (2, "b")]  # n=1: both strata have quota 0.5
    assert {tuple(stratified_sample(items, 1, seed=seed)) for seed in range(10)} == {(1,), (2,)}


def test_stratified_sample_rejects_impossible_requests():
    items = [(1, "a"), (2, "b")]
    with pytest.raises(ValueError, match="cannot sample 3 items from only 2"):
        stratified_sample(items, 3, seed=0)
    with pytest.raises(ValueError, match="negative"):
        stratified_sample(items, -1, seed=0)
    with pytest.raises(ValueError, match="distinct"):
        stratified_sample([(1, "a"), (1, "b")], 1, seed=0)


# k_raters


@st.composite
def items_and_raters(draw, min_raters=1):
    raters = [f"r{j}" for j in range(draw(st.integers(min_raters, 7)))]
    items = list(range(draw(st.integers(0, 40))))
    return items, raters


@FAST
@given(items_and_raters(), st.data(), seeds)
def test_k_raters_gives_every_item_k_distinct_raters_with_workloads_within_one(inputs, data, seed):
    items, raters = inputs
    k = data.draw(st.integers(1, len(raters)))
    pairs = k_raters(items, raters, k, seed=seed)
    assert_sorted_and_distinct(pairs)
    by_item = raters_by_item(pairs)
    assert set(by_item) == set(items)
    assert all(len(by_item[item]) == k for item in items)
    assert_loads_within_one(pairs, raters)
    assert pairs == k_raters(list(reversed(items)), raters, k, seed=seed)


def test_k_raters_mixes_which_raters_share_items():
    # With a fixed tie-break, 4 raters and k=2 would always pair the same two couples.
    for seed in range(5):
        pairs = k_raters(range(24), ["a", "b", "c", "d"], 2, seed=seed)
        couples = {tuple(sorted(raters)) for raters in raters_by_item(pairs).values()}
        assert len(couples) > 2


def test_k_raters_with_k_equal_to_the_raters_gives_everyone_everything():
    assert k_raters(["x", "y"], ["b", "a"], 2, seed=5) == [("x", "a"), ("x", "b"), ("y", "a"), ("y", "b")]


@pytest.mark.parametrize("k", [0, 3])
def test_k_raters_rejects_k_outside_one_to_the_number_of_raters(k):
    with pytest.raises(ValueError, match="k must be between 1 and"):
        k_raters([1, 2], ["a", "b"], k, seed=0)


# partial_overlap


def half_up(share, n):
    return int((Decimal(str(share)) * n).quantize(Decimal(1), rounding=ROUND_HALF_UP))


@FAST
@given(items_and_raters(min_raters=2), st.floats(0, 1), seeds)
def test_partial_overlap_doubles_the_share_and_balances_workloads_and_overlap(inputs, share, seed):
    items, raters = inputs
    pairs = partial_overlap(items, raters, share=share, seed=seed)
    assert_sorted_and_distinct(pairs)
    by_item = raters_by_item(pairs)
    assert set(by_item) == set(items)
    doubled = [item for item in items if len(by_item[item]) == 2]
    assert len(doubled) == half_up(share, len(items))
    assert all(len(by_item[item]) in (1, 2) for item in items)
    assert_loads_within_one(pairs, raters)
    assert_loads_within_one([p for p in pairs if p[0] in doubled], raters)
    assert pairs == partial_overlap(items, raters, share=share, seed=seed)


def test_partial_overlap_rounds_half_up_and_chooses_the_doubled_items_by_seed():
    pairs = partial_overlap(range(10), ["a", "b"], share=0.25, seed=0)
    assert len(pairs) == 13  # 2.5 doubled items round to 3, not Python's round() 2
    doubled = {
        seed: {
            i for i, r in raters_by_item(partial_overlap(range(30), "ab", share=0.5, seed=seed)).items() if len(r) == 2
        }
        for seed in (1, 2)
    }
    assert doubled[1] != doubled[2]


def test_partial_overlap_extremes():
    assert partial_overlap([1, 2], ["a"], share=0, seed=0) == [(1, "a"), (2, "a")]
    assert partial_overlap([1, 2], ["a", "b"], share=1, seed=0) == [(1, "a"), (1, "b"), (2, "a"), (2, "b")]


@pytest.mark.parametrize(
    ("raters", "share", "message"),
    [
        (["a", "b"], 1.5, "between 0 and 1"),
        (["a", "b"], -0.1, "between 0 and 1"),
        ([], 0.5, "at least one rater"),
        (["a"], 0.5, "only 1 rater"),
        (["a", "a"], 0.5, "distinct"),
    ],
)
def test_partial_overlap_rejects_impossible_requests(raters, share, message):
    with pytest.raises(ValueError, match=message):
        partial_overlap([1, 2, 3, 4], raters, share=share, seed=0)


# pairwise_overlap


@st.composite
def pairwise_inputs(draw):
    r = draw(st.integers(2, 6))
    raters = [f"r{j}" for j in range(r)]
    m = draw(st.integers(1, 3))
    needed = m * r * (r - 1) // 2
    items = list(range(draw(st.integers(needed, needed + 25))))
    return items, raters, m, draw(seeds)


@FAST
@given(pairwise_inputs())
def test_pairwise_overlap_gives_every_pair_of_raters_m_shared_items(inputs):
    items, raters, m, seed = inputs
    pairs = pairwise_overlap(items, raters, m=m, seed=seed)
    assert_sorted_and_distinct(pairs)
    by_item = raters_by_item(pairs)
    assert set(by_item) == set(items)
    assert all(len(by_item[item]) in (1, 2) for item in items)
    shared = Counter(tuple(sorted(r)) for r in by_item.values() if len(r) == 2)
    assert shared == {couple: m for couple in itertools.combinations(sorted(raters), 2)}
    assert_loads_within_one(pairs, raters)
    assert pairs == pairwise_overlap(items, raters, m=m, seed=seed)


def test_pairwise_overlap_hand_example_three_raters_three_items():
    pairs = pairwise_overlap(["x", "y", "z"], ["a", "b", "c"], m=1, seed=7)
    assert sorted(tuple(r) for r in raters_by_item(pairs).values()) == [("a", "b"), ("a", "c"), ("b", "c")]


def test_pairwise_overlap_rejects_impossible_requests():
    with pytest.raises(ValueError, match="need 6 items but there are only 5"):
        pairwise_overlap(range(5), ["a", "b", "c", "d"], m=1, seed=0)
    pairwise_overlap(range(6), ["a", "b", "c", "d"], m=1, seed=0)  # exactly enough
    with pytest.raises(ValueError, match="at least 2 raters"):
        pairwise_overlap(range(5), ["a"], m=1, seed=0)
    with pytest.raises(ValueError, match="m must be at least 1"):
        pairwise_overlap(range(5), ["a", "b"], m=0, seed=0)


# balanced_by_group


def generator_counts_within_one(pairs, items, raters):
    generator = {item_id: g for item_id, _, g in items}
    seen = Counter((rater, generator[item]) for item, rater in pairs)
    for g in set(generator.values()):
        counts = [seen[(r, g)] for r in raters]
        assert max(counts) - min(counts) <= 1, (g, counts)


def sources_split(pairs, items):
    by_item = raters_by_item(pairs)
    rater_sets = defaultdict(set)
    for item_id, source, _ in items:
        rater_sets[source].add(frozenset(by_item[item_id]))
    return sorted(source for source, sets in rater_sets.items() if len(sets) > 1)


@st.composite
def factorial_inputs(draw):
    raters = [f"r{j}" for j in range(draw(st.integers(1, 6)))]
    generators = [f"g{j}" for j in range(draw(st.integers(1, 4)))]
    items = [(f"s{s}-{g}", f"s{s}", g) for s in range(draw(st.integers(0, 12))) for g in generators]
    return items, raters, draw(st.integers(1, len(raters))), draw(seeds)


@FAST
@given(factorial_inputs())
def test_balanced_by_group_keeps_sources_whole_and_generators_balanced_in_source_by_system_designs(inputs):
    items, raters, k, seed = inputs
    pairs = balanced_by_group(items, raters, k=k, seed=seed)
    assert_sorted_and_distinct(pairs)
    by_item = raters_by_item(pairs)
    assert all(len(by_item[item_id]) == k for item_id, _, _ in items)
    generator_counts_within_one(pairs, items, raters)
    assert sources_split(pairs, items) == []
    assert pairs == balanced_by_group(list(reversed(items)), raters, k=k, seed=seed)


@st.composite
def uneven_inputs(draw):
    raters = [f"r{j}" for j in range(draw(st.integers(1, 6)))]
    mixes = draw(st.lists(st.lists(st.sampled_from("ABC"), min_size=1, max_size=4), max_size=10))
    items = [(f"s{s}-{j}", f"s{s}", g) for s, mix in enumerate(mixes) for j, g in enumerate(mix)]
    return items, raters, draw(st.integers(1, len(raters))), draw(seeds)


@FAST
@given(uneven_inputs())
def test_balanced_by_group_always_balances_generators_per_rater(inputs):
    items, raters, k, seed = inputs
    pairs = balanced_by_group(items, raters, k=k, seed=seed)
    assert_sorted_and_distinct(pairs)
    by_item = raters_by_item(pairs)
    assert all(len(by_item[item_id]) == k for item_id, _, _ in items)
    assert len(pairs) == k * len(items)
    generator_counts_within_one(pairs, items, raters)


def test_balanced_by_group_gives_whole_sources_in_a_small_source_by_system_design():
    items = [("s1-A", "s1", "A"), ("s1-B", "s1", "B"), ("s2-A", "s2", "A"), ("s2-B", "s2", "B")]
    pairs = balanced_by_group(items, ["x", "y"], k=1, seed=3)
    by_rater = defaultdict(set)
    for item, rater in pairs:
        by_rater[rater].add(item.split("-")[0])
    assert sorted(map(sorted, by_rater.values())) == [["s1"], ["s2"]]


def test_balanced_by_group_splits_as_few_sources_as_needed_when_whole_sources_cannot_balance():
    # Three sources with two summaries of generator A each: whole sources would give
    # one rater 4 A's and the other 2, so one source has to be split to reach 3 and 3.
    items = [(f"{s}-{j}", s, "A") for s in ("s1", "s2", "s3") for j in (1, 2)]
    for seed in range(5):
        pairs = balanced_by_group(items, ["x", "y"], k=1, seed=seed)
        assert Counter(rater for _, rater in pairs) == {"x": 3, "y": 3}
        assert len(sources_split(pairs, items)) == 1


def test_balanced_by_group_rejects_impossible_requests():
    with pytest.raises(ValueError, match="k must be between 1 and"):
        balanced_by_group([("i", "s", "g")], ["x"], k=2, seed=0)
    with pytest.raises(ValueError, match="distinct"):
        balanced_by_group([("i", "s", "g"), ("i", "t", "g")], ["x"], k=1, seed=0)


# rater_queue


@st.composite
def grouped_items(draw):
    sizes = draw(st.lists(st.integers(1, 6), max_size=8))
    return [(f"g{g}-{j}", f"g{g}") for g, size in enumerate(sizes) for j in range(size)], draw(seeds)


@FAST
@given(grouped_items())
def test_rater_queue_is_a_permutation_with_each_group_in_one_sitting(inputs):
    items, seed = inputs
    queue = rater_queue(items, seed=seed)
    assert sorted(queue) == sorted(item_id for item_id, _ in items)
    group = dict(items)
    runs = [g for j, g in enumerate(group[i] for i in queue) if j == 0 or g != group[queue[j - 1]]]
    assert len(runs) == len(set(runs))  # a group never comes back after another started
    assert queue == rater_queue(list(reversed(items)), seed=seed)


def test_rater_queue_shuffles_groups_and_items_within_groups_by_seed():
    items = [(f"g{g}-{j}", f"g{g}") for g in range(6) for j in range(6)]
    queues = [rater_queue(items, seed=f"batch:{rater}") for rater in range(8)]
    assert len({queue[0].split("-")[0] for queue in queues}) > 1  # the first group varies
    assert len({tuple(i for i in queue if i.startswith("g0-")) for queue in queues}) > 1  # so does g0's inner order


# insert_attention_checks


@FAST
@given(st.integers(0, 50), st.integers(1, 8), st.integers(1, 4), seeds)
def test_attention_checks_come_once_per_block_never_first_never_adjacent(length, every, n_checks, seed):
    order = list(range(length))
    checks = [f"check{j}" for j in range(n_checks)]
    result = insert_attention_checks(order, checks, every=every, seed=seed)
    assert [x for x in result if x not in checks] == order
    positions = [j for j, x in enumerate(result) if x in checks]
    assert len(positions) == length // every
    assert 0 not in positions
    real_before = [p - j for j, p in enumerate(positions)]  # real items before each check
    for block, before in enumerate(real_before):
        assert block * every + 1 <= before <= (block + 1) * every
    used = [result[p] for p in positions]
    assert all(checks.index(b) == (checks.index(a) + 1) % n_checks for a, b in itertools.pairwise(used))
    assert result == insert_attention_checks(order, checks, every=every, seed=seed)


def test_attention_checks_every_item_and_short_orders():
    assert insert_attention_checks(["a", "b"], ["C"], every=1, seed=0) == ["a", "C", "b", "C"]
    assert insert_attention_checks(["a", "b"], ["C"], every=3, seed=0) == ["a", "b"]


def test_attention_check_positions_depend_on_the_seed():
    results = {tuple(insert_attention_checks(range(40), ["C"], every=5, seed=s)) for s in range(3)}
    assert len(results) > 1


def test_raters_with_few_blocks_do_not_all_get_the_first_check():
    checks = [f"check{j}" for j in range(5)]
    used = {x for seed in range(10) for x in insert_attention_checks(range(3), checks, every=3, seed=seed)} - {0, 1, 2}
    assert len(used) > 1


def test_attention_checks_reject_bad_arguments():
    with pytest.raises(ValueError, match="every must be at least 1"):
        insert_attention_checks([1], ["C"], every=0, seed=0)
    with pytest.raises(ValueError, match="at least one attention check"):
        insert_attention_checks([1], [], every=1, seed=0)


@st.composite
def comparison_inputs(draw):
    n_systems = draw(st.integers(2, 5))
    sources = {
        f"src{i}": {f"sys{s}": f"src{i}-sys{s}" for s in sorted(draw(st.sets(st.integers(0, n_systems - 1))))}
        for i in range(draw(st.integers(0, 12)))
    }
    raters = list(range(draw(st.integers(1, 6))))
    k = draw(st.integers(1, len(raters)))
    per_source = draw(st.one_of(st.none(), st.integers(1, 4)))
    return sources, raters, k, per_source, draw(st.integers(0, 2**32))


@settings(max_examples=200)
@given(comparison_inputs())
def test_comparisons_are_balanced_in_order_and_never_repeat_for_a_rater(inputs):
    from annotate.designs import comparison_design

    sources, raters, k, per_source, seed = inputs
    rows = comparison_design(sources, raters, k=k, per_source=per_source, seed=seed)
    system_of = {summary: system for by_system in sources.values() for system, summary in by_system.items()}
    comparisons = Counter((source, frozenset((left, right))) for source, left, right, _ in rows)
    # k raters per comparison, never the same rater twice on the same two summaries.
    assert all(count == k for count in comparisons.values())
    assert len({(source, frozenset((left, right)), rater) for source, left, right, rater in rows}) == len(rows)
    for source, left, right, _ in rows:
        assert system_of[left] != system_of[right] and {left, right} <= set(sources[source].values())
    # Every pair of a source's systems (all pairs), or per_source of them.
    for source, by_system in sources.items():
        possible = math.comb(len(by_system), 2)
        chosen = sum(1 for (s, _), _count in comparisons.items() if s == source)
        assert chosen == (possible if per_source is None else min(per_source, possible))
    # Left/right: for every rater and pair of systems, each order within one of the other.
    orders = Counter((rater, system_of[left], system_of[right]) for _, left, right, rater in rows)
    for (rater, a, b), count in orders.items():
        assert abs(count - orders[(rater, b, a)]) <= 1
    # Workloads within one.
    load = Counter(rater for *_, rater in rows)
    if rows:
        assert max(load[r] for r in raters) - min(load[r] for r in raters) <= 1
    # The same inputs and seed give the same design.
    assert comparison_design(sources, raters, k=k, per_source=per_source, seed=seed) == rows


def test_per_source_spreads_the_pairs_of_systems_evenly():
    from annotate.designs import comparison_design

    sources = {f"s{i}": {sys: f"s{i}-{sys}" for sys in "ABCD"} for i in range(12)}  # 6 pairs, 12 sources
    rows = comparison_design(sources, ["r1"], k=1, per_source=2, seed=1)
    uses = Counter(frozenset((left.split("-")[1], right.split("-")[1])) for _, left, right, _ in rows)
    assert len(uses) == 6 and set(uses.values()) == {4}  # 24 comparisons, each pair 4 times


# --- a batch's plan: which rater gets which item, where in their queue -----------------------


def test_batch_work_gives_gold_to_every_rater_once_after_the_designs_items():
    from annotate.designs import batch_work

    work = batch_work([("s1", 1), ("g1", 1), ("s2", 2)], raters=[1, 2, 3], gold=["g1", "g2"])
    assert work.queues == ((1, ("s1", "g1", "g2")), (2, ("s2", "g1", "g2")), (3, ("g1", "g2")))
    assert work.skipped_pairs == 0


def test_batch_work_skips_what_a_rater_already_has_and_drops_raters_left_with_nothing():
    from annotate.designs import batch_work

    live = {(1, "s1"), (2, "s2"), (2, "g1")}
    work = batch_work([("s1", 1), ("s3", 1), ("s2", 2)], raters=[2, 1], gold=["g1"], live=live)
    assert work.queues == ((1, ("s3", "g1")),)  # by rater id; rater 2 has all of its items
    assert work.skipped_pairs == 3


def test_held_items_are_those_every_chosen_rater_has_and_none_without_raters():
    from annotate.designs import held_items

    live = {(1, "a"), (2, "a"), (1, "b")}
    assert held_items(["a", "b", "c"], [1, 2], live) == {"a"}
    assert held_items(["a", "b"], [1], live) == {"a", "b"}
    assert held_items(["a"], [], live) == set()


@st.composite
def batch_plans(draw):
    raters = list(range(1, draw(st.integers(1, 4)) + 1))
    items = [f"s{i}" for i in range(draw(st.integers(1, 30)))]
    groups = {item: f"src{draw(st.integers(0, 5))}" for item in items}
    pairs = [(item, rater) for item in items for rater in raters if draw(st.booleans())]
    live = {(rater, item) for item, rater in pairs if draw(st.integers(0, 4)) == 0}
    starts = {rater: draw(st.integers(0, 50)) for rater in raters}
    seeds = {rater: draw(st.integers(0, 2**31)) for rater in raters}
    return raters, pairs, groups, live, starts, seeds, draw(st.integers(0, 2**32))


@given(batch_plans())
@settings(max_examples=60)
def test_each_raters_queue_holds_its_new_items_from_its_next_position_one_source_at_a_time(plan_inputs):
    from annotate.designs import batch_work, plan_queues

    raters, pairs, groups, live, starts, seeds, seed = plan_inputs
    work = batch_work(pairs, raters=raters, live=live)
    plan = plan_queues(work, groups=groups, seed=seed, order_seeds=seeds, starts=starts, live=live)
    assert plan.skipped_pairs == len([p for p in pairs if (p[1], p[0]) in live])
    for rater in raters:
        rows = sorted((row for row in plan.assignments if row.rater_id == rater), key=lambda row: row.position)
        wanted = {item for item, r in pairs if r == rater and (rater, item) not in live}
        assert {row.item_id for row in rows} == wanted and len(rows) == len(wanted)
        assert [row.position for row in rows] == list(range(starts[rater], starts[rater] + len(rows)))
        sources = [groups[row.item_id] for row in rows]
        # A source's summaries are rated in one sitting: its run is never interrupted.
        runs = [source for i, source in enumerate(sources) if i == 0 or sources[i - 1] != source]
        assert len(runs) == len(set(runs))
    again = plan_queues(work, groups=groups, seed=seed, order_seeds=seeds, starts=starts, live=live)
    assert again == plan


def test_attention_checks_join_each_queue_once_and_never_one_the_rater_already_has():
    from annotate.designs import batch_work, plan_queues

    items = [f"s{i}" for i in range(12)]
    pairs = [(item, rater) for item in items for rater in (1, 2)]
    live = {(2, "c1")}  # rater 2 saw check c1 in an earlier batch
    work = batch_work(pairs, raters=[1, 2], live=live)
    plan = plan_queues(
        work,
        groups={item: item for item in items},
        seed=3,
        order_seeds={1: 11, 2: 22},
        starts={1: 0, 2: 0},
        checks=["c1", "c2"],
        attention_every=4,
        live=live,
    )
    queues = {
        rater: [row.item_id for row in sorted(plan.assignments, key=lambda row: row.position) if row.rater_id == rater]
        for rater in (1, 2)
    }
    assert sorted(c for c in queues[1] if c.startswith("c")) == ["c1", "c2"]  # 3 slots, 2 distinct checks
    assert [c for c in queues[2] if c.startswith("c")] == ["c2"]
    for queue in queues.values():
        assert not queue[0].startswith("c") and len(set(queue)) == len(queue)
        assert sorted(item for item in queue if item.startswith("s")) == sorted(items)


def test_comparison_orders_show_both_sides_and_repeat_for_the_same_seed():
    from annotate.designs import comparison_orders

    members = {item: ["left", "right"] for item in range(200)}
    orders = comparison_orders(members, [1, 2], seed=9)
    assert set(orders) == {(rater, item) for rater in (1, 2) for item in range(200)}
    flipped = Counter(order == ["right", "left"] for order in orders.values())
    assert set(flipped) == {True, False}  # both sides shown
    assert all(order in (["left", "right"], ["right", "left"]) for order in orders.values())
    assert comparison_orders(members, [1, 2], seed=9) == orders
