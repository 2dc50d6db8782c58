"""Systems compared in the study report: pointwise per generator and group field
(stats.compare), after adjudication, and by preference (stats.pairwise). Pure code, as
analysis.report, which assembles these sections."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

import pandas as pd

from analysis.question_spec import QuestionSpec
from analysis.report_json import from_payload, to_payload
from analysis.sections import (
    AdjudicatedItem,
    AdjudicatedSystem,
    AfterAdjudication,
    CompareSection,
    CompareTable,
    ComparisonSection,
)
from stats.compare import describe_groups, paired_comparisons, summary_scores
from stats.frames import ITEM, QUESTION, RATER


def comparisons_section(
    frame: pd.DataFrame,
    *,
    questions: Sequence[tuple[str, str]],
    pointwise: dict[str, float] | None = None,
    pointwise_question: str = "",
    rater_names: dict[str, str] | None = None,
    judges: Sequence[tuple[str, pd.DataFrame]] = (),
    n_resamples: int = 1000,
    seed: int = 0,
) -> tuple[ComparisonSection, ...]:
    """The comparisons of the report (stats.pairwise), one entry per preference question
    (`questions`: (key, prompt)) that has judgements: win/tie/loss per pair of systems,
    Bradley–Terry strengths (ties as half-wins) with bootstrap intervals over comparison
    items and place stability, position bias overall and per rater, intransitive triads,
    the raters' agreement on preferences and, where the summaries were also scored one at
    a time (`pointwise`: summary uuid -> mean score of `pointwise_question`), how often a
    preference agrees with the order of their scores; and every LLM judge's position
    consistency beside its kappa with each rater (`judges`: (name, frame of item,
    question, preferred, consistent)). ``frame`` is
    annotate.selectors.frames.comparisons_frame."""
    from stats import pairwise

    sections = []
    if rater_names and len(frame):
        frame = frame.assign(rater=frame[RATER].map(lambda r: rater_names.get(r, r)))
    for key, prompt in questions:
        part = frame[frame[QUESTION] == key] if len(frame) else frame
        if not len(part):
            continue
        section: dict[str, Any] = {
            "question": key,
            "prompt": prompt,
            "n_judgements": int(len(part)),
            "n_comparisons": int(part[ITEM].nunique()),
            "n_raters": int(part[RATER].nunique()),
            "choices": {c: int((part["choice"] == c).sum()) for c in pairwise.CHOICES},
            "win_tie_loss": pairwise.win_tie_loss(part),
            "position_bias": pairwise.position_bias(part),
            "intransitive_triads": pairwise.intransitive_triads(part),
            "agreement": pairwise.preference_agreement(part),
        }
        try:
            ranking = pairwise.bradley_terry_ranking(part, n_resamples=n_resamples, seed=seed)
            section["ranking"] = dataclasses.asdict(ranking)
        except pairwise.PairwiseInputError as exc:
            section["ranking"] = {"error": str(exc)}
        if pointwise:
            section["pointwise"] = {
                "question": pointwise_question,
                **pairwise.agreement_with_pointwise(
                    part, pointwise, list(zip(part["left_summary"], part["right_summary"], strict=True))
                ),
            }
        section["judges"] = [
            pairwise.judge_preference_agreement(part, answers[answers[QUESTION] == key], name)
            for name, answers in judges
            if len(answers[answers[QUESTION] == key])
        ]
        sections.append(from_payload(ComparisonSection, to_payload(section)))
    return tuple(sections)


def _scored(answers: pd.DataFrame) -> pd.DataFrame:
    """The answers that have a place in a mean: N/A left out even where the rubric counts it
    a category for agreement (as stats.systems does)."""
    return answers[answers["answer"] != "na"] if len(answers) and "answer" in answers.columns else answers


def _comparison_fields(fields: Sequence[str]) -> list[str]:
    return ["generator", *(f for f in fields if f != "generator")]


def compare_section(
    answers: pd.DataFrame,
    summaries: pd.DataFrame,
    scale_questions: Sequence[QuestionSpec],
    fields: Sequence[str],
    n_resamples: int,
    seed: int,
) -> CompareSection:
    """Systems compared pointwise (stats.compare): per generator and per group field, each
    scale question's mean over summaries with SD, IQR and a bootstrap interval; per
    generator and per ``summary.<field>``, every two values paired on the sources both
    summarised (mean difference, paired bootstrap interval, Wilcoxon, Holm across pairs)."""
    section = CompareSection(n_resamples=n_resamples, seed=seed, confidence_level=0.95)
    questions = [q.key for q in scale_questions]
    if not questions or not len(summaries):
        return section
    groups, pairs = [], []
    scores = summary_scores(_scored(answers), questions)
    by_item = summaries.set_index(ITEM)
    for field in _comparison_fields(fields):
        for question, rows in describe_groups(scores, by_item[field], n_resamples=n_resamples, seed=seed).items():
            if rows:
                groups.append(CompareTable(field=field, question=question, rows=tuple(to_payload(rows))))
        if field == "generator" or field.startswith("summary."):
            paired = paired_comparisons(scores, by_item[field], by_item["source"], n_resamples=n_resamples, seed=seed)
            for question, rows in paired.items():
                if rows:
                    pairs.append(CompareTable(field=field, question=question, rows=tuple(to_payload(rows))))
    return dataclasses.replace(section, groups=tuple(groups), pairs=tuple(pairs))


def _shown(value: Any) -> str:
    if isinstance(value, list):
        return ", ".join(str(v) for v in value)
    return "" if value is None else str(value)


def after_adjudication_section(
    answers: pd.DataFrame,
    summaries: pd.DataFrame,
    questions: Sequence[QuestionSpec],
    consensus: pd.DataFrame | None,
    n_resamples: int,
    seed: int,
) -> AfterAdjudication:
    """The consensus answers recorded after adjudication beside the raters': each decision
    with the raters' answers to the same summary and question, and per generator and scale
    question the mean over summaries from the raters' answers and after adjudication
    (each adjudicated summary takes its consensus score; an N/A consensus leaves it
    without one), each with its bootstrap interval."""
    if consensus is None or not len(consensus) or not len(summaries):
        return AfterAdjudication()
    kinds = {q.key: q for q in questions}
    consensus = consensus[consensus[QUESTION].isin(kinds) & consensus[ITEM].isin(set(summaries[ITEM]))]
    by_item = summaries.set_index(ITEM)
    scale = [q.key for q in questions if q.plain_scale]
    return AfterAdjudication(
        n_decisions=len(consensus),
        items=_decisions(answers, consensus, by_item),
        by_system=_adjudicated_systems(answers, consensus, by_item["generator"], scale, n_resamples, seed),
    )


def _decisions(answers: pd.DataFrame, consensus: pd.DataFrame, by_item: pd.DataFrame) -> tuple[AdjudicatedItem, ...]:
    """Each decision beside the raters' answers to the same summary and question. The
    answers are grouped by (summary, question) once, so the work grows with the answers
    and the decisions, not with their product."""
    whole = answers[~answers[ITEM].astype(str).str.contains(":", regex=False)] if len(answers) else answers
    groups = whole.groupby([ITEM, QUESTION], sort=False).indices if len(whole) else {}
    raters_of = whole[RATER].tolist() if len(whole) else []
    given_of = whole["answer"].tolist() if len(whole) else []
    # As _scored: N/A has no place in a mean, nor has an answer without a score.
    score_of = whole["score"].where(whole["answer"] != "na").tolist() if len(whole) else []
    keys, generators = by_item["key"].to_dict(), by_item["generator"].to_dict()
    items = []
    for row in consensus.sort_values([ITEM, QUESTION]).itertuples(index=False):
        rows = groups.get((row.item, row.question), ())
        scores = [score_of[i] for i in rows if not pd.isna(score_of[i])]
        items.append(
            AdjudicatedItem(
                item=row.item,
                key=keys[row.item],
                generator=generators[row.item],
                question=row.question,
                raters="; ".join(f"{raters_of[i]}: {_shown(given_of[i])}" for i in rows),
                raters_mean=float(sum(scores) / len(scores)) if scores else None,
                consensus=_shown(row.value),
                batch=row.batch,
            )
        )
    return tuple(items)


def _adjudicated_systems(
    answers: pd.DataFrame,
    consensus: pd.DataFrame,
    generators: pd.Series,
    scale: Sequence[str],
    n_resamples: int,
    seed: int,
) -> tuple[AdjudicatedSystem, ...]:
    """Per generator and adjudicated scale question, the raters' mean and the mean after adjudication."""
    raters = summary_scores(_scored(answers), scale)
    adjudicated = raters.copy()
    decided = {q: 0 for q in scale}
    numbers: dict[str, dict] = {q: {} for q in scale}  # question -> item -> the decided score
    for row in consensus.itertuples(index=False):
        if row.question not in scale:
            continue
        value = row.value
        number = float(value) if isinstance(value, int | float) and not isinstance(value, bool) else math.nan
        if row.item not in adjudicated.index:
            adjudicated.loc[row.item, row.question] = number  # a summary the raters left unscored: a new row
        numbers[row.question][row.item] = number
        decided[row.question] += 1
    for question, by_item in numbers.items():
        if by_item:
            adjudicated.loc[list(by_item), question] = list(by_item.values())
    before = describe_groups(raters, generators, n_resamples=n_resamples, seed=seed)
    after = describe_groups(adjudicated, generators, n_resamples=n_resamples, seed=seed)
    rows = []
    for question in scale:
        if not decided[question]:
            continue
        mine = {r["group"]: r for r in before.get(question, [])}
        for row in after.get(question, []):
            was = mine.get(row["group"], {})
            n_decided = int(
                consensus[(consensus[QUESTION] == question) & consensus[ITEM].map(generators).eq(row["group"])].shape[0]
            )
            rows.append(
                AdjudicatedSystem(
                    question=question,
                    generator=row["group"],
                    n_decided=n_decided,
                    raters_n=was.get("n", 0),
                    raters_mean=was.get("mean"),
                    raters_ci_low=was.get("ci_low"),
                    raters_ci_high=was.get("ci_high"),
                    adjudicated_n=row["n"],
                    adjudicated_mean=row["mean"],
                    adjudicated_ci_low=row["ci_low"],
                    adjudicated_ci_high=row["ci_high"],
                )
            )
    return tuple(rows)
