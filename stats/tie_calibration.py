"""Tie calibration for pairwise accuracy (stats.metaeval.acc_eq), by counting the pairs
instead of listing them.

Items are sorted by (group, human score, metric score). Within a group, a human score is a
level and a distinct metric value a code. A table holds, for checkpoints along each group
(a level's start, at most every CHECKPOINT_SPAN items), how many of the group's items from
the checkpoint on have a code <= c; the few items between a level's end and the next
checkpoint are kept beside it. For an item i and an epsilon e, the last code c* whose value
v satisfies fl(v - m_i) <= e (a prefix of the codes, as a rounded difference grows with v)
gives, by lookups:

- the human ties of i correct at e: the items of its own level after it with a code <= c*;
- its concordant pairs correct at e: the items of a higher level with a code > c*.

So acc_eq at any epsilon costs a few lookups per item, whatever the number of pairs. The
calibration looks for the best epsilon among {0} and the human ties' differences by
bounding: on an interval (a, b] of epsilons, no candidate does better than the ties correct
at b plus the concordant pairs correct at a. Intervals that cannot reach the best value
seen are dropped; the others are split at differences drawn from them, until they hold few
enough pairs to list, or a single difference value. The near-best candidates are then
compared exactly, in rationals.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

# An interval of epsilons holding at most this many (item, partner value) entries is listed.
LIST_ENTRIES = 1 << 18
# Differences drawn from an interval that is split further.
SPLIT_SAMPLES = 16
# Checkpoints of the count table are about this many items apart where levels are short.
CHECKPOINT_SPAN = 64
# Items x epsilons counted at once.
_CELLS = 1 << 21


def _ragged_arange(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The concatenation of arange(start, start + length) for each pair."""
    total = int(lengths.sum())
    if total == 0:
        return np.empty(0, dtype=np.int64)
    offsets = np.repeat(np.cumsum(lengths) - lengths, lengths)
    return np.repeat(starts, lengths) + np.arange(total) - offsets


@dataclass(frozen=True)
class Layout:
    """Groups of two or more items sorted by (group, level, code), and what counts their
    pairs: per item its level's items before it, the items of a higher level (those from
    its level's end to its group's end), and the table and partial rows that say how many of
    those have a code <= c."""

    m: np.ndarray  # metric value per item
    group: np.ndarray
    segment: np.ndarray  # per item: its (group, level)
    position: np.ndarray  # items of its own level before it
    segment_start: np.ndarray  # index of the first item of its level
    item_key: np.ndarray  # per item: segment * width + code, ascending
    higher: np.ndarray  # per item: how many items of its group have a higher level
    end_row: np.ndarray  # per item: the table row of the first checkpoint at or after its level's end
    partial_key: np.ndarray  # per segment, the codes between its end and that checkpoint
    partial_start: np.ndarray  # per segment (+1): where its partial keys start
    n_codes: np.ndarray  # per item: its group's number of codes
    value_start: np.ndarray  # per item: its group's first value in `values`
    values: np.ndarray  # each group's distinct metric values, ascending, group after group
    value_key: np.ndarray  # per value: group * (len(unique) + 1) + its index in `unique`, ascending
    unique: np.ndarray  # every distinct metric value, ascending
    table: np.ndarray
    weight: np.ndarray  # per item: 1 / its group's pairs
    pairs: np.ndarray  # per group

    @property
    def n_groups(self) -> int:
        return int(self.pairs.size)

    @property
    def width(self) -> int:
        return int(self.unique.size) + 1

    def own(self, items: np.ndarray, code: np.ndarray) -> np.ndarray:
        """How many items of each item's level have a code <= code."""
        found = np.searchsorted(self.item_key, self.segment[items] * self.width + code, side="right")
        return found - self.segment_start[items]

    def above(self, items: np.ndarray, code: np.ndarray) -> np.ndarray:
        """How many items of a higher level than each item's have a code <= code."""
        segment = self.segment[items]
        partial = np.searchsorted(self.partial_key, segment * self.width + code, side="right")
        return self.table[self.end_row[items] + code] + partial - self.partial_start[segment]


