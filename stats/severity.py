"""Rater severity and drift. Pure functions over the tidy answers frame (item, rater,
value; for drift also the order in which each rater answered); no ORM.

Statistical choices:
- **Severity** of a rater on a scored question: over the items the rater shares with at
  least one other rater, the mean of (the rater's value − the mean of the other raters'
  values on that item). Negative: harsher than the others; positive: more lenient. A 95%
  percentile bootstrap interval resamples the rater's shared items (seeded). One row per
  rater, the question's items pooled.
- **Drift**: each rater's answers in the order given, cut into successive windows of
  `window` answers (the last window may be shorter). Per window: agreement with the
  other raters (over the window's answers on shared items, the mean share of the other
  raters who gave the same value) and, where answers were compared with gold (the
  optional `gold_correct` column: True, False or missing), the share that matched.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from stats.frames import ITEM, RATER, VALUE

__all__ = ["DriftWindow", "RaterSeverity", "drift", "severity"]

ORDER = "order"
GOLD = "gold_correct"


@dataclass(frozen=True)
class RaterSeverity:
    rater: str
    n_shared: int
    severity: float
    ci_low: float | None
    ci_high: float | None


@dataclass(frozen=True)
class DriftWindow:
    rater: str
    window: int  # 1, 2, ...
    first: int  # the window's first and last answer, counted from 1 in the rater's order
    last: int
    n_shared: int
    agreement_with_others: float | None
    n_gold: int
    agreement_with_gold: float | None


def _others(frame: pd.DataFrame) -> pd.DataFrame:
    """Each answer with the number of other raters of its item and their values' sum."""
    values = frame[VALUE].astype(float)
    total = values.groupby(frame[ITEM]).transform("sum")
    count = values.groupby(frame[ITEM]).transform("count")
    return frame.assign(_value=values, _others_sum=total - values, _others_n=count - 1)


def severity(frame: pd.DataFrame, *, n_resamples: int = 1000, seed: int = 0) -> list[RaterSeverity]:
    """Per rater (sorted), the mean signed difference from the other raters of the same
    items, with its bootstrap interval; raters who share no item are left out."""
    found = _others(frame.dropna(subset=[VALUE]))
    shared = found[found["_others_n"] > 0]
    differences = shared["_value"] - shared["_others_sum"] / shared["_others_n"]
    rng = np.random.default_rng(seed)
    rows = []
    for rater in sorted(shared[RATER].unique(), key=str):
        values = differences[shared[RATER] == rater].to_numpy(dtype=float)
        low = high = None
        if len(values) > 1 and n_resamples > 0:
            means = values[rng.integers(0, len(values), (n_resamples, len(values)))].mean(axis=1)
            low, high = float(np.quantile(means, 0.025)), float(np.quantile(means, 0.975))
        rows.append(RaterSeverity(str(rater), len(values), float(values.mean()), low, high))
    return rows


def _share_of_others_agreeing(frame: pd.DataFrame) -> pd.Series:
    """Per answer, the share of the other raters' answers to its item that equal it (NaN
    when no other rater answered the item): counted by group, (same value on the item
    minus the rater's own) over (answers on the item minus the rater's own), so the work
    grows with the answers, not with their square."""
    by_item = frame.groupby(ITEM, sort=False)[VALUE].transform("size")
    by_item_rater = frame.groupby([ITEM, RATER], sort=False)[VALUE].transform("size")
    by_value = frame.groupby([ITEM, VALUE], sort=False)[VALUE].transform("size")
    by_value_rater = frame.groupby([ITEM, VALUE, RATER], sort=False)[VALUE].transform("size")
    others = by_item - by_item_rater
    return ((by_value - by_value_rater) / others.where(others > 0)).astype(float)


def drift(frame: pd.DataFrame, *, window: int = 20) -> list[DriftWindow]:
    """Per rater, successive windows of `window` answers in the rater's order (the `order`
    column: a submission time or a position): agreement with the other raters and, where
    the `gold_correct` column says, with gold."""
    if window < 1:
        raise ValueError("A window holds at least one answer.")
    frame = frame.dropna(subset=[VALUE])
    if GOLD not in frame.columns:
        frame = frame.assign(**{GOLD: None})
    frame = frame.assign(_same=_share_of_others_agreeing(frame))
    rows = []
    for rater, mine in frame.groupby(RATER, sort=True):
        mine = mine.sort_values(ORDER, kind="stable")
        same, gold = mine["_same"].to_numpy(dtype=float), mine[GOLD].tolist()
        for start in range(0, len(mine), window):
            shared = same[start : start + window]
            shared = shared[~np.isnan(shared)]
            part = gold[start : start + window]
            matches = [bool(v) for v in part if v is not None and not (isinstance(v, float) and np.isnan(v))]
            rows.append(
                DriftWindow(
                    rater=str(rater),
                    window=start // window + 1,
                    first=start + 1,
                    last=start + len(part),
                    n_shared=len(shared),
                    agreement_with_others=float(shared.mean()) if len(shared) else None,
                    n_gold=len(matches),
                    agreement_with_gold=float(np.mean(matches)) if matches else None,
                )
            )
    return rows
