"""The study report: every statistic of the analysis app for one study, as one JSON-ready dict.

Pure code (no ORM): the service hands over the tidy ratings frame, the summaries frame,
the automatic metrics and the rubric's questions as :class:`QuestionSpec`. The report is
cached as JSON and every download, table and plot is derived from it.

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
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from analysis.versions import REPORT_VERSION
from stats.agreement import AgreementInputError, agreement_report
from stats.agreement_bootstrap import agreement_cis
from stats.compare import describe_groups, paired_comparisons, summary_scores
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

    @property
    def one_option(self) -> bool:
        """Answered by picking one option: a nominal item per summary."""
        return self.kind == "choice"

    @property
    def several_options(self) -> bool:
        """Answered by ticking any number of options: a binary item per option."""
        return self.kind == "checkboxes"

    @property
    def measured(self) -> str | None:
        """The level its agreement is read at: "ordinal" for a scale, "nominal" for
        options (a choice, or each option of a tickbox question), None where no
        agreement is computed (free text, highlights, preferences, per-claim answers,
        which have sections of their own)."""
        if self.plain_scale:
            return "ordinal"
        if self.counts_options:
            return "nominal"
        return None


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
) -> dict[str, Any]:
    """Agreement on one question (or one option of a tickbox question) with bootstrap
    intervals. ``scale`` is the coded scale the frame's values are on: a scale
    question's own, the options' positions for a choice, 0/1 for a tickbox option."""
    section: dict[str, Any] = {
        "question": question.key,
        "kind": question.kind,
        "level": question.measured,
        "option": option,
        "option_label": label,
        "scale": list(question.values) if question.plain_scale else [float(v) for v in scale],
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
) -> dict[str, Any]:
    """Every statistic for one study and phase, JSON-ready (None where undefined).

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
    answers = latest_answers(ratings)
    if raters is None:
        raters = answered_items(answers)
    if rater_names:
        answers = answers.assign(rater=answers[RATER].map(lambda r: rater_names.get(r, r)))
        raters = {item: [rater_names.get(r, r) for r in names] for item, names in raters.items()}
    if len(summaries):
        # Comparison items are judged with preferences (comparisons_section), never
        # rated one at a time: they are not summaries of this report.
        raters = {item: names for item, names in raters.items() if item in set(summaries[ITEM])}
    keys = summaries.set_index(ITEM)["key"].to_dict() if len(summaries) else {}
    sources = summaries.set_index(ITEM)["source"].to_dict() if len(summaries) else {}
    fields = list(group_fields) if group_fields is not None else default_group_fields(summaries)
    check_group_fields(fields, summaries)

    scale_questions = [q for q in questions if q.plain_scale]
    option_questions = [q for q in questions if q.counts_options]
    n_agreements = len(scale_questions) + sum(1 if q.one_option else len(q.values) for q in option_questions)
    total_work = max(1, n_agreements * n_resamples)
    done_before = 0

    def step(done: int) -> None:
        if progress is not None:
            progress(min(1.0, (done_before + done) / total_work))

    # Summaries, not the items of the statistics: a per-finding answer's item is
    # "<summary>:<finding>" (stats.frames.part_items), and a summary with four findings is
    # still one summary rated (the header read "24 of 20 summaries rated").
    rated = answers.assign(**{ITEM: summary_items(answers[ITEM])}) if len(answers) else answers
    if len(summaries) and len(rated):
        rated = rated[rated[ITEM].isin(set(summaries[ITEM]))]
    rated_items = rated.groupby(RATER)[ITEM].nunique() if len(rated) else pd.Series(dtype=int)
    report: dict[str, Any] = {
        "report_version": REPORT_VERSION,
        "n_answers": len(answers),
        "n_items_rated": int(rated[ITEM].nunique()) if len(rated) else 0,
        "n_summaries": len(summaries),
        "raters": [{"rater": r, "n_rated": int(n)} for r, n in rated_items.sort_index().items()],
        "questions": [{"key": q.key, "kind": q.kind, "prompt": q.prompt} for q in questions],
        "group_fields": fields,
        "n_resamples": n_resamples,
        "agreement": [],
        "histograms": [],
        "item_means": [],
        "by_group": [],
        "option_counts": [],
    }

    for question in scale_questions:
        part = answers[answers[QUESTION] == question.key]
        frame = pd.DataFrame({ITEM: part[ITEM], RATER: part[RATER], VALUE: part["score"].astype(float)})
        scale = [float(v) for v in question.values]
        report["agreement"].append(_agreement_section(frame, question, scale, n_resamples, seed, step))
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

    for question in option_questions:
        for option, label, frame, codes in option_agreement_frames(answers, question, raters):
            report["agreement"].append(
                _agreement_section(frame, question, codes, n_resamples, seed, step, option=option, label=label)
            )
            done_before += n_resamples
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

    report["compare"] = compare_section(answers, summaries, scale_questions, fields, n_resamples, seed)
    report["after_adjudication"] = after_adjudication_section(
        answers, summaries, questions, consensus, n_resamples, seed
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
    # FactPICO Table 4: each human question against an LLM evaluator's overall average,
    # beside its element-by-element rows (Table 10).
    metrics = evaluator_overall(metrics)
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
) -> dict[str, Any]:
    """Systems compared pointwise (stats.compare): per generator and per group field, each
    scale question's mean over summaries with SD, IQR and a bootstrap interval; per
    generator and per ``summary.<field>``, every two values paired on the sources both
    summarised (mean difference, paired bootstrap interval, Wilcoxon, Holm across pairs)."""
    section: dict[str, Any] = {
        "n_resamples": n_resamples,
        "seed": seed,
        "confidence_level": 0.95,
        "groups": [],
        "pairs": [],
    }
    questions = [q.key for q in scale_questions]
    if not questions or not len(summaries):
        return section
    scores = summary_scores(_scored(answers), questions)
    by_item = summaries.set_index(ITEM)
    for field in _comparison_fields(fields):
        for question, rows in describe_groups(scores, by_item[field], n_resamples=n_resamples, seed=seed).items():
            if rows:
                section["groups"].append({"field": field, "question": question, "rows": rows})
        if field == "generator" or field.startswith("summary."):
            pairs = paired_comparisons(scores, by_item[field], by_item["source"], n_resamples=n_resamples, seed=seed)
            for question, rows in pairs.items():
                if rows:
                    section["pairs"].append({"field": field, "question": question, "rows": rows})
    return section


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
) -> dict[str, Any]:
    """The consensus answers recorded after adjudication beside the raters': each decision
    with the raters' answers to the same summary and question, and per generator and scale
    question the mean over summaries from the raters' answers and after adjudication
    (each adjudicated summary takes its consensus score; an N/A consensus leaves it
    without one), each with its bootstrap interval."""
    section: dict[str, Any] = {"n_decisions": 0, "items": [], "by_system": []}
    if consensus is None or not len(consensus) or not len(summaries):
        return section
    kinds = {q.key: q for q in questions}
    consensus = consensus[consensus[QUESTION].isin(kinds) & consensus[ITEM].isin(set(summaries[ITEM]))]
    by_item = summaries.set_index(ITEM)
    whole = answers[~answers[ITEM].astype(str).str.contains(":", regex=False)] if len(answers) else answers
    section["n_decisions"] = len(consensus)
    for row in consensus.sort_values([ITEM, QUESTION]).itertuples(index=False):
        given = whole[(whole[ITEM] == row.item) & (whole[QUESTION] == row.question)] if len(whole) else whole
        scores = _scored(given)["score"].dropna() if len(given) else pd.Series(dtype=float)
        section["items"].append(
            {
                "item": row.item,
                "key": by_item.at[row.item, "key"],
                "generator": by_item.at[row.item, "generator"],
                "question": row.question,
                "raters": "; ".join(f"{r}: {_shown(a)}" for r, a in zip(given[RATER], given["answer"], strict=True))
                if len(given)
                else "",
                "raters_mean": float(scores.mean()) if len(scores) else None,
                "consensus": _shown(row.value),
                "batch": row.batch,
            }
        )
    scale = [q.key for q in questions if q.plain_scale]
    raters = summary_scores(_scored(answers), scale)
    adjudicated = raters.copy()
    decided = {q: 0 for q in scale}
    for row in consensus.itertuples(index=False):
        if row.question not in scale:
            continue
        value = row.value
        number = float(value) if isinstance(value, int | float) and not isinstance(value, bool) else math.nan
        adjudicated.loc[row.item, row.question] = number
        decided[row.question] += 1
    generators = by_item["generator"]
    before = describe_groups(raters, generators, n_resamples=n_resamples, seed=seed)
    after = describe_groups(adjudicated, generators, n_resamples=n_resamples, seed=seed)
    for question in scale:
        if not decided[question]:
            continue
        mine = {r["group"]: r for r in before.get(question, [])}
        for row in after.get(question, []):
            was = mine.get(row["group"], {})
            n_decided = int(
                consensus[(consensus[QUESTION] == question) & consensus[ITEM].map(generators).eq(row["group"])].shape[0]
            )
            section["by_system"].append(
                {
                    "question": question,
                    "generator": row["group"],
                    "n_decided": n_decided,
                    "raters_n": was.get("n", 0),
                    "raters_mean": was.get("mean"),
                    "raters_ci_low": was.get("ci_low"),
                    "raters_ci_high": was.get("ci_high"),
                    "adjudicated_n": row["n"],
                    "adjudicated_mean": row["mean"],
                    "adjudicated_ci_low": row["ci_low"],
                    "adjudicated_ci_high": row["ci_high"],
                }
            )
    return section
