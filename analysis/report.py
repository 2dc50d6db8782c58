"""The study report: every statistic of the analysis app for one study, as frozen dataclasses
(analysis.sections).

Pure code (no ORM): the service hands over the tidy ratings frame, the summaries frame,
the automatic metrics and the rubric's questions as :class:`QuestionSpec`. The report is
cached as JSON (analysis.report_json) and every download, table and plot is derived
from it. Systems compared, after adjudication and comparisons: analysis.report_compare.

Choices made here (see docs/analysis.md):
- phase "all" uses each rater's newest answer per item: the post-discussion answer
  where one exists, else the initial one (a rater's two answers to one item are not
  two raters);
- agreement is computed for every question answered with a value: a scale over the
  rubric's full scale (an unanswered or N/A scale question is a missing rating); a
  choice question as nominal over all its options; a tickbox question option by option,
  each a binary item (ticked or not) for every rater who answered the summary
  (stats.options);
- the human score of the meta-evaluation is, per summary, the mean rating of the first
  required scale question (the first scale question if none is required), and the same
  is done per rater on that rater's own ratings;
- distributions by group use every ``source.<field>`` column, and every ``summary.<field>``
  column of text, with 2 to 20 distinct values unless the fields are named;
- systems are compared (stats.compare) per generator and per each of those fields: every
  scale question's mean over summaries with its SD, IQR and bootstrap interval; and every
  two values of the generator or of a ``summary.<field>`` (the fields that vary within a
  source) paired on the sources both summarised;
- "after adjudication": each adjudicated (summary, question) takes the consensus answer
  recorded for it (the newest) in place of its raters' mean; the rest keep the raters'.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from analysis.question_spec import QuestionSpec
from analysis.report_compare import after_adjudication_section, compare_section, comparisons_section
from analysis.report_json import from_payload, to_payload
from analysis.sections import (
    AgreementSection,
    Correlation,
    GroupTable,
    Histogram,
    Interval,
    ItemMean,
    ItemMeans,
    MetaEvaluation,
    OptionCounts,
    OptionInfo,
    QuestionInfo,
    RaterCount,
    RaterHistogram,
    StudyReport,
)
from analysis.versions import REPORT_VERSION
from stats.agreement import AgreementInputError, agreement_report
from stats.agreement_bootstrap import agreement_cis
from stats.distributions import item_means, option_counts, score_histograms, scores_by_group
from stats.frames import ITEM, QUESTION, RATER, VALUE
from stats.metaeval import correlate_report, kl_divergence
from stats.metaeval_questions import evaluator_overall, meta_evaluation_tables
from stats.metrics import METRIC_COLUMNS
from stats.options import choice_frame, tickbox_frames

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
    """``source.<field>`` columns, and ``summary.<field>`` columns whose values are text,
    with 2 to MAX_GROUPS distinct values (usable as groups). A summary's numbers (a
    pipeline's attempts, a length) are groups only when named."""
    fields = []
    for column in summaries.columns:
        if not 2 <= summaries[column].astype(str).nunique() <= MAX_GROUPS:
            continue
        texts = summaries[column].dropna().map(lambda v: isinstance(v, str)).all()
        if column.startswith("source.") or (column.startswith("summary.") and texts):
            fields.append(column)
    return fields


def group_field_choices(summaries: pd.DataFrame) -> list[str]:
    """Every field the scores can be split by: the generator, and each ``source.<field>``
    and ``summary.<field>`` column."""
    named = [c for c in summaries.columns if str(c).startswith(("source.", "summary."))]
    return ["generator", *sorted(named)]


def check_group_fields(fields: Sequence[str], summaries: pd.DataFrame) -> None:
    """A ValueError naming the fields that can be used, for a field the summaries lack."""
    for field in fields:
        if field not in summaries.columns or field not in group_field_choices(summaries):
            usable = ", ".join(group_field_choices(summaries)) if len(summaries) else "none (no summaries)"
            raise ValueError(
                f"No field {field!r} to split scores by. Use generator, source.FIELD or summary.FIELD "
                f"(a key of the sources' or summaries' metadata); this study has: {usable}."
            )


def human_question(questions: Sequence[QuestionSpec]) -> QuestionSpec | None:
    scales = [q for q in questions if q.plain_scale]
    required = [q for q in scales if q.required]
    return (required or scales or [None])[0]


