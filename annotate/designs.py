"""Assignment designs as pure functions over ids (no database).

The services in `annotate.services` persist what these return.
"""

from __future__ import annotations

import itertools
import math
import random
from collections import Counter
from collections.abc import Hashable, Iterable, Mapping, Sequence, Set
from dataclasses import dataclass
from fractions import Fraction


def top_up_assignments(
    *,
    items: Sequence[Hashable],
    raters: Sequence[Hashable],
    per_item: int,
    existing: Mapping[Hashable, Iterable[Hashable]] | None = None,
    seed: int,
) -> list[tuple[Hashable, Hashable]]:
    """Give every item `per_item` distinct raters, counting the ones it already has.

    New (item, rater) pairs go to the least-loaded eligible raters (load counts the
    existing assignments among `items` too), ties broken by a seeded shuffle, so
    workloads stay within one item of each other whenever the existing ones allow
    it. The same inputs and seed always give the same pairs.
    """
    if per_item < 1:
        raise ValueError("per_item must be at least 1")
    if len(set(raters)) != len(raters):
        raise ValueError("raters must be distinct")
    if per_item > len(raters):
        raise ValueError(f"cannot give each item {per_item} raters with only {len(raters)} raters")
    existing = {item: set(existing.get(item, ())) for item in items} if existing else {i: set() for i in items}
    rng = random.Random(seed)
    load = {rater: 0 for rater in raters}
    for assigned in existing.values():
        for rater in assigned:
            if rater in load:
                load[rater] += 1
    tie_break = {rater: rng.random() for rater in raters}
    pairs: list[tuple[Hashable, Hashable]] = []
    for item in items:
        have = existing[item]
        need = per_item - len(have & set(raters))
        if need <= 0:
            continue
        eligible = sorted((r for r in raters if r not in have), key=lambda r: (load[r], tie_break[r]))
        for rater in eligible[:need]:
            pairs.append((item, rater))
            load[rater] += 1
    return pairs


def shuffled_order(item_ids: Sequence[Hashable], *, seed: int | str) -> list[Hashable]:
    """A rater's queue order: the items sorted by id, then shuffled with the seed."""
    ordered = sorted(item_ids, key=str)
    random.Random(seed).shuffle(ordered)
    return ordered


# --- Batch designs -------------------------------------------------------------------
#
# Conventions shared by the functions below:
# - ids only need to be hashable; wherever an order is needed they are sorted by
#   `str(id)` first, so the result does not depend on the order the caller passed them
#   in (as long as distinct ids have distinct strings);
# - `seed` is an int or a str (e.g. f"{batch_seed}:{rater_id}"); `random.Random` seeds
#   both deterministically, independent of PYTHONHASHSEED;
# - (item, rater) pairs come back sorted by (str(item), str(rater));
# - impossible requests raise ValueError instead of returning a weaker design.

Pair = tuple[Hashable, Hashable]


def _require_distinct(values: Sequence[Hashable], what: str) -> None:
    if len(set(values)) != len(values):
        raise ValueError(f"{what} must be distinct")


def _by_str(values: Iterable[Hashable]) -> list[Hashable]:
    return sorted(values, key=str)


def _sorted_pairs(pairs: Iterable[Pair]) -> list[Pair]:
    return sorted(pairs, key=lambda pair: (str(pair[0]), str(pair[1])))


def _least_loaded(
    raters: Sequence[Hashable], load: Mapping[Hashable, int], count: int, rng: random.Random
) -> list[Hashable]:
    """The `count` least-loaded raters, ties broken afresh by `rng`.

    Giving one more item to the `count` least-loaded raters keeps loads within one of
    each other if they were. The tie-break is redrawn on every call (unlike
    `top_up_assignments`) so that with k >= 2 the rater pairs mix instead of the same
    raters always being paired, which would confound raters for agreement analysis.
    """
    tie = {rater: rng.random() for rater in raters}
    return sorted(raters, key=lambda rater: (load[rater], tie[rater]))[:count]