def _group_ids(codes: np.ndarray, order: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Group of each item in `order` (groups of one dropped, the rest numbered from 0) and
    which of them are kept."""
    group = codes[order]
    sizes = np.bincount(group) if group.size else np.zeros(0, dtype=np.int64)
    keep = sizes[group] >= 2
    return (np.cumsum(sizes >= 2) - 1)[group[keep]], keep


def layout(h: np.ndarray, m: np.ndarray, codes: np.ndarray) -> Layout:
    """The layout of items with human scores h, metric scores m and group codes."""
    order = np.lexsort((m, h, codes))
    group, keep = _group_ids(codes, order)
    h, m = h[order][keep], m[order][keep]
    n = m.size
    sizes = np.bincount(group).astype(np.int64)
    group_start = np.cumsum(sizes) - sizes
    group_end = group_start + sizes

    new_level = np.r_[True, (group[1:] != group[:-1]) | (h[1:] != h[:-1])][:n]
    segment = np.cumsum(new_level) - 1
    first = np.flatnonzero(new_level)  # each segment's first item
    ends = np.r_[first[1:], n]
    ends = np.minimum(ends, group_end[group[first]])  # a group's last level ends with it
    segment_start = first[segment]

    by_value = np.lexsort((m, group))
    sorted_m, sorted_g = m[by_value], group[by_value]
    new_value = np.r_[True, (sorted_g[1:] != sorted_g[:-1]) | (sorted_m[1:] != sorted_m[:-1])][:n]
    values, value_group = sorted_m[new_value], sorted_g[new_value]
    value_index = np.empty(n, dtype=np.int64)
    value_index[by_value] = np.cumsum(new_value) - 1
    n_codes = np.bincount(value_group, minlength=sizes.size).astype(np.int64)
    first_value = np.cumsum(n_codes) - n_codes
    code = value_index - first_value[group]
    unique, code_global = np.unique(values, return_inverse=True)
    width = unique.size + 1

    table, end_row, partial_key, partial_start = _checkpoints(
        group, code, first, ends, group_start, group_end, n_codes, width
    )
    pairs = sizes * (sizes - 1) // 2
    return Layout(
        m=m,
        group=group,
        segment=segment,
        position=np.arange(n) - segment_start,
        segment_start=segment_start,
        item_key=segment * width + code,
        higher=group_end[group] - ends[segment],
        end_row=end_row[segment],
        partial_key=partial_key,
        partial_start=partial_start,
        n_codes=n_codes[group],
        value_start=first_value[group],
        values=values,
        value_key=value_group * width + code_global,
        unique=unique,
        table=table,
        weight=1.0 / pairs[group],
        pairs=pairs,
    )


def _checkpoints(group, code, first, ends, group_start, group_end, n_codes, width):
    """The table rows and partial rows: a checkpoint is a group's first level, a level of at
    least CHECKPOINT_SPAN items, a level starting in another span of CHECKPOINT_SPAN items of
    its group than the level before, and every group's end; a checkpoint's row holds, per
    code c, how many items from it to its group's end have a code <= c (zeros at a group's
    end). From a level's end to the next checkpoint lie fewer than 2 * CHECKPOINT_SPAN items,
    kept as that level's partial row (sorted keys segment * width + code)."""
    seg_group = group[first]
    lengths = ends - first
    span = (first - group_start[seg_group]) // CHECKPOINT_SPAN
    is_cp = np.r_[True, (seg_group[1:] != seg_group[:-1]) | (span[1:] != span[:-1])] | (lengths >= CHECKPOINT_SPAN)
    # Checkpoints as sort keys: a group's end (2p) before a level starting at the same place (2p + 1).
    cp_pos = np.r_[first[is_cp], group_end]
    cp_group = np.r_[seg_group[is_cp], np.arange(group_end.size)]
    cp_key = np.r_[2 * first[is_cp] + 1, 2 * group_end]
    order = np.argsort(cp_key, kind="stable")
    cp_pos, cp_group, cp_key = cp_pos[order], cp_group[order], cp_key[order]
    rows = n_codes[cp_group]
    row_offset = np.cumsum(rows) - rows
    # Each chunk (one checkpoint to the next of its group) counted by code, then cumulated.
    chunk = np.searchsorted(cp_key, 2 * np.arange(group.size) + 1, side="right") - 1
    table = np.bincount(row_offset[chunk] + code, minlength=int(rows.sum()))
    table = _code_prefix(table, rows)
    _chunk_suffix(table, row_offset, rows, cp_group)
    nxt = np.searchsorted(cp_key, 2 * ends, side="left")  # the first checkpoint at or after each level's end
    partial_len = cp_pos[nxt] - ends
    items = _ragged_arange(ends, partial_len)
    owner = np.repeat(np.arange(first.size), partial_len)
    partial_key = np.sort(owner * width + code[items])
    partial_start = np.r_[0, np.cumsum(partial_len)]
    return table, row_offset[nxt], partial_key, partial_start