def _agreement_section(
    frame: pd.DataFrame,
    question: QuestionSpec,
    scale: Sequence[float],
    n_resamples: int,
    seed: int,
    progress: Callable[[int], None],
    *,
    option: Any = None,
    label: str = "",
) -> AgreementSection:
    """Agreement on one question (or one option of a tickbox question) with bootstrap
    intervals. ``scale`` is the coded scale the frame's values are on: a scale
    question's own, the options' positions for a choice, 0/1 for a tickbox option."""
    section = AgreementSection(
        question=question.key,
        kind=question.kind,
        level=question.measured,
        option=option,
        option_label=label,
        scale=tuple(question.values) if question.plain_scale else tuple(float(v) for v in scale),
        n_resamples=n_resamples,
        seed=seed,
        confidence_level=0.95,
        report=None,
        ci={},
        error=None,
    )
    try:
        report = agreement_report(frame, scale)
    except AgreementInputError as exc:
        return dataclasses.replace(section, error=str(exc))
    # All statistics of all resamples at once (stats/agreement_bootstrap.py): the same
    # intervals as bootstrap_cis over agreement_report, from the same draws, ~100x faster.
    intervals = agreement_cis(frame, scale, n_resamples, seed, progress=progress, report=report)
    return dataclasses.replace(
        section,
        report=report.to_json_dict(),
        ci={name: Interval(low=r.low, high=r.high, n_undefined=r.n_undefined) for name, r in intervals.items()},
    )


def option_agreement_frames(
    answers: pd.DataFrame, question: QuestionSpec, raters: dict[str, list[str]]
) -> list[tuple[Any, str, pd.DataFrame, list[float]]]:
    """(option, label, frame, coded scale) for each agreement of a question answered with
    options: one for a choice, one per option of a tickbox question (stats.options)."""
    part = answers[answers[QUESTION] == question.key]
    if question.one_option:
        codes = [float(i) for i in range(len(question.values))]
        return [(None, "", choice_frame(part, question.values), codes)]
    frames = tickbox_frames(part, question.values, raters)
    return [
        (option, label, frames[option], [0.0, 1.0])
        for option, label in zip(question.values, question.labels, strict=True)
    ]


def answered_items(answers: pd.DataFrame) -> dict[str, list[str]]:
    """Summary -> the raters with an answer to it (any question), from the answers."""
    if not len(answers):
        return {}
    pairs = answers.assign(**{ITEM: summary_items(answers[ITEM])})[[ITEM, RATER]].drop_duplicates()
    return {str(item): sorted(group[RATER].astype(str)) for item, group in pairs.groupby(ITEM, sort=True)}


def _correlations(table: pd.DataFrame, metric_columns: list[str]) -> dict[str, Any]:
    """correlate_report of every metric against ``human`` plus the KL divergence."""
    usable = [c for c in metric_columns if table[c].notna().any()]
    if not usable or table["human"].notna().sum() == 0:
        return {}
    metrics = correlate_report(table, "human", usable)["metrics"]
    for column in usable:
        metrics[column]["kl_divergence"] = kl_divergence(table["human"], table[column])
    return metrics


@dataclass
class _Bootstrap:
    """The bootstrap's progress over every agreement of the report (the slow part)."""

    n_resamples: int
    seed: int
    total: int
    callback: Callable[[float], None] | None
    done_before: int = 0

    def step(self, done: int) -> None:
        if self.callback is not None:
            self.callback(min(1.0, (self.done_before + done) / self.total))

    def agreement(self, frame, question, scale, **option) -> AgreementSection:
        section = _agreement_section(frame, question, scale, self.n_resamples, self.seed, self.step, **option)
        self.done_before += self.n_resamples
        return section


@dataclass(frozen=True)
class _ScaleSections:
    agreement: AgreementSection
    histogram: Histogram
    item_means: ItemMeans
    by_group: tuple[GroupTable, ...]


def _scale_sections(
    answers: pd.DataFrame,
    question: QuestionSpec,
    summaries: pd.DataFrame,
    fields: Sequence[str],
    keys: dict[str, str],
    bootstrap: _Bootstrap,
) -> _ScaleSections:
    """Agreement, histogram per rater, mean per item and scores per group of a scale question."""
    part = answers[answers[QUESTION] == question.key]
    frame = pd.DataFrame({ITEM: part[ITEM], RATER: part[RATER], VALUE: part["score"].astype(float)})
    scale = [float(v) for v in question.values]
    agreement = bootstrap.agreement(frame, question, scale)
    histogram = score_histograms(frame, scale)
    means = item_means(frame)
    groups = []
    for field in fields:
        by = scores_by_group(frame, summaries.set_index(ITEM)[field], scale)
        groups.append(GroupTable(field=field, question=question.key, rows=tuple(by.to_dict("records"))))
    return _ScaleSections(
        agreement=agreement,
        histogram=Histogram(
            question=question.key,
            scale=tuple(question.values),
            raters=tuple(RaterHistogram(rater=r, counts=tuple(int(c) for c in row)) for r, row in histogram.iterrows()),
        ),
        item_means=ItemMeans(
            question=question.key,
            rows=tuple(
                ItemMean(**{"item": row.item, "key": keys.get(row.item, ""), **row._asdict()})
                for row in means.itertuples(index=False)
            ),
        ),
        by_group=tuple(groups),
    )


