"""Is an automatic judge as consistent with each rater as raters are with each other?
(FactPICO's and Factored Verification's question about LLM evaluators). Pure.

For one scale question: Cohen's kappa (stats.agreement.cohen_kappa: sklearn with the
full scale as labels; quadratic weights for the summary figure, as for ordinal scales)
of the judge with every rater, and of every pair of raters, each on the items both
rated. The judge's mean kappa with the raters is set beside the raters' mean kappa with
each other; pairs without a defined kappa are left out of the means.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd

from stats.agreement import cohen_kappa
from stats.frames import ITEM, RATER, VALUE, part_items


@dataclass(frozen=True)
class JudgeAgreement:
    judge: str
    pairs: list[dict]  # rater_a, rater_b, n, unweighted, quadratic, with_judge
    judge_mean_quadratic: float | None
    human_mean_quadratic: float | None


def mean_defined(values: list[float | None]) -> float | None:
    """The mean of the values that are defined (not None, finite); None when there are none."""
    values = [v for v in values if v is not None and math.isfinite(v)]
    return sum(values) / len(values) if values else None


def judge_agreement_on(
    ratings: pd.DataFrame, scores: pd.DataFrame, question: str, scale: Sequence[float], judge_name: str
) -> JudgeAgreement | None:
    """judge_agreement for one question, from the tidy frames both callers hold:
    `ratings` (item, rater, question, score: the people's answers that count, as
    analysis.services.prepare_ratings gives them, each finding of a per-finding question an
    item "summary:finding") and `scores` (item, question, part, value: the judge's valid
    answers, part the finding's id or ""). None without scores on either side."""
    human = ratings[(ratings["question"] == question) & ratings["score"].notna()]
    judge = scores[(scores["question"] == question) & scores["value"].notna()]
    if human.empty or judge.empty:
        return None
    people = human.rename(columns={"score": VALUE})[[ITEM, RATER, VALUE]]
    judge = judge.assign(**{ITEM: part_items(judge[ITEM], judge["part"])})[[ITEM, VALUE]]
    return judge_agreement(people, judge, scale, judge_name)


def judge_agreement(
    human: pd.DataFrame, judge: pd.DataFrame, scale: Sequence[float], judge_name: str
) -> JudgeAgreement:
    """`human`: item, rater, value (one question); `judge`: item, value."""
    frame = pd.concat(
        [human[[ITEM, RATER, VALUE]], judge[[ITEM, VALUE]].assign(**{RATER: judge_name})[[ITEM, RATER, VALUE]]],
        ignore_index=True,
    )
    frame[RATER] = frame[RATER].astype(str)
    pairs = []
    for pair in cohen_kappa(frame, scale):
        with_judge = judge_name in (pair.rater_a, pair.rater_b)
        pairs.append(
            {
                "rater_a": pair.rater_a,
                "rater_b": pair.rater_b,
                "n": pair.n,
                "unweighted": None if math.isnan(pair.unweighted) else pair.unweighted,
                "quadratic": None if math.isnan(pair.quadratic) else pair.quadratic,
                "with_judge": with_judge,
            }
        )
    return JudgeAgreement(
        judge=judge_name,
        pairs=pairs,
        judge_mean_quadratic=mean_defined([p["quadratic"] for p in pairs if p["with_judge"]]),
        human_mean_quadratic=mean_defined([p["quadratic"] for p in pairs if not p["with_judge"]]),
    )
