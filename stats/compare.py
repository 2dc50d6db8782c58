"""Systems compared pointwise: each group's scores with their spread and a bootstrap
interval, and every two systems compared on the sources both summarised. Pure: frames in,
JSON-ready dicts out; no ORM.

Statistical choices:
- **The unit is the summary.** A summary's score for a question is the mean of the answers
  that count for it (every rater, and for a per-finding question every finding), as in
  stats.systems (FactPICO's Tables 3 and 12), so each summary weighs alike whatever its
  number of raters or findings. N/A answers that have no score are left out.
- **Per group** (a generator, a source field's or a summary field's value): the number of
  rated summaries, their mean, standard deviation (n - 1 in the denominator), median,
  first and third quartiles and IQR (numpy's linear interpolation, Hyndman & Fan's type 7,
  as R's default) and a 95% percentile bootstrap interval of the mean, resampling the
  group's summaries (seeded). A group of one summary has no SD and no interval.
- **Paired comparison** of systems a and b (every two of them, in sorted order): on the
  sources both summarised, the difference a - b of their scores (where a system summarised
  a source more than once, its summaries' scores are averaged first, so each source is one
  pair). Reported: the number of sources, both means on them, the mean difference with a
  95% percentile bootstrap interval that resamples sources (each source's pair kept
  together: a paired bootstrap, seeded), and Wilcoxon's signed-rank test (scipy.stats.wilcoxon,
  two-sided; zero differences dropped as in Wilcoxon's original procedure, the scipy
  default; scipy's default method: the exact distribution for up to 50 differences with no
  ties or zeros; with ties or zeros, an exact permutation test up to 13 differences and the
  normal approximation beyond). A pair whose differences are all zero has no test (p None).
- **Holm's correction** (statsmodels.stats.multitest.multipletests, "holm") of the Wilcoxon
  p-values across the pairs of systems, one family per question: with three systems, three
  tests per question.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from itertools import combinations
from typing import Any

import numpy as np
import pandas as pd

from stats.frames import ITEM, QUESTION

__all__ = ["describe_groups", "paired_comparisons", "summary_scores"]

CONFIDENCE = 0.95


def summary_scores(answers: pd.DataFrame, questions: Sequence[str]) -> pd.DataFrame:
    """Summaries × questions: each summary's mean score per question over the answers that
    count (`answers`: item, question, score; a per-finding answer's item is
    "summary:finding", counted for its summary). NaN where a summary has no score."""
    if not len(answers):
        return pd.DataFrame(columns=list(questions), dtype=float)
    summary_of = answers[ITEM].astype(str).str.split(":", n=1).str[0]
    scored = answers.assign(**{ITEM: summary_of})
    scored = scored[scored[QUESTION].isin(list(questions)) & scored["score"].notna()]
    table = scored.groupby([ITEM, QUESTION])["score"].mean().unstack(QUESTION)
    return table.reindex(columns=list(questions)).astype(float)


def _finite(value: float) -> float | None:
    return float(value) if value is not None and math.isfinite(value) else None


def _bootstrap_mean(
    values: np.ndarray, n_resamples: int, rng: np.random.Generator
) -> tuple[float | None, float | None]:
    """Percentile interval of the mean of `values` from `n_resamples` resamples."""
    if len(values) < 2 or n_resamples < 1:
        return None, None
    draws = rng.integers(0, len(values), size=(n_resamples, len(values)))
    means = values[draws].mean(axis=1)
    tail = (1 - CONFIDENCE) / 2
    return float(np.quantile(means, tail)), float(np.quantile(means, 1 - tail))


def describe(values: Sequence[float], *, n_resamples: int = 1000, seed: int = 0) -> dict[str, Any]:
    """n, mean, sd, median, q1, q3, iqr and the bootstrap interval of the mean of `values`
    (NaN left out)."""
    array = np.asarray([v for v in values if v is not None and not math.isnan(v)], dtype=float)
    n = len(array)
    if not n:
        return dict.fromkeys(("mean", "sd", "median", "q1", "q3", "iqr", "ci_low", "ci_high"), None) | {"n": 0}
    q1, median, q3 = (float(v) for v in np.percentile(array, [25, 50, 75]))
    low, high = _bootstrap_mean(array, n_resamples, np.random.default_rng(seed))
    return {
        "n": n,
        "mean": float(array.mean()),
        "sd": float(array.std(ddof=1)) if n > 1 else None,
        "median": median,
        "q1": q1,
        "q3": q3,
        "iqr": q3 - q1,
        "ci_low": low,
        "ci_high": high,
    }


def describe_groups(
    scores: pd.DataFrame, groups: pd.Series, *, n_resamples: int = 1000, seed: int = 0
) -> dict[str, list[dict[str, Any]]]:
    """Per question (a column of `scores`: summary_scores), one row per group: the group and
    `describe` of its rated summaries' scores. `groups` maps summary item -> group label;
    summaries without one fall in "(none)". Groups are sorted by label."""
    labels = groups.reindex(scores.index)
    labels = labels.where(labels.notna(), "(none)").astype(str)
    result: dict[str, list[dict[str, Any]]] = {}
    for question in scores.columns:
        column = scores[question]
        rows = []
        for group in sorted(set(labels[column.notna()])):
            values = column[(labels == group) & column.notna()].to_numpy(dtype=float)
            rows.append({"group": group, **describe(values, n_resamples=n_resamples, seed=seed)})
        result[str(question)] = rows
    return result


def _per_source(column: pd.Series, systems: pd.Series, sources: pd.Series) -> pd.DataFrame:
    """Sources × systems: the mean score of each system's summaries of each source."""
    frame = pd.DataFrame(
        {"score": column, "system": systems.reindex(column.index), "source": sources.reindex(column.index)}
    ).dropna()
    if not len(frame):
        return pd.DataFrame()
    frame = frame.assign(system=frame["system"].astype(str), source=frame["source"].astype(str))
    return frame.groupby(["source", "system"])["score"].mean().unstack("system")