def _option_sections(
    answers: pd.DataFrame,
    question: QuestionSpec,
    raters: dict[str, list[str]],
    rated_items: pd.Series,
    bootstrap: _Bootstrap,
) -> tuple[list[AgreementSection], OptionCounts]:
    """Agreement (per option of a tickbox question) and option counts of a question answered with options."""
    agreement = [
        bootstrap.agreement(frame, question, codes, option=option, label=label)
        for option, label, frame, codes in option_agreement_frames(answers, question, raters)
    ]
    part = answers[answers[QUESTION] == question.key]
    counts = option_counts(part, list(question.values), rated_items)
    return agreement, OptionCounts(
        question=question.key,
        options=tuple(
            OptionInfo(value=v, label=label) for v, label in zip(question.values, question.labels, strict=True)
        ),
        rows=tuple(counts.to_dict("records")),
    )


def _answers_by_name(
    ratings: pd.DataFrame,
    summaries: pd.DataFrame,
    rater_names: dict[str, str] | None,
    raters: dict[str, list[str]] | None,
) -> tuple[pd.DataFrame, dict[str, list[str]]]:
    """The answers that count, raters by name, and each summary's raters (by name)."""
    answers = latest_answers(ratings)
    if raters is None:
        raters = answered_items(answers)
    if rater_names:
        answers = answers.assign(rater=answers[RATER].map(lambda r: rater_names.get(r, r)))
        raters = {item: [rater_names.get(r, r) for r in names] for item, names in raters.items()}
    if len(summaries):
        # Comparison items are judged with preferences (comparisons_section), never
        # rated one at a time: they are not summaries of this report.
        kept = set(summaries[ITEM])
        raters = {item: names for item, names in raters.items() if item in kept}
    return answers, raters


def _rated_summaries(answers: pd.DataFrame, summaries: pd.DataFrame) -> pd.DataFrame:
    """The answers by summary, not by the items of the statistics: a per-finding answer's
    item is "<summary>:<finding>" (stats.frames.part_items), and a summary with four
    findings is still one summary rated (the header read "24 of 20 summaries rated")."""
    rated = answers.assign(**{ITEM: summary_items(answers[ITEM])}) if len(answers) else answers
    if len(summaries) and len(rated):
        rated = rated[rated[ITEM].isin(set(summaries[ITEM]))]
    return rated


