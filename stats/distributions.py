"""Distributions of answers: score histograms, per-summary means, groups, option counts.

Pure functions over tidy frames (no ORM). Rater and item labels are whatever the frame
holds; the scale and the option lists come from the rubric, so categories nobody used
still appear with a count of 0.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from stats.frames import ITEM, RATER, VALUE

__all__ = ["item_means", "option_counts", "score_histograms", "scores_by_group"]


def score_histograms(frame: pd.DataFrame, scale: Sequence[float]) -> pd.DataFrame:
    """Raters × scale values: how often each rater gave each value (missing ratings ignored).

    Columns are the FULL scale in order; rows are sorted rater labels.
    """
    rated = frame[frame[VALUE].notna()]
    counts = pd.crosstab(rated[RATER], rated[VALUE]) if len(rated) else pd.DataFrame()
    return counts.reindex(columns=list(scale), fill_value=0).fillna(0).astype(int).sort_index()


def item_means(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per item with at least one rating: ``n_ratings``, ``mean``, ``min``, ``max``."""
    rated = frame[frame[VALUE].notna()]
    grouped = rated.groupby(ITEM, sort=True)[VALUE]
    result = pd.DataFrame(
        {"n_ratings": grouped.size(), "mean": grouped.mean(), "min": grouped.min(), "max": grouped.max()}
    )
    return result.reset_index()


def scores_by_group(frame: pd.DataFrame, groups: pd.Series, scale: Sequence[float]) -> pd.DataFrame:
    """Scores split by an item attribute (e.g. a source metadata field such as RNA type).

    ``groups`` maps item -> group label (a Series indexed by item). Returns one row per
    group: ``n_items`` rated items, ``n_ratings``, ``mean`` of all ratings, ``mean_of_item_means``
    (each item weighs the same however many raters it had) and one count column per
    scale value. Items without a label fall in the group "(none)".
    """
    rated = frame[frame[VALUE].notna()].copy()
    labels = rated[ITEM].map(groups)
    rated["group"] = labels.where(labels.notna(), "(none)").astype(str)
    rows = []
    for group, part in rated.groupby("group", sort=True):
        per_item = part.groupby(ITEM)[VALUE].mean()
        counts = part[VALUE].value_counts()
        row = {
            "group": group,
            "n_items": int(part[ITEM].nunique()),
            "n_ratings": len(part),
            "mean": float(part[VALUE].mean()),
            "mean_of_item_means": float(per_item.mean()),
        }
        row.update({_count_column(v): int(counts.get(v, 0)) for v in scale})
        rows.append(row)
    columns = ["group", "n_items", "n_ratings", "mean", "mean_of_item_means", *(_count_column(v) for v in scale)]
    return pd.DataFrame(rows, columns=columns)


def _count_column(value: float) -> str:
    return f"n_{int(value)}" if float(value).is_integer() else f"n_{value}"


def option_counts(frame: pd.DataFrame, options: Sequence[str], rated_items: pd.Series) -> pd.DataFrame:
    """Per rater, how many summaries got each option ticked or chosen (LitSumm's Table 3).

    ``frame`` has ``rater`` and ``answer``; an answer is a list of option values
    (checkboxes), a single value (choice) or None. ``rated_items`` maps every rater to
    the number of summaries they rated (submitted), which is the denominator: an empty
    tick list is not stored as an answer, so it cannot be counted from ``frame``. Returns
    one row per rater of ``rated_items`` with ``n_rated`` and one column per option, plus
    a final row ``(all)`` summing every rater.
    """
    rows = []
    for rater, n_rated in rated_items.sort_index().items():
        counts = dict.fromkeys(options, 0)
        for answer in frame.loc[frame[RATER] == rater, "answer"]:
            if answer is None or (isinstance(answer, float) and np.isnan(answer)):
                continue
            for value in answer if isinstance(answer, list) else [answer]:
                if value in counts:
                    counts[value] += 1
        rows.append({RATER: rater, "n_rated": int(n_rated), **counts})
    result = pd.DataFrame(rows, columns=[RATER, "n_rated", *options])
    total = {RATER: "(all)", **{c: int(result[c].sum()) for c in ["n_rated", *options]}}
    return pd.concat([result, pd.DataFrame([total], columns=result.columns)], ignore_index=True)