def _code_prefix(counts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Cumulative counts along each row of the given lengths."""
    starts = np.cumsum(lengths) - lengths
    running = np.cumsum(counts)
    return running - np.repeat(running[starts] - counts[starts], lengths)


def _chunk_suffix(table: np.ndarray, row_offset: np.ndarray, rows: np.ndarray, cp_group: np.ndarray) -> None:
    """Each checkpoint's row plus the rows after it in its group, from the last down."""
    rank = np.arange(cp_group.size) - np.searchsorted(cp_group, cp_group, side="left")
    count_in_group = np.bincount(cp_group)
    after = count_in_group[cp_group] - 1 - rank  # checkpoints after it in its group
    for distance in range(1, int(after.max(initial=0)) + 1):
        here = np.flatnonzero(after == distance)
        cells = _ragged_arange(row_offset[here], rows[here])
        table[cells] += table[cells + np.repeat(rows[here], rows[here])]


@dataclass(frozen=True)
class Counts:
    """At each epsilon: every item's last code (items x epsilons), its correct ties and
    its correct concordant pairs; summed over the items weighted (each pair as its group's
    share of its pairs) or per group."""

    last: np.ndarray
    ties: np.ndarray
    concordant: np.ndarray

    def weighted(self, lay: Layout) -> tuple[np.ndarray, np.ndarray]:
        return lay.weight @ self.ties, lay.weight @ self.concordant

    def per_group(self, lay: Layout) -> np.ndarray:
        """groups x epsilons: the correct pairs of each group (exact integers)."""
        k = self.ties.shape[1]
        where = (lay.group[:, None] * k + np.arange(k)[None, :]).ravel()
        correct = (self.ties + self.concordant).ravel()
        return np.bincount(where, correct, minlength=lay.n_groups * k).round().astype(np.int64).reshape(-1, k)


def _last_code(lay: Layout, eps: np.ndarray) -> np.ndarray:
    """items x epsilons: the last code c of the item's group with fl(value_c - m_i) <= eps."""
    m = lay.m[:, None]
    guess = np.searchsorted(lay.unique, m + eps[None, :], side="right") - 1
    key = lay.group[:, None] * lay.width + guess
    last = np.searchsorted(lay.value_key, key, side="right") - 1 - lay.value_start[:, None]
    start, top = lay.value_start[:, None], lay.n_codes[:, None] - 1
    with np.errstate(over="ignore", invalid="ignore"):
        while True:  # a rounded sum m + eps may stop a value short of or past the last one
            ahead = np.minimum(last + 1, top)
            up = (last < top) & (lay.values[start + ahead] - m <= eps)
            if not up.any():
                break
            last += up
        while True:
            down = lay.values[start + last] - m > eps
            if not down.any():
                break
            last -= down
    return last


def count(lay: Layout, eps: np.ndarray) -> Counts:
    """The counts of every item at each of the epsilons (each >= 0)."""
    parts = []
    step = max(1, _CELLS // max(1, lay.m.size))
    for low in range(0, eps.size, step):
        last = _last_code(lay, eps[low : low + step])
        items = np.broadcast_to(np.arange(lay.m.size)[:, None], last.shape)
        ties = lay.own(items, last) - lay.position[:, None] - 1
        concordant = lay.higher[:, None] - lay.above(items, last)
        parts.append((last, ties, concordant))
    return Counts(*(np.concatenate([p[k] for p in parts], axis=1) for k in range(3)))


def _entries(lay: Layout, low: np.ndarray, high: np.ndarray) -> tuple[np.ndarray, ...]:
    """The pairs whose difference lies in an interval, for items whose partners there have
    the codes in (low, high]: (difference, weight of the ties, weight of the concordant
    pairs) per (item, partner code)."""
    n_codes = high - low
    item = np.repeat(np.arange(lay.m.size), n_codes)
    code = _ragged_arange(low + 1, n_codes)
    above = lay.above(item, code) - lay.above(item, code - 1)
    here = lay.own(item, code) - lay.own(item, code - 1)
    with np.errstate(over="ignore", invalid="ignore"):
        difference = lay.values[lay.value_start[item] + code] - lay.m[item]
    return difference, here * lay.weight[item], above * lay.weight[item]


def _sample(lay: Layout, low: np.ndarray, high: np.ndarray, a: float, b: float) -> np.ndarray:
    """Points splitting (a, b]: differences drawn evenly from its entries, and the float just
    below each (so that a value many pairs share ends an interval of its own)."""
    lengths = high - low
    total = int(lengths.sum())
    picks = np.unique(np.linspace(0, total - 1, min(total, SPLIT_SAMPLES)).astype(np.int64))
    ends = np.cumsum(lengths)
    item = np.searchsorted(ends, picks, side="right")
    code = low[item] + 1 + picks - (ends[item] - lengths[item])
    with np.errstate(over="ignore", invalid="ignore"):
        drawn = lay.values[lay.value_start[item] + code] - lay.m[item]
    points = np.unique(np.r_[drawn, np.nextafter(drawn, -np.inf)])
    return points[(points > a) & (points < b)]


def calibrate(lay: Layout, tolerance: float) -> np.ndarray:
    """The epsilons, ascending and 0 first, whose acc_eq (times the number of groups, summed
    in floats) is within ``tolerance`` of the best: the candidates to compare exactly."""
    zero = count(lay, np.zeros(1))
    ties0, conc0 = zero.weighted(lay)
    best = float(ties0[0] + conc0[0])
    with np.errstate(over="ignore", invalid="ignore"):
        top = float(np.max(lay.values[lay.value_start + lay.n_codes - 1] - lay.m, initial=0.0))
    found: list[tuple[np.ndarray, np.ndarray]] = []  # (candidate epsilons, their values)
    pending = [np.array([0.0, top])] if top > 0 else []
    while pending:
        points = np.concatenate(pending)
        parent = np.repeat(np.arange(len(pending)), [p.size for p in pending])
        counts = count(lay, points)
        ties, conc = counts.weighted(lay)
        best = max(best, float((ties + conc).max()))
        # Interval k: (points[k], points[k + 1]] within one parent.
        inner = np.flatnonzero(parent[1:] == parent[:-1])
        a, b = inner, inner + 1
        gained = ties[b] - ties[a]
        bound = ties[b] + conc[a]
        live = inner[(gained > 0) & (bound >= best - tolerance)]
        pending = []
        for k in live:
            low, high = counts.last[:, k], counts.last[:, k + 1]
            lo, hi = float(points[k]), float(points[k + 1])
            if lo == np.nextafter(hi, -np.inf):  # a single difference value: hi itself
                found.append((np.array([hi]), np.array([ties[k + 1] + conc[k + 1]])))
            elif int((high - low).sum()) <= LIST_ENTRIES:
                found.append(_listed(lay, low, high, float(ties[k] + conc[k])))
            else:
                pending.append(np.r_[lo, _sample(lay, low, high, lo, hi), hi])
    candidates = np.concatenate([np.zeros(1)] + [eps for eps, _ in found])
    values = np.concatenate([np.array([ties0[0] + conc0[0]])] + [v for _, v in found])
    return np.unique(np.r_[0.0, candidates[values >= max(best, values.max()) - tolerance]])


def _listed(lay: Layout, low: np.ndarray, high: np.ndarray, start: float) -> tuple[np.ndarray, np.ndarray]:
    """The tie differences of an interval, each with acc_eq at it: ``start`` (acc_eq at the
    interval's lower end) plus the ties minus the concordant pairs up to it."""
    difference, tie_w, conc_w = _entries(lay, low, high)
    order = np.argsort(difference, kind="stable")
    difference, tie_w, conc_w = difference[order], tie_w[order], conc_w[order]
    value = start + np.cumsum(tie_w - conc_w)
    last = np.r_[difference[1:] != difference[:-1], True]
    group_of = np.cumsum(np.r_[True, last[:-1]]) - 1
    has_tie = np.bincount(group_of, tie_w > 0) > 0
    return difference[last][has_tie], value[last][has_tie]


def exact(lay: Layout, epsilons: np.ndarray) -> list[Fraction]:
    """acc_eq at each epsilon as an exact rational: the mean over the groups of correct
    pairs / pairs."""
    correct = count(lay, epsilons).per_group(lay)
    denominator = math.lcm(*lay.pairs.tolist())
    numerators = np.zeros(epsilons.size, dtype=object)
    for pairs in np.unique(lay.pairs):
        # Python ints (object dtype) so that a large common denominator cannot overflow.
        numerators += correct[lay.pairs == pairs].sum(axis=0).astype(object) * (denominator // int(pairs))
    return [Fraction(int(n), denominator * lay.n_groups) for n in numerators]