def build_study_report(
    *,
    ratings: pd.DataFrame,
    summaries: pd.DataFrame,
    metrics: pd.DataFrame,
    questions: Sequence[QuestionSpec],
    rater_names: dict[str, str] | None = None,
    group_fields: Sequence[str] | None = None,
    consensus: pd.DataFrame | None = None,
    raters: dict[str, list[str]] | None = None,
    n_resamples: int = 1000,
    seed: int = 0,
    progress: Callable[[float], None] | None = None,
) -> StudyReport:
    """Every statistic for one study and phase (None or NaN where undefined: the stored
    payload, analysis.report_json, has null for both); analysis.services adds the sections
    that need the database.

    ``ratings`` is the tidy frame of ``annotate.selectors.frames.ratings_frame`` (item, rater,
    question, score, answer, phase); ``summaries`` has item, key, source and
    ``source.<field>`` columns; ``metrics`` has item and metric columns. ``rater_names``
    maps rater ids to the names shown. ``consensus`` (annotate.selectors.frames.consensus_frame:
    item, question, value) holds the answers recorded after adjudication. ``raters`` maps
    each summary to the raters whose answer to it counts (by id, as in ``ratings``), so
    that a tickbox question left empty is read as "none ticked"; by default, the raters
    with any answer to it. ``progress(fraction)`` is called during the bootstrap, which is
    the slow part.
    """
    answers, raters = _answers_by_name(ratings, summaries, rater_names, raters)
    keys = summaries.set_index(ITEM)["key"].to_dict() if len(summaries) else {}
    sources = summaries.set_index(ITEM)["source"].to_dict() if len(summaries) else {}
    fields = list(group_fields) if group_fields is not None else default_group_fields(summaries)
    check_group_fields(fields, summaries)

    scale_questions = [q for q in questions if q.plain_scale]
    option_questions = [q for q in questions if q.counts_options]
    n_agreements = len(scale_questions) + sum(1 if q.one_option else len(q.values) for q in option_questions)
    bootstrap = _Bootstrap(n_resamples, seed, total=max(1, n_agreements * n_resamples), callback=progress)
    rated = _rated_summaries(answers, summaries)
    rated_items = rated.groupby(RATER)[ITEM].nunique() if len(rated) else pd.Series(dtype=int)
    scales = [_scale_sections(answers, q, summaries, fields, keys, bootstrap) for q in scale_questions]
    options = [_option_sections(answers, q, raters, rated_items, bootstrap) for q in option_questions]
    metric_rows, correlation = _meta_evaluation(answers, metrics, human_question(questions), keys, sources)
    report = StudyReport(
        report_version=REPORT_VERSION,
        n_answers=len(answers),
        n_items_rated=int(rated[ITEM].nunique()) if len(rated) else 0,
        n_summaries=len(summaries),
        raters=tuple(RaterCount(rater=r, n_rated=int(n)) for r, n in rated_items.sort_index().items()),
        questions=tuple(QuestionInfo(key=q.key, kind=q.kind, prompt=q.prompt) for q in questions),
        group_fields=tuple(fields),
        n_resamples=n_resamples,
        agreement=(*(s.agreement for s in scales), *(a for agreement, _ in options for a in agreement)),
        histograms=tuple(s.histogram for s in scales),
        item_means=tuple(s.item_means for s in scales),
        by_group=tuple(g for s in scales for g in s.by_group),
        option_counts=tuple(counts for _, counts in options),
        compare=compare_section(answers, summaries, scale_questions, fields, n_resamples, seed),
        after_adjudication=after_adjudication_section(answers, summaries, questions, consensus, n_resamples, seed),
        metrics=metric_rows,
        correlation=correlation,
        meta_evaluation=_every_question(answers, metrics, summaries, scale_questions, n_resamples, seed),
    )
    if progress is not None:
        progress(1.0)
    return report


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
) -> MetaEvaluation:
    """Every metric against every scale question and their average, at summary and system
    level (stats.metaeval_questions)."""
    scales = {q.key: (float(min(q.values)), float(max(q.values))) for q in scale_questions if q.values}
    if not scales or not len(metrics) or not len(answers):
        return MetaEvaluation()
    generators = summaries.set_index(ITEM)["generator"] if "generator" in summaries.columns else pd.Series(dtype=str)
    # Here a per-finding answer counts for its summary, so the summary's score is the mean over
    # its findings (and raters), as FactPICO's evidence-inference column and the evaluators'
    # `evidence` are.
    answers = answers.assign(**{ITEM: summary_items(answers[ITEM])})
    # FactPICO Table 4: each human question against an LLM evaluator's overall average,
    # beside its element-by-element rows (Table 10).
    metrics = evaluator_overall(metrics)
    tables = meta_evaluation_tables(
        answers=answers,
        metrics=metrics,
        generators=generators,
        scales=scales,
        metric_columns=metric_columns_of(metrics),
        n_resamples=n_resamples,
        seed=seed,
    )
    return from_payload(MetaEvaluation, to_payload(tables))


def _meta_evaluation(
    answers: pd.DataFrame,
    metrics: pd.DataFrame,
    human: QuestionSpec | None,
    keys: dict[str, str],
    sources: dict[str, str],
) -> tuple[tuple[dict[str, Any], ...], Correlation]:
    """The metrics table (with each summary's mean human score) and its correlations."""
    metric_columns = metric_columns_of(metrics)
    table = metrics.copy()
    table.insert(1, "key", table[ITEM].map(keys))
    table.insert(2, "source", table[ITEM].map(sources))
    if human is None:
        table["human_mean"] = np.nan
        rows = tuple(to_payload(table.to_dict("records")))
        return rows, Correlation(human_question=None, metric_columns=tuple(metric_columns))
    scores = answers[(answers[QUESTION] == human.key) & answers["score"].notna()]
    table["human_mean"] = table[ITEM].map(scores.groupby(ITEM)["score"].mean())
    mean = _correlations(table.assign(human=table["human_mean"]), metric_columns)
    per_rater = {}
    for rater, part in scores.groupby(RATER, sort=True):
        own = table.assign(human=table[ITEM].map(part.set_index(ITEM)["score"]))
        own = own[own["human"].notna()]
        per_rater[str(rater)] = _correlations(own, metric_columns)
    correlation = Correlation(
        human_question=human.key,
        metric_columns=tuple(metric_columns),
        mean=to_payload(mean),
        per_rater=to_payload(per_rater),
    )
    return tuple(to_payload(table.to_dict("records"))), correlation
