"""The live quality figures of one batch, per rater (docs/monitoring.md).

Pure functions over tidy rows (plain tuples: a selector builds them, nothing here reads
the database), so every figure can be worked by hand on a small batch:

- `items`: one row per submitted item of a rater (rater, item, active seconds);
- `answers`: one row per answer that counts (rater, item, question, answer), for the
  questions whose answers can be compared (scales and single choices);
- `gold`: one row per expected answer a rater's first answer was compared with (rater,
  correct).

The statistical choices, stated once:

- median active time: the median of the rater's items' active seconds (the time the page
  was visible and in use, as the rating page counts it), the middle of an even count
  being the mean of the two middle values;
- too fast: items whose active time is under `fast_fraction` times the median active
  time of the whole batch (every rater's submitted items), or under the study's absolute
  floor (`floor_seconds`), whichever limit is higher; an item with no active time at all
  (0 s) is always too fast. The relative rule alone fails when everyone clicks through
  (a median of 0 s flags nothing); the floor alone fails on long items;
- straight-lining: per scale question, the share of the rater's answers that equal their
  most frequent answer; the figure shown is the highest share over the scale questions
  (with the question), counted only from `min_answers` answers on;
- gold accuracy: the share of expected answers (gold items and attention checks) the
  rater's first submitted answer matched exactly;
- agreement, leave-one-out: over every (item, question) the rater answered, every other
  rater's answer to the same item and question is a pair; the figure is the share of
  pairs with the same answer (observed pairwise agreement). A kappa would correct for
  chance, but on the handful of items a batch has early on it is undefined or wild
  (every answer the same gives 0/0); the share of matches is defined from the first
  pair and reads as it is.
"""

from __future__ import annotations

import statistics
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, NamedTuple


class ItemRow(NamedTuple):
    rater: str
    item: str
    active_seconds: float


class AnswerRow(NamedTuple):
    rater: str
    item: str
    question: str
    answer: Any  # hashable: a score, a choice, or canonical JSON text
    scale: bool  # a scale question (straight-lining is counted on these)
    order: Any = None  # when the answer was submitted (drift's order)


class GoldRow(NamedTuple):
    rater: str
    correct: bool
    item: str = ""
    question: str = ""


@dataclass(frozen=True)
class RaterFigures:
    rater: str
    items: int
    median_seconds: float | None
    too_fast: int
    straight_share: float | None
    straight_question: str
    gold_compared: int
    gold_correct: int
    agreement_pairs: int
    agreement_matches: int

    @property
    def gold_accuracy(self) -> float | None:
        return self.gold_correct / self.gold_compared if self.gold_compared else None

    @property
    def agreement(self) -> float | None:
        return self.agreement_matches / self.agreement_pairs if self.agreement_pairs else None


@dataclass(frozen=True)
class BatchFigures:
    median_seconds: float | None  # the batch's median active time per item
    fast_limit: float | None  # items under this many seconds count as too fast
    raters: tuple[RaterFigures, ...]


def median_or_none(values: Iterable[float]) -> float | None:
    values = list(values)
    return float(statistics.median(values)) if values else None


def too_fast(seconds: float, limit: float | None) -> bool:
    """An item's active time is too fast: under the limit, or none at all."""
    return seconds <= 0 or (limit is not None and seconds < limit)


def straight_lining(answers: Iterable[AnswerRow], *, min_answers: int = 2) -> dict[str, tuple[float, str]]:
    """{rater: (share, question)}: the highest share, over the scale questions, of a
    rater's answers equal to their most frequent answer to that question. Questions the
    rater answered fewer than `min_answers` times are not counted; ties between
    questions go to the question whose key sorts first."""
    by_question: dict[tuple[str, str], list[Any]] = defaultdict(list)
    for row in answers:
        if row.scale:
            by_question[(row.rater, row.question)].append(row.answer)
    result: dict[str, tuple[float, str]] = {}
    for (rater, question), given in sorted(by_question.items()):
        if len(given) < min_answers:
            continue
        share = Counter(given).most_common(1)[0][1] / len(given)
        if rater not in result or share > result[rater][0]:
            result[rater] = (share, question)
    return result


def leave_one_out_agreement(answers: Iterable[AnswerRow]) -> dict[str, tuple[int, int]]:
    """{rater: (pairs, matches)}: each rater's answers paired with every other rater's
    answer to the same item and question, and how many of those pairs are equal."""
    by_slot: dict[tuple[str, str], dict[str, Any]] = defaultdict(dict)
    for row in answers:
        by_slot[(row.item, row.question)][row.rater] = row.answer
    result: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for given in by_slot.values():
        for rater, answer in given.items():
            for other, theirs in given.items():
                if other != rater:
                    result[rater][0] += 1
                    result[rater][1] += answer == theirs
    return {rater: (pairs, matches) for rater, (pairs, matches) in result.items()}


def batch_figures(
    *,
    items: Iterable[ItemRow],
    answers: Iterable[AnswerRow],
    gold: Iterable[GoldRow],
    raters: Iterable[str] = (),
    fast_fraction: float = 0.25,
    floor_seconds: float = 0.0,
    min_answers: int = 2,
) -> BatchFigures:
    """Every rater's figures (see the module docstring). `raters` lists raters to show
    even before their first item (all zeros); the rows add the others. Raters come out
    in the order given, then the others sorted."""
    items, answers, gold = list(items), list(answers), list(gold)
    batch_median = median_or_none(row.active_seconds for row in items)
    relative = fast_fraction * batch_median if batch_median is not None else 0.0
    fast_limit = max(relative, floor_seconds) if batch_median is not None or floor_seconds > 0 else None
    seconds: dict[str, list[float]] = defaultdict(list)
    for row in items:
        seconds[row.rater].append(row.active_seconds)
    straight = straight_lining(answers, min_answers=min_answers)
    agreement = leave_one_out_agreement(answers)
    gold_counts: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for row in gold:
        gold_counts[row.rater][0] += 1
        gold_counts[row.rater][1] += bool(row.correct)
    order = list(dict.fromkeys(raters))
    seen = set(order)
    order += sorted(({r.rater for r in items} | {r.rater for r in answers} | set(gold_counts)) - seen)
    figures = []
    for rater in order:
        own = seconds.get(rater, [])
        share, question = straight.get(rater, (None, ""))
        pairs, matches = agreement.get(rater, (0, 0))
        compared, correct = gold_counts.get(rater, (0, 0))
        figures.append(
            RaterFigures(
                rater=rater,
                items=len(own),
                median_seconds=median_or_none(own),
                too_fast=sum(1 for s in own if too_fast(s, fast_limit)),
                straight_share=share,
                straight_question=question,
                gold_compared=compared,
                gold_correct=correct,
                agreement_pairs=pairs,
                agreement_matches=matches,
            )
        )
    return BatchFigures(median_seconds=batch_median, fast_limit=fast_limit, raters=tuple(figures))
