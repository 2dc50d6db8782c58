"""Assignment designs as pure functions over ids (no database).

The service in `annotate.services` persists what these return.
"""

from __future__ import annotations

import random
from collections.abc import Hashable, Iterable, Mapping, Sequence


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