def _wilcoxon(differences: np.ndarray) -> tuple[float | None, float | None, int]:
    """(statistic, two-sided p, non-zero differences) of Wilcoxon's signed-rank test."""
    nonzero = int(np.count_nonzero(differences))
    if nonzero == 0:
        return None, None, 0
    from scipy.stats import wilcoxon

    result = wilcoxon(differences, zero_method="wilcox", alternative="two-sided")
    return _finite(result.statistic), _finite(result.pvalue), nonzero


def holm(p_values: Sequence[float | None]) -> list[float | None]:
    """Holm-adjusted p-values (statsmodels' steps: stats.metaeval.holm, without the
    gc.collect() multipletests runs on every call, 0.3 s each in a worker's heap), None
    kept where a test was not defined."""
    defined = [i for i, p in enumerate(p_values) if p is not None]
    adjusted: list[float | None] = [None] * len(p_values)
    if defined:
        from stats.metaeval import holm as holm_steps

        corrected = holm_steps([p_values[i] for i in defined])
        for i, p in zip(defined, corrected, strict=True):
            adjusted[i] = float(p)
    return adjusted


def paired_comparisons(
    scores: pd.DataFrame,
    systems: pd.Series,
    sources: pd.Series,
    *,
    n_resamples: int = 1000,
    seed: int = 0,
) -> dict[str, list[dict[str, Any]]]:
    """Per question (a column of `scores`: summary_scores), one row per pair of systems
    (a < b) that both summarised at least one common source: n_sources, mean_a, mean_b,
    mean_difference (a - b) with its paired bootstrap interval, the Wilcoxon statistic,
    n_nonzero, p_value and p_holm (across the question's pairs). `systems` and `sources`
    map summary item -> system, source."""
    result: dict[str, list[dict[str, Any]]] = {}
    for question in scores.columns:
        table = _per_source(scores[question].dropna(), systems, sources)
        rows = []
        for a, b in combinations(sorted(table.columns), 2):
            both = table[[a, b]].dropna()
            if not len(both):
                continue
            differences = (both[a] - both[b]).to_numpy(dtype=float)
            low, high = _bootstrap_mean(differences, n_resamples, np.random.default_rng(seed))
            statistic, p_value, nonzero = _wilcoxon(differences)
            rows.append(
                {
                    "a": a,
                    "b": b,
                    "n_sources": len(both),
                    "mean_a": float(both[a].mean()),
                    "mean_b": float(both[b].mean()),
                    "mean_difference": float(differences.mean()),
                    "ci_low": low,
                    "ci_high": high,
                    "n_nonzero": nonzero,
                    "wilcoxon_statistic": statistic,
                    "p_value": p_value,
                }
            )
        for row, adjusted in zip(rows, holm([r["p_value"] for r in rows]), strict=True):
            row["p_holm"] = adjusted
        result[str(question)] = rows
    return result