def stratified_sample(items: Sequence[tuple[Hashable, Hashable]], n: int, *, seed: int | str) -> list[Hashable]:
    """Sample `n` item ids with proportional allocation across strata.

    `items` are (id, stratum key) pairs; a key may be a tuple of several fields, e.g.
    ("lncRNA", "long context"). A stratum holding c of the N items gets its quota
    n·c/N rounded by the largest-remainder (Hamilton) method: every stratum gets
    floor(n·c/N), and the items still missing go one each to the strata with the
    largest remainders, so each stratum gets floor(n·c/N) or one more and the total is
    exactly n. Remainders are compared exactly (integers, no floats); equal remainders
    are broken by the seed, not by the key, so no stratum is favoured systematically.
    Within a stratum the items are a seeded simple random sample.

    Returns the chosen ids sorted by str(id). Raises ValueError when n is negative,
    n > len(items), or ids repeat.
    """
    ids = [item_id for item_id, _ in items]
    _require_distinct(ids, "item ids")
    if n < 0:
        raise ValueError(f"cannot sample a negative number of items ({n})")
    if n > len(items):
        raise ValueError(f"cannot sample {n} items from only {len(items)}")
    strata: dict[Hashable, list[Hashable]] = {}
    for item_id, key in items:
        strata.setdefault(key, []).append(item_id)
    rng = random.Random(seed)
    keys = _by_str(strata)
    rng.shuffle(keys)  # a seeded order that breaks ties between equal remainders
    total = len(items)
    allocation = {key: n * len(strata[key]) // total for key in keys}
    short = n - sum(allocation.values())
    by_remainder = sorted(keys, key=lambda key: -(n * len(strata[key]) % total))  # stable: seeded ties
    for key in by_remainder[:short]:
        allocation[key] += 1
    chosen: list[Hashable] = []
    for key in _by_str(strata):
        chosen.extend(rng.sample(_by_str(strata[key]), allocation[key]))
    return _by_str(chosen)


def k_raters(items: Sequence[Hashable], raters: Sequence[Hashable], k: int, *, seed: int | str) -> list[Pair]:
    """Every item rated by exactly `k` distinct raters; workloads within one item.

    Each item in turn goes to the k least-loaded raters, ties redrawn per item, so
    which raters share items varies (see `_least_loaded`). Raises ValueError unless
    1 <= k <= len(raters), or when items or raters repeat.
    """
    _require_distinct(items, "items")
    _require_distinct(raters, "raters")
    if not 1 <= k <= len(raters):
        raise ValueError(f"k must be between 1 and the number of raters ({len(raters)}), got {k}")
    rng = random.Random(seed)
    raters = _by_str(raters)
    load = dict.fromkeys(raters, 0)
    pairs = []
    for item in _by_str(items):
        for rater in _least_loaded(raters, load, k, rng):
            pairs.append((item, rater))
            load[rater] += 1
    return _sorted_pairs(pairs)


def partial_overlap(
    items: Sequence[Hashable], raters: Sequence[Hashable], *, share: float, seed: int | str
) -> list[Pair]:
    """A seeded `share` of the items rated by 2 distinct raters, the others by 1.

    The number doubled is share·len(items) rounded half up on the decimal as written
    (share 0.25 of 10 items doubles 3; Python's round() would give 2), so 0 <= share
    <= 1 is required. Doubled items are assigned first, each to the two least-loaded
    raters, then single items each to the least-loaded rater: total workloads end
    within one item of each other, and so do the raters' counts of doubled items
    (each rater takes part in about the same share of the overlap). Raises ValueError
    for a share outside [0, 1], no raters, fewer than 2 raters when anything is
    doubled, or repeated items or raters.
    """
    _require_distinct(items, "items")
    _require_distinct(raters, "raters")
    if not 0 <= share <= 1:
        raise ValueError(f"share must be between 0 and 1, got {share}")
    if not raters:
        raise ValueError("at least one rater is needed")
    doubled_count = math.floor(Fraction(str(share)) * len(items) + Fraction(1, 2))
    if doubled_count and len(raters) < 2:
        raise ValueError(f"{doubled_count} items need 2 raters but there is only 1 rater")
    rng = random.Random(seed)
    ordered = _by_str(items)
    doubled = set(rng.sample(ordered, doubled_count))
    raters = _by_str(raters)
    load = dict.fromkeys(raters, 0)
    pairs = []
    for item in [i for i in ordered if i in doubled] + [i for i in ordered if i not in doubled]:
        for rater in _least_loaded(raters, load, 2 if item in doubled else 1, rng):
            pairs.append((item, rater))
            load[rater] += 1
    return _sorted_pairs(pairs)


def pairwise_overlap(items: Sequence[Hashable], raters: Sequence[Hashable], *, m: int, seed: int | str) -> list[Pair]:
    """Every pair of raters shares exactly `m` items; every other item is rated once.

    m·C(r, 2) seeded items are set aside, m per pair of raters, and each goes to
    exactly the two raters of its pair (so an item serves one pair and shared items
    measure agreement for every pair equally). That gives every rater the same m·(r-1)
    items; the remaining items then go one at a time to the least-loaded rater, so
    workloads always end within one item. Raises ValueError when m·C(r, 2) >
    len(items), when m < 1 or there are fewer than 2 raters (no pair to overlap), or
    when items or raters repeat.
    """
    _require_distinct(items, "items")
    _require_distinct(raters, "raters")
    if m < 1:
        raise ValueError(f"m must be at least 1, got {m}")
    if len(raters) < 2:
        raise ValueError("pairwise overlap needs at least 2 raters")
    rater_pairs = list(itertools.combinations(_by_str(raters), 2))
    if m * len(rater_pairs) > len(items):
        raise ValueError(
            f"{len(raters)} raters form {len(rater_pairs)} pairs; {m} shared items each need "
            f"{m * len(rater_pairs)} items but there are only {len(items)}"
        )
    rng = random.Random(seed)
    ordered = _by_str(items)
    rng.shuffle(ordered)
    raters = _by_str(raters)
    load = dict.fromkeys(raters, 0)
    pairs = []
    shared, rest = ordered[: m * len(rater_pairs)], ordered[m * len(rater_pairs) :]
    for index, item in enumerate(shared):
        for rater in rater_pairs[index // m]:
            pairs.append((item, rater))
            load[rater] += 1
    for item in rest:
        (rater,) = _least_loaded(raters, load, 1, rng)
        pairs.append((item, rater))
        load[rater] += 1
    return _sorted_pairs(pairs)


def balanced_by_group(
    items: Sequence[tuple[Hashable, Hashable, Hashable]],
    raters: Sequence[Hashable],
    *,
    k: int,
    seed: int | str,
) -> list[Pair]:
    """Every item to `k` distinct raters, each rater seeing every generator equally often.

    `items` are (item id, source id, generator). Guaranteed: every item has exactly k
    distinct raters, and for every generator the raters' counts of its items are
    within one of each other (counted over all raters, including those who see none).

    Sources, not items, are assigned first: largest first (seeded order among equal
    sizes), each source to the k raters with the fewest items of its generators, so
    all summaries of a source reach the same k raters. This is kept whenever it gives
    the generator balance above, which it always does when every source has the same
    generator mix with one summary per generator (source × system designs). Total
    workloads then differ by up to a source's size.

    Otherwise (uneven mixes, or several summaries of one generator per source) the
    balance wins and some sources are split: every rater gets a quota per generator
    (floor or ceiling of k·n_g/r, the extra ones given so that total workloads are
    within one item), and items are filled source by source preferring raters that
    already have that source, so most sources stay whole but some reach a rater only
    in part. Callers who need to know can check whether each source's items share one
    rater set. Raises ValueError unless 1 <= k <= len(raters), or when ids or raters
    repeat.
    """
    _require_distinct([item_id for item_id, _, _ in items], "item ids")
    _require_distinct(raters, "raters")
    if not 1 <= k <= len(raters):
        raise ValueError(f"k must be between 1 and the number of raters ({len(raters)}), got {k}")
    rng = random.Random(seed)
    raters = _by_str(raters)
    generator_of = {item_id: generator for item_id, _, generator in items}
    generators = _by_str({generator for _, _, generator in items})
    sources: dict[Hashable, list[Hashable]] = {}
    for item_id, source, _ in items:
        sources.setdefault(source, []).append(item_id)
    source_order = _by_str(sources)
    rng.shuffle(source_order)
    source_order.sort(key=lambda source: -len(sources[source]))  # stable: seeded among equal sizes
    for source in source_order:
        sources[source] = _by_str(sources[source])

    # Whole sources first.
    seen = {rater: Counter() for rater in raters}
    pairs = []
    for source in source_order:
        mix = Counter(generator_of[item] for item in sources[source])
        weight = {rater: sum(seen[rater][g] * c for g, c in mix.items()) for rater in raters}
        for rater in _least_loaded(raters, weight, k, rng):
            seen[rater].update(mix)
            pairs.extend((item, rater) for item in sources[source])
    if all(max(seen[r][g] for r in raters) - min(seen[r][g] for r in raters) <= 1 for g in generators):
        return _sorted_pairs(pairs)

    return _balanced_by_quota(raters, generators, generator_of, sources, source_order, k=k, rng=rng)


def _balanced_by_quota(
    raters: list[Hashable],
    generators: list[Hashable],
    generator_of: dict[Hashable, Hashable],
    sources: dict[Hashable, list[Hashable]],
    source_order: list[Hashable],
    *,
    k: int,
    rng: random.Random,
) -> list[Pair]:
    """balanced_by_group's fallback: fixed per-generator quotas, filled source by source."""
    quota: dict[Hashable, dict[Hashable, int]] = {}
    planned = dict.fromkeys(raters, 0)
    remaining = Counter(generator_of.values())
    for generator in generators:
        base, extra = divmod(k * remaining[generator], len(raters))
        lucky = set(_least_loaded(raters, planned, extra, rng))
        quota[generator] = {rater: base + (rater in lucky) for rater in raters}
        for rater in raters:
            planned[rater] += quota[generator][rater]
    pairs = []
    for source in source_order:
        holders: set[Hashable] = set()
        for item in sources[source]:
            generator = generator_of[item]
            left = quota[generator]
            # A rater can take at most one of the generator's remaining items each, so
            # raters whose quota equals what is left must be chosen now; with that rule
            # the remaining quotas always stay fillable.
            chosen = [rater for rater in raters if left[rater] == remaining[generator]]
            tie = {rater: rng.random() for rater in raters}
            optional = sorted(
                (rater for rater in raters if left[rater] > 0 and rater not in chosen),
                key=lambda rater: (rater not in holders, -left[rater], tie[rater]),
            )
            chosen += optional[: k - len(chosen)]
            for rater in chosen:
                pairs.append((item, rater))
                left[rater] -= 1
            holders.update(chosen)
            remaining[generator] -= 1
    return _sorted_pairs(pairs)


def rater_queue(items: Sequence[tuple[Hashable, Hashable]], *, seed: int | str) -> list[Hashable]:
    """One rater's order: each group's items together, groups and items shuffled.

    `items` are (item id, group id), the group usually being the source, so that all
    summaries of one source are rated in one sitting. Groups come in a seeded random
    order and items in a seeded random order within their group. Use a seed per rater
    (e.g. f"{batch_seed}:{rater_id}") so raters get different orders. Raises
    ValueError when item ids repeat.
    """
    _require_distinct([item_id for item_id, _ in items], "item ids")
    groups: dict[Hashable, list[Hashable]] = {}
    for item_id, group in items:
        groups.setdefault(group, []).append(item_id)
    rng = random.Random(seed)
    order = _by_str(groups)
    rng.shuffle(order)
    queue: list[Hashable] = []
    for group in order:
        members = _by_str(groups[group])
        rng.shuffle(members)
        queue.extend(members)
    return queue


def insert_attention_checks(
    order: Sequence[Hashable], checks: Sequence[Hashable], *, every: int, seed: int | str
) -> list[Hashable]:
    """`order` with one attention check per block of `every` real items.

    The real items are cut into consecutive blocks of `every`; after each complete
    block's j-th item (j drawn uniformly from 1..every per block) one check is
    inserted. So there are len(order) // every checks (none when the order is shorter
    than a block; a trailing partial block gets none), the list never starts with a
    check, two checks are never adjacent, and a rater cannot predict where the next one
    falls. Checks are used in turn, starting at a seeded position in `checks` so that
    raters with few checks do not all get the first one; a check repeats only when
    there are more blocks than checks. The real items keep their relative order.
    Raises ValueError when every < 1 or checks is empty.
    """
    if every < 1:
        raise ValueError(f"every must be at least 1, got {every}")
    if not checks:
        raise ValueError("at least one attention check is needed")
    rng = random.Random(seed)
    start = rng.randrange(len(checks))
    result: list[Hashable] = []
    for block in range(len(order) // every):
        after = rng.randint(1, every)
        chunk = list(order[block * every : (block + 1) * every])
        result += chunk[:after] + [checks[(start + block) % len(checks)]] + chunk[after:]
    result += order[len(order) // every * every :]
    return result


# --- Comparisons of systems side by side ------------------------------------------------


def comparison_design(
    sources: Mapping[Hashable, Mapping[Hashable, Hashable]],
    raters: Sequence[Hashable],
    *,
    k: int,
    per_source: int | None = None,
    seed: int | str,
) -> list[tuple[Hashable, Hashable, Hashable, Hashable]]:
    """Comparisons of two systems' summaries of the same source, each with `k` raters, as
    (source, left summary, right summary, rater), sorted.

    `sources` maps each source to its summaries by system ({source: {system: summary}}).
    Every pair of systems of a source is compared (`per_source` None), or `per_source`
    pairs of each source chosen so that across sources every pair of systems is compared
    equally often (within one; ties broken by the seed). Each comparison goes to the `k`
    least-loaded raters (one order each: a rater never sees the same two summaries twice),
    and its order on screen is counterbalanced: for every rater and pair of systems, the
    two orders are shown equally often, within one, the first choice of each rater and pair
    drawn from the seed. Sources with fewer than two systems give no comparison.
    """
    if k < 1:
        raise ValueError("k must be at least 1")
    _require_distinct(raters, "raters")
    if k > len(raters):
        raise ValueError(f"cannot give each comparison {k} raters with only {len(raters)} raters")
    if per_source is not None and per_source < 1:
        raise ValueError("per_source must be at least 1")
    rng = random.Random(seed)
    pair_uses: Counter = Counter()
    load = {rater: 0 for rater in raters}
    # (rater, pair of systems in sorted order) -> times the first system was shown on the left minus on the right
    sides: Counter = Counter()
    out = []
    for source in _by_str(sources):
        by_system = sources[source]
        pairs = list(itertools.combinations(_by_str(by_system), 2))
        if per_source is not None:
            tie = {pair: rng.random() for pair in pairs}
            pairs = sorted(pairs, key=lambda pair: (pair_uses[pair], tie[pair]))[:per_source]
        for pair in sorted(pairs, key=lambda p: (str(p[0]), str(p[1]))):
            pair_uses[pair] += 1
            for rater in _least_loaded(raters, load, k, rng):
                load[rater] += 1
                balance = sides[(rater, pair)]
                first_left = balance < 0 or (balance == 0 and rng.random() < 0.5)
                sides[(rater, pair)] += 1 if first_left else -1
                left, right = pair if first_left else pair[::-1]
                out.append((source, by_system[left], by_system[right], rater))
    return sorted(out, key=lambda row: tuple(str(v) for v in row))


# --- a batch's assignments, planned ---------------------------------------------------------


@dataclass(frozen=True)
class PlannedAssignment:
    rater_id: Hashable
    item_id: Hashable
    position: int


@dataclass(frozen=True)
class BatchWork:
    """Each rater's new items: (rater id, item ids) in rater order, raters left with
    nothing new left out, and how many (item, rater) pairs were dropped because the
    rater already has that item."""

    queues: tuple[tuple[Hashable, tuple[Hashable, ...]], ...]
    skipped_pairs: int


@dataclass(frozen=True)
class BatchPlan:
    """A batch's new assignments, each rater's in queue order from that rater's next
    free position, and the pairs skipped (see BatchWork)."""

    assignments: tuple[PlannedAssignment, ...]
    skipped_pairs: int


def held_items(items: Sequence[Hashable], raters: Sequence[Hashable], live: Set[tuple]) -> set[Hashable]:
    """The items every rater already has ((rater, item) in `live`): none of them could
    give anybody new work, so a batch leaves them out before sampling. None without raters."""
    return {item for item in items if raters and all((rater, item) in live for rater in raters)}


def batch_work(
    pairs: Iterable[Pair], *, raters: Sequence[Hashable], gold: Sequence[Hashable] = (), live: Set[tuple] = frozenset()
) -> BatchWork:
    """From the design's (item, rater) pairs: each rater's items, then every gold item
    the design did not give them, without the items the rater already has
    ((rater, item) in `live`, counted as skipped)."""
    by_rater: dict[Hashable, list[Hashable]] = {}
    for item, rater in pairs:
        by_rater.setdefault(rater, []).append(item)
    for rater in raters:
        given = by_rater.setdefault(rater, [])
        for item in gold:
            if item not in given:
                given.append(item)
    skipped = 0
    queues = []
    for rater, items in sorted(by_rater.items()):
        kept = tuple(item for item in items if (rater, item) not in live)
        skipped += len(items) - len(kept)
        if kept:
            queues.append((rater, kept))
    return BatchWork(queues=tuple(queues), skipped_pairs=skipped)


def _with_checks(
    order: list[Hashable], rater: Hashable, checks: Sequence[Hashable], every: int, seed: str, live: Set[tuple]
) -> list[Hashable]:
    """`order` with attention checks mixed in (insert_attention_checks); a rater sees
    each check once: a check the rater already has, here or in `live`, is dropped."""
    mixed = insert_attention_checks(order, [("check", c) for c in checks], every=every, seed=seed)
    seen: set[Hashable] = set(order)
    result = []
    for entry in mixed:
        check = isinstance(entry, tuple)
        item = entry[1] if check else entry
        if check and (item in seen or (rater, item) in live):
            continue
        seen.add(item)
        result.append(item)
    return result


def plan_queues(
    work: BatchWork,
    *,
    groups: Mapping[Hashable, Hashable],
    seed: int,
    order_seeds: Mapping[Hashable, int],
    starts: Mapping[Hashable, int],
    checks: Sequence[Hashable] = (),
    attention_every: int | None = None,
    live: Set[tuple] = frozenset(),
) -> BatchPlan:
    """Each rater's new items in queue order (rater_queue over the items' `groups`,
    seeded by the rater's order seed and the batch's seed), with an attention check
    after about every `attention_every` items when given, placed from the rater's
    `starts` position on."""
    planned = []
    for rater, items in work.queues:
        rater_seed = f"{order_seeds[rater]}:{seed}"
        order = rater_queue([(item, groups[item]) for item in items], seed=rater_seed)
        if attention_every:
            order = _with_checks(order, rater, checks, attention_every, rater_seed, live)
        planned += [PlannedAssignment(rater, item, starts[rater] + i) for i, item in enumerate(order)]
    return BatchPlan(assignments=tuple(planned), skipped_pairs=work.skipped_pairs)


def comparison_orders(
    members: Mapping[Hashable, Sequence[str]], raters: Sequence[Hashable], *, seed: int
) -> dict[tuple[Hashable, Hashable], list[str]]:
    """Each comparison item's order on screen for each rater where no design chose one
    (gold items and attention checks that are comparisons): its members, swapped on a
    coin seeded by the batch, the rater and the item."""
    orders = {}
    for item, order in members.items():
        for rater in raters:
            flip = random.Random(f"{seed}:{rater}:{item}").random() < 0.5
            orders[(rater, item)] = list(order[::-1] if flip else order)
    return orders
