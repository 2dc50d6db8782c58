"""Every automatic metric against every human scale question, and against their average,
at summary level and at system level (FactPICO, Tables 4, 5 and 10). Pure functions over
data frames; no ORM.

Statistical choices:
- Summary level: one point per summary: the metric, and the mean of the raters' scores
  for the question (the summary's answers that count, N/A left out). Kendall's tau-b
  (ties in both variables are common on short scales) and Spearman's rho, from scipy,
  with their two-sided p-values, on the summaries that have both values.
- The average ("avg"): for each summary, the mean over the scale questions it has a
  score for of that question's mean, each first mapped to [0, 1] by its own scale
  ((score - lowest) / (highest - lowest)), so that a 1-5 question and a 1-4 one weigh
  alike. FactPICO's "Avg" averages elements that share one scale; with one shared scale
  the mapping changes nothing but the units.
- System level: one point per generator: the mean of the metric and the mean of the
  human score over that generator's summaries (both over the summaries that have the
  human score), then tau-b and rho across generators. Undefined (None) with fewer than
  three generators, as any rank correlation of two points is +-1.
- A correlation needs at least three points and some spread in both variables; otherwise
  it is None, never 0.

Bootstrap intervals and a test of whether one metric correlates better than another
are not computed here yet (docs/analysis.md).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import pandas as pd

from analysis.frames import ITEM, QUESTION

AVERAGE = "avg"
MIN_POINTS = 3


@dataclass(frozen=True)
class Correlation:
    n: int
    kendall_tau_b: float | None
    kendall_p: float | None
    spearman_rho: float | None
    spearman_p: float | None


def _finite(value) -> float | None:
    value = float(value)
    return value if math.isfinite(value) else None


def correlation(x: Sequence[float], y: Sequence[float]) -> Correlation:
    """tau-b and rho of the pairs where both values exist."""
    from scipy import stats

    xs = pd.to_numeric(pd.Series(list(x), dtype="object"), errors="coerce")
    ys = pd.to_numeric(pd.Series(list(y), dtype="object"), errors="coerce")
    pairs = pd.DataFrame({"x": xs.to_numpy(), "y": ys.to_numpy()}).dropna()
    n = len(pairs)
    if n < MIN_POINTS or pairs["x"].nunique() < 2 or pairs["y"].nunique() < 2:
        return Correlation(n, None, None, None, None)
    tau = stats.kendalltau(pairs["x"], pairs["y"], variant="b")
    rho = stats.spearmanr(pairs["x"], pairs["y"])
    return Correlation(n, _finite(tau.statistic), _finite(tau.pvalue), _finite(rho.statistic), _finite(rho.pvalue))


def human_scores(answers: pd.DataFrame, scales: dict[str, tuple[float, float]]) -> pd.DataFrame:
    """Summary x question table of mean scores (one column per scale question, in the
    order given), plus the average column of [0, 1]-mapped means."""
    part = answers[answers[QUESTION].isin(list(scales)) & answers["score"].notna()]
    table = part.groupby([ITEM, QUESTION])["score"].mean().unstack(QUESTION)
    table = table.reindex(columns=list(scales))
    mapped = pd.DataFrame(
        {key: (table[key] - low) / (high - low) for key, (low, high) in scales.items() if high > low},
        index=table.index,
    )
    table[AVERAGE] = mapped.mean(axis=1, skipna=True)
    return table


def meta_evaluation_tables(
    *,
    answers: pd.DataFrame,
    metrics: pd.DataFrame,
    generators: pd.Series,
    scales: dict[str, tuple[float, float]],
    metric_columns: Sequence[str],
) -> dict:
    """{"questions": [...keys, "avg"], "summary_level": {metric: {question: Correlation}},
    "system_level": {...}, "generators": n}. `answers`: item, question, score (the answers
    that count); `metrics`: item and metric columns; `generators`: item -> generator."""
    human = human_scores(answers, scales)
    questions = [*scales, AVERAGE]
    table = metrics.set_index(ITEM).join(human, how="left")
    table["generator"] = generators.reindex(table.index)
    usable = [m for m in metric_columns if m in table.columns and table[m].notna().any()]
    summary_level = {metric: {q: asdict(correlation(table[metric], table[q])) for q in questions} for metric in usable}
    system_level: dict = {}
    for metric in usable:
        system_level[metric] = {}
        for q in questions:
            both = table[[metric, q, "generator"]].dropna()
            means = both.groupby("generator")[[metric, q]].mean()
            system_level[metric][q] = asdict(correlation(means[metric], means[q]))
    return {
        "questions": questions,
        "summary_level": summary_level,
        "system_level": system_level,
        "generators": int(table["generator"].nunique()),
    }
