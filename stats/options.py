"""Tidy agreement frames of questions answered with options (pure; no ORM).

Agreement itself is stats.agreement's, on these frames:
- a choice question (one option) is one nominal item per summary: the value is the
  option's position in the rubric's list, and agreement is read on its nominal figures
  over every option, used or not (Randolph's q = the number of options);
- a tickbox question (any number of options) is one binary item per option and summary:
  ticked (1) or not (0), each option's agreement read on its own. A rater who answered the summary and did not tick the
  option said "no" to it, even when they ticked nothing at all (an empty tickbox question
  is an answer, not a missing one); a rater who did not answer the summary is missing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from stats.frames import ITEM, RATER, VALUE


def choice_frame(answers: pd.DataFrame, options: Sequence[Any]) -> pd.DataFrame:
    """item, rater, value: the position of each answer (column ``answer``) in `options`;
    an answer that is not one of them (unanswered, N/A) is left out."""
    codes = {option: float(i) for i, option in enumerate(options)}
    if not len(answers):
        return pd.DataFrame(columns=[ITEM, RATER, VALUE])
    known = answers[answers["answer"].map(lambda a: isinstance(a, str) and a in codes).astype(bool)]
    return pd.DataFrame(
        {ITEM: known[ITEM].to_numpy(), RATER: known[RATER].to_numpy(), VALUE: known["answer"].map(codes).to_numpy()},
        columns=[ITEM, RATER, VALUE],
    )


def tickbox_frames(
    answers: pd.DataFrame, options: Sequence[Any], raters: Mapping[Any, Sequence[Any]]
) -> dict[Any, pd.DataFrame]:
    """Option -> item, rater, value (1.0 ticked, 0.0 not) for every rater who answered
    each item (`raters`: item -> raters; their answers to this question in ``answers``,
    a list of ticked options, or no row when they ticked nothing)."""
    ticked: dict[tuple[Any, Any], set] = {}
    for item, rater, answer in answers[[ITEM, RATER, "answer"]].itertuples(index=False):
        ticked[(item, rater)] = set(answer) if isinstance(answer, list | tuple) else set()
    pairs = [(item, rater) for item, item_raters in raters.items() for rater in item_raters]
    frames = {}
    for option in options:
        rows = [(item, rater, 1.0 if option in ticked.get((item, rater), ()) else 0.0) for item, rater in pairs]
        frames[option] = pd.DataFrame(rows, columns=[ITEM, RATER, VALUE])
    return frames
