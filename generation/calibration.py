"""Calibrating Factored Verification's threshold θ from rated summaries (pure).

The paper (George & Stuhlmüller, §2.3) sets θ on a held-out set "by calculating the
average of P_summary for both faithful and hallucinated summaries": θ is the midpoint
of the two means, and a summary whose P(summary) is below θ is flagged. Here the
held-out set is a study whose generated summaries raters have judged; which answer
means "hallucinated" is the caller's choice (for the LitSumm rubric, the
"Contains hallucinations" tickbox).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass

import pandas as pd


def calibrate_threshold(p_faithful: list[float], p_hallucinated: list[float]) -> float:
    """θ: the midpoint between the mean P(summary) of faithful and of hallucinated summaries."""
    if not p_faithful or not p_hallucinated:
        raise ValueError("calibration needs rated summaries of both kinds")
    return (sum(p_faithful) / len(p_faithful) + sum(p_hallucinated) / len(p_hallucinated)) / 2


def hallucination_labels(
    frame: pd.DataFrame, *, question: str, values: Collection, checkboxes: bool = False
) -> dict[str, bool | None]:
    """Per item, whether its raters judged it hallucinated: the majority of the raters'
    answers to `question` contains one of `values` (a ticked box of a checkbox question,
    or the chosen value of a scale or choice). A tie is None: no label.

    For a checkbox question (`checkboxes`), a rater who rated the item but stored no
    answer to it ticked nothing; for other questions such a rater has no vote.
    `frame` is annotate.selectors.frames.ratings_frame (one row per item, rater, question)."""
    wanted = {str(v) for v in values}
    raters = frame.groupby("item")["rater"].unique() if checkboxes else None
    rows = frame[(frame["question"] == question) & (frame["finding"] == "")]
    answered = {item: dict(zip(group["rater"], group["answer"], strict=True)) for item, group in rows.groupby("item")}
    items = sorted(raters.index) if checkboxes else sorted(answered)
    labels: dict[str, bool | None] = {}
    for item in items:
        by_rater = answered.get(item, {})
        voters = raters[item] if checkboxes else list(by_rater)
        votes = [_says(by_rater.get(rater, []), wanted) for rater in voters]
        yes, no = sum(votes), len(votes) - sum(votes)
        labels[str(item)] = None if yes == no else yes > no
    return labels


def _says(answer, wanted: set[str]) -> bool:
    if isinstance(answer, list):
        return any(str(a) in wanted for a in answer)
    return answer is not None and str(answer) in wanted


@dataclass(frozen=True)
class Calibration:
    threshold: float
    n_faithful: int
    n_hallucinated: int
    mean_p_faithful: float
    mean_p_hallucinated: float
    n_ties: int  # rated summaries whose raters split evenly: left out
    n_without_p: int  # rated summaries with no P(summary) (not verified, or no cited claim): left out
    accuracy: float  # on the same summaries (in-sample): flagged iff hallucinated

    def as_dict(self) -> dict:
        return dict(self.__dict__)


def calibrate(p_summary: Mapping[str, float | None], labels: Mapping[str, bool | None]) -> Calibration:
    """θ from the rated summaries that have both a label and a P(summary)."""
    faithful = [
        p_summary[i] for i, hallucinated in labels.items() if hallucinated is False and p_summary.get(i) is not None
    ]
    bad = [p_summary[i] for i, hallucinated in labels.items() if hallucinated is True and p_summary.get(i) is not None]
    threshold = calibrate_threshold(faithful, bad)
    correct = sum(p >= threshold for p in faithful) + sum(p < threshold for p in bad)
    return Calibration(
        threshold=threshold,
        n_faithful=len(faithful),
        n_hallucinated=len(bad),
        mean_p_faithful=sum(faithful) / len(faithful),
        mean_p_hallucinated=sum(bad) / len(bad),
        n_ties=sum(label is None for label in labels.values()),
        n_without_p=sum(label is not None and p_summary.get(i) is None for i, label in labels.items()),
        accuracy=correct / (len(faithful) + len(bad)),
    )
