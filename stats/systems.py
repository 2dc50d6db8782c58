"""Human scores per system (generator), in the shape of FactPICO's Tables 3 and 12. Pure:
data frames in, a JSON-ready dict out; no ORM.

Statistical choices:
- A summary's score for a question is the mean of the answers that count for it (every
  rater, and for a per-finding question every finding: FactPICO's evidence-inference
  column). A system's score is the mean over its rated summaries of those means, so each
  summary weighs alike whatever its number of raters or findings. N/A answers that the
  rubric treats as missing are left out (they have no score).
- "average": the mean of the system's question means (Table 3's "Average": 3.30, 3.70,
  3.42, 3.77 and 3.46 average to 3.53) when every scale question shares one scale; with
  scales of different lengths each question mean is first mapped to [0, 1] by its own
  scale ((mean - lowest) / (highest - lowest)) and `average_scale` says "0-1".
- Spans (Table 3's #N and %N, Table 12's #C and %C): every span question's highlights
  are counted over all raters (a span two raters marked counts twice, "identified by either
  of the evaluators"), and the share is that of the system's rated summaries in which at
  least one rater marked at least one. Where a span question asks whether the span is
  factual, the spans answered "no" are counted the same way apart.
- Text metrics (words, FactPICO's ΔFK, ROUGE-L against the source): the mean over the
  system's rated summaries of the stored or computed per-summary values.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import pandas as pd

from stats.frames import ITEM, QUESTION

TEXT_COLUMNS = ("n_words", "delta_fk", "rougeL")


def _mean(values: pd.Series) -> float | None:
    value = float(values.mean()) if len(values.dropna()) else math.nan
    return value if math.isfinite(value) else None


def system_table(
    *,
    answers: pd.DataFrame,
    spans: pd.DataFrame,
    generators: pd.Series,
    metrics: pd.DataFrame,
    scales: dict[str, tuple[float, float]],
    span_questions: Sequence[str],
) -> dict[str, Any]:
    """One row per generator (FactPICO Tables 3 and 12). `answers`: item (a summary, or
    "summary:finding" for a per-finding answer), question, score, the answers that count;
    `spans`: item, question, factual of every span of those answers; `generators`: summary
    item -> generator; `metrics`: item and per-summary metric columns; `scales`: each scale
    question's (lowest, highest); `span_questions`: the span questions to count."""
    summary_of = answers[ITEM].astype(str).str.split(":", n=1).str[0]
    scored = answers.assign(**{ITEM: summary_of})
    scored = scored[scored[QUESTION].isin(list(scales)) & scored["score"].notna()]
    per_summary = scored.groupby([ITEM, QUESTION])["score"].mean().unstack(QUESTION).reindex(columns=list(scales))
    rated = set(summary_of)
    one_scale = len(set(scales.values())) <= 1
    metric_table = metrics.set_index(ITEM) if len(metrics) else pd.DataFrame()
    rows = []
    for generator in sorted({str(g) for g in generators.dropna()}):
        mine = [item for item, g in generators.items() if str(g) == generator]
        mine_rated = [item for item in mine if item in rated]
        means = {q: _mean(per_summary[q].reindex(mine_rated)) for q in scales}
        defined = {q: m for q, m in means.items() if m is not None}
        if one_scale:
            average = sum(defined.values()) / len(defined) if defined else None
        else:
            mapped = [(m - scales[q][0]) / (scales[q][1] - scales[q][0]) for q, m in defined.items()]
            average = sum(mapped) / len(mapped) if mapped else None
        row: dict[str, Any] = {
            "generator": generator,
            "n_summaries": len(mine),
            "n_rated": len(mine_rated),
            "scores": means,
            "average": average,
        }
        for column in TEXT_COLUMNS:
            present = column in metric_table.columns
            row[column] = _mean(metric_table[column].reindex(mine_rated)) if present else None
        row["spans"] = {q: _span_counts(spans, q, mine_rated) for q in span_questions}
        rows.append(row)
    return {
        "questions": list(scales),
        "average_scale": "question scale" if one_scale else "0-1",
        "span_questions": list(span_questions),
        "rows": rows,
    }


def _span_counts(spans: pd.DataFrame, question: str, items: Sequence[str]) -> dict[str, Any]:
    mine = spans[(spans[QUESTION] == question) & spans[ITEM].isin(items)]
    not_factual = mine[mine["factual"] == "no"]
    asks_factual = bool(spans.loc[spans[QUESTION] == question, "factual"].notna().any())

    def share(part: pd.DataFrame) -> float | None:
        return part[ITEM].nunique() / len(items) if items else None

    counts: dict[str, Any] = {"n": int(len(mine)), "share": share(mine)}
    if asks_factual:
        counts.update(n_not_factual=int(len(not_factual)), share_not_factual=share(not_factual))
    return counts
