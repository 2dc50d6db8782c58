"""The study report: every statistic of the analysis app for one study, as one JSON-ready dict.

Pure code (no ORM): the service hands over the tidy ratings frame, the summaries frame,
the automatic metrics and the rubric's questions as :class:`QuestionSpec`. The report is
cached as JSON and every download, table and plot is derived from it.

Choices made here (see docs/analysis.md):
- phase "all" uses each rater's newest answer per item: the post-discussion answer
  where one exists, else the initial one (a rater's two answers to one item are not
  two raters);
- agreement is computed for scale questions only, over the rubric's full scale; an
  unanswered (N/A) scale question is a missing rating;
- the human score of the meta-evaluation is, per summary, the mean rating of the first
  required scale question (the first scale question if none is required), and the same
  is done per rater on that rater's own ratings;
- distributions by group use every ``source.<field>`` column with 2 to 20 distinct
  values unless the fields are named.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from analysis.versions import REPORT_VERSION
from stats.agreement import AgreementInputError, agreement_report
from stats.agreement_bootstrap import agreement_cis
from stats.distributions import item_means, option_counts, score_histograms, scores_by_group
from stats.frames import ITEM, QUESTION, RATER, VALUE
from stats.metaeval import correlate_report, kl_divergence
from stats.metaeval_questions import meta_evaluation_tables
from stats.metrics import METRIC_COLUMNS

__all__ = [
    "REPORT_VERSION",
    "QuestionSpec",
    "build_study_report",
    "comparisons_section",
    "default_group_fields",
    "latest_answers",
]

PHASE_ORDER = {"initial": 0, "post_discussion": 1}
MAX_GROUPS = 20


@dataclass(frozen=True)
class QuestionSpec:
    """What the report needs to know about a rubric question."""

    key: str
    kind: str  # scale, choice, checkboxes or text; written into the report as it is
    prompt: str
    required: bool = False
    values: tuple[Any, ...] = ()
    labels: tuple[str, ...] = ()

    # The same names as annotate.rubrics.Question's predicates (this module cannot import
    # annotate: the statistics stay free of Django).
    @property
    def plain_scale(self) -> bool:
        """One score on the scale per item: what agreement, histograms and the
        meta-evaluation use. (A per-finding question reaches the report as a scale,
        each finding an item of its own.)"""
        return self.kind == "scale"

    @property
    def counts_options(self) -> bool:
        """Answered with options whose counts summarise it (one choice or tickboxes)."""
        return self.kind in ("choice", "checkboxes")


def to_json(value: Any) -> Any:
    """Recursively turn NaN/inf into None and numpy scalars into Python ones."""
    if isinstance(value, dict):
        return {str(k): to_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [to_json(v) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def latest_answers(ratings: pd.DataFrame) -> pd.DataFrame:
    """One row per (item, rater, question): the post-discussion answer where there is one,
    else the newest."""
    if ratings.empty:
        return ratings
    order = ratings["phase"].map(PHASE_ORDER).fillna(0)
    # One rater's answers to the same summary in two batches are resolved before the
    # frame gets here (annotate.selectors.counting.newest_rater_answers, shared with the dataset
    # card); for frames built elsewhere, such ties go to the newest answer.
    keys = [ITEM, RATER, QUESTION, "_order"] + (["submitted_at"] if "submitted_at" in ratings.columns else [])
    ranked = ratings.assign(_order=order).sort_values(keys, kind="stable")
    return ranked.drop_duplicates([ITEM, RATER, QUESTION], keep="last").drop(columns="_order").reset_index(drop=True)


def summary_items(items: pd.Series) -> pd.Series:
    """The summary of each item: a per-finding answer's item is "<summary>:<finding>"
    (stats.frames.part_items, from analysis.services via prepare_ratings)."""
    return items.astype(str).str.split(":", n=1).str[0]


def default_group_fields(summaries: pd.DataFrame) -> list[str]:
    """``source.<field>`` columns with 2 to MAX_GROUPS distinct values (usable as groups)."""
    fields = []
    for column in summaries.columns:
        if column.startswith("source.") and 2 <= summaries[column].astype(str).nunique() <= MAX_GROUPS:
            fields.append(column)
    return fields


def human_question(questions: Sequence[QuestionSpec]) -> QuestionSpec | None:
    scales = [q for q in questions if q.plain_scale]
    required = [q for q in scales if q.required]
    return (required or scales or [None])[0]


def _agreement_section(
    frame: pd.DataFrame, question: QuestionSpec, n_resamples: int, seed: int, progress: Callable[[int], None]
) -> dict[str, Any]:
    scale = [float(v) for v in question.values]
    section: dict[str, Any] = {
        "question": question.key,
        "scale": list(question.values),
        "n_resamples": n_resamples,
        "seed": seed,
        "confidence_level": 0.95,
        "report": None,
        "ci": {},
        "error": None,
    }
    try:
        report = agreement_report(frame, scale)
    except AgreementInputError as exc:
        section["error"] = str(exc)
        return section
    section["report"] = report.to_json_dict()
    # All statistics of all resamples at once (stats/agreement_bootstrap.py): the same
    # intervals as bootstrap_cis over agreement_report, from the same draws, ~100x faster.
    intervals = agreement_cis(frame, scale, n_resamples, seed, progress=progress)
    section["ci"] = {
        name: {"low": r.low, "high": r.high, "n_undefined": r.n_undefined} for name, r in intervals.items()
    }
    return section


def _correlations(table: pd.DataFrame, metric_columns: list[str]) -> dict[str, Any]:
    """correlate_report of every metric against ``human`` plus the KL divergence."""
    usable = [c for c in metric_columns if table[c].notna().any()]
    if not usable or table["human"].notna().sum() == 0:
        return {}
    metrics = correlate_report(table, "human", usable)["metrics"]
    for column in usable:
        metrics[column]["kl_divergence"] = kl_divergence(table["human"], table[column])
    return metrics


def build_study_report(
    *,
    ratings: pd.DataFrame,
    summaries: pd.DataFrame,
    metrics: pd.DataFrame,
    questions: Sequence[QuestionSpec],
    rater_names: dict[str, str] | None = None,
    group_fields: Sequence[str] | None = None,
    n_resamples: int = 1000,
    seed: int = 0,
    progress: Callable[[float], None] | None = None,
) -> dict[str, Any]:
    """Every statistic for one study and phase, JSON-ready (None where undefined).

    ``ratings`` is the tidy frame of ``annotate.selectors.frames.ratings_frame`` (item, rater,
    question, score, answer, phase); ``summaries`` has item, key, source and
    ``source.<field>`` columns; ``metrics`` has item and metric columns. ``rater_names``
    maps rater ids to the names shown. ``progress(fraction)`` is called during the
    bootstrap, which is the slow part.
    """
    answers = latest_answers(ratings)
    if rater_names:
        answers = answers.assign(rater=answers[RATER].map(lambda r: rater_names.get(r, r)))
    keys = summaries.set_index(ITEM)["key"].to_dict() if len(summaries) else {}
    sources = summaries.set_index(ITEM)["source"].to_dict() if len(summaries) else {}
    fields = list(group_fields) if group_fields is not None else default_group_fields(summaries)
    for field in fields:
        if field not in summaries.columns:
            raise ValueError(f"No field {field!r}; the summaries have {sorted(summaries.columns)}.")

    scale_questions = [q for q in questions if q.plain_scale]
    total_work = max(1, len(scale_questions) * n_resamples)
    done_before = 0

    def step(done: int) -> None:
        if progress is not None:
            progress(min(1.0, (done_before + done) / total_work))

    # Summaries, not the items of the statistics: a per-finding answer's item is
    # "<summary>:<finding>" (stats.frames.part_items), and a summary with four findings is
    # still one summary rated (the header read "24 of 20 summaries rated").
    rated = answers.assign(**{ITEM: summary_items(answers[ITEM])}) if len(answers) else answers
    rated_items = rated.groupby(RATER)[ITEM].nunique() if len(answers) else pd.Series(dtype=int)
    report: dict[str, Any] = {
        "report_version": REPORT_VERSION,
        "n_answers": len(answers),
        "n_items_rated": int(rated[ITEM].nunique()) if len(answers) else 0,
        "n_summaries": len(summaries),
        "raters": [{"rater": r, "n_rated": int(n)} for r, n in rated_items.sort_index().items()],
        "questions": [{"key": q.key, "kind": q.kind, "prompt": q.prompt} for q in questions],
        "group_fields": fields,
        "agreement": [],
        "histograms": [],
        "item_means": [],
        "by_group": [],
        "option_counts": [],
    }

    for question in scale_questions:
        part = answers[answers[QUESTION] == question.key]
        frame = pd.DataFrame({ITEM: part[ITEM], RATER: part[RATER], VALUE: part["score"].astype(float)})
        report["agreement"].append(_agreement_section(frame, question, n_resamples, seed, step))
        done_before += n_resamples
        histogram = score_histograms(frame, [float(v) for v in question.values])
        report["histograms"].append(
            {
                "question": question.key,
                "scale": list(question.values),
                "raters": [{"rater": r, "counts": [int(c) for c in row]} for r, row in histogram.iterrows()],
            }
        )
        means = item_means(frame)
        report["item_means"].append(
            {
                "question": question.key,
                "rows": [
                    {"item": row.item, "key": keys.get(row.item, ""), **row._asdict()}
                    for row in means.itertuples(index=False)
                ],
            }
        )
        for field in fields:
            groups = summaries.set_index(ITEM)[field]
            by = scores_by_group(frame, groups, [float(v) for v in question.values])
            report["by_group"].append({"field": field, "question": question.key, "rows": by.to_dict("records")})

    for question in questions:
        if not question.counts_options:
            continue
        part = answers[answers[QUESTION] == question.key]
        counts = option_counts(part, list(question.values), rated_items)
        report["option_counts"].append(
            {
                "question": question.key,
                "options": [
                    {"value": v, "label": label} for v, label in zip(question.values, question.labels, strict=True)
                ],
                "rows": counts.to_dict("records"),
            }
        )

    report.update(_meta_evaluation(answers, metrics, human_question(questions), keys, sources))
    report["meta_evaluation"] = _every_question(answers, metrics, summaries, scale_questions, n_resamples, seed)
    if progress is not None:
        progress(1.0)
    return to_json(report)


def metric_columns_of(metrics: pd.DataFrame) -> list[str]:
    """The built-in metric columns present, then the stored evaluators' (`eval.…`)."""
    return [c for c in METRIC_COLUMNS if c in metrics.columns] + sorted(
        c for c in metrics.columns if str(c).startswith("eval.")
    )


def _every_question(
    answers: pd.DataFrame,
    metrics: pd.DataFrame,
    summaries: pd.DataFrame,
    scale_questions: Sequence[QuestionSpec],
    n_resamples: int,
    seed: int,
) -> dict[str, Any]:
    """Every metric against every scale question and their average, at summary and system
    level (stats.metaeval_questions)."""
    scales = {q.key: (float(min(q.values)), float(max(q.values))) for q in scale_questions if q.values}
    if not scales or not len(metrics) or not len(answers):
        return {"questions": [], "summary_level": {}, "system_level": {}, "generators": 0}
    generators = summaries.set_index(ITEM)["generator"] if "generator" in summaries.columns else pd.Series(dtype=str)
    # Here a per-finding answer counts for its summary, so the summary's score is the mean over
    # its findings (and raters), as FactPICO's evidence-inference column and the evaluators'
    # `evidence` are.
    answers = answers.assign(**{ITEM: summary_items(answers[ITEM])})
    return meta_evaluation_tables(
        answers=answers,
        metrics=metrics,
        generators=generators,
        scales=scales,
        metric_columns=metric_columns_of(metrics),
        n_resamples=n_resamples,
        seed=seed,
    )


def _meta_evaluation(
    answers: pd.DataFrame,
    metrics: pd.DataFrame,
    human: QuestionSpec | None,
    keys: dict[str, str],
    sources: dict[str, str],
) -> dict[str, Any]:
    metric_columns = metric_columns_of(metrics)
    table = metrics.copy()
    table.insert(1, "key", table[ITEM].map(keys))
    table.insert(2, "source", table[ITEM].map(sources))
    section: dict[str, Any] = {"human_question": None, "metric_columns": metric_columns}
    if human is None:
        table["human_mean"] = np.nan
        return {"metrics": table.to_dict("records"), "correlation": section}
    scores = answers[(answers[QUESTION] == human.key) & answers["score"].notna()]
    table["human_mean"] = table[ITEM].map(scores.groupby(ITEM)["score"].mean())
    section["human_question"] = human.key
    section["mean"] = _correlations(table.assign(human=table["human_mean"]), metric_columns)
    section["per_rater"] = {}
    for rater, part in scores.groupby(RATER, sort=True):
        own = table.assign(human=table[ITEM].map(part.set_index(ITEM)["score"]))
        own = own[own["human"].notna()]
        section["per_rater"][str(rater)] = _correlations(own, metric_columns)
    return {"metrics": table.to_dict("records"), "correlation": section}


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
) -> list[dict[str, Any]]:
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
        sections.append(section)
    return sections
