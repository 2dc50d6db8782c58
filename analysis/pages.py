"""The report page's model: everything templates/analysis/report.html shows, precomputed
from the stored report (analysis.sections) so that the template stays logic-free and the
view only parses, asks for the report (analysis.services.request_study_report) and renders.

Pure reads: :func:`report_page` never computes or queues a report.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from django.urls import reverse

from analysis import selectors, services
from analysis.models import AnalysisResult
from analysis.plots import plot_names
from analysis.report_files import FILE_NAMES, agreement_rows, cohen_rows, correlation_rows, system_rows
from analysis.report_json import report_from_payload
from analysis.sections import (
    AfterAdjudication,
    AgreementSection,
    CompareTable,
    Histogram,
    OptionInfo,
    StudyReport,
)
from analysis.statistic_labels import statistic_label, statistic_note
from annotate.models import Study
from annotate.selectors.access import is_study_admin

__all__ = ["ReportBody", "ReportPage", "report_page"]

# The rubric whose paper the report's FactPICO tables reproduce: only its report cites them.
FACTPICO_RUBRIC = "factpico"

# What the report page names among its inputs (analysis.selectors.ReportInputs.counts),
# singular and plural; kinds with none are left out of the line.
_INPUT_NAMES = {
    "ratings": ("submitted rating", "submitted ratings"),
    "summaries": ("summary", "summaries"),
    "sources": ("source", "sources"),
    "claims": ("claim", "claims"),
    "evaluator_runs": ("evaluator run", "evaluator runs"),
    "judge_runs": ("rubric-judge run", "rubric-judge runs"),
    "questions": ("question", "questions"),
    "protocols": ("frozen protocol", "frozen protocols"),
}

# How the per-system table heads its columns (FactPICO Table 3's names where it has them).
_SYSTEM_HEADS = {
    "n_summaries": "summaries",
    "n_rated": "rated",
    "average": "average",
    "n_words": "words",
    "delta_fk": "ΔFK",
    "rougeL": "ROUGE-L",
}
_SPAN_HEADS = {"n": "#", "share": "%", "n_not_factual": "# not factual", "share_not_factual": "% not factual"}


@dataclass(frozen=True)
class Link:
    name: str
    url: str


@dataclass(frozen=True)
class Plot:
    kind: str
    subject: str
    url: str  # the SVG shown
    png: str
    drawn: bool


@dataclass(frozen=True)
class SpanRow:
    what: str
    units: int
    report: Mapping[str, Any] | None
    error: str | None


@dataclass(frozen=True)
class SpanTable:
    question: str
    prompt: str
    rows: tuple[SpanRow, ...]


@dataclass(frozen=True)
class CountsRow:
    """A row of counts (per option, per scale point) beside the row's own figures."""

    rater: str
    n_rated: int
    counts: tuple[int, ...]


@dataclass(frozen=True)
class OptionTable:
    question: str  # the prompt, then the key in brackets
    options: tuple[OptionInfo, ...]
    rows: tuple[CountsRow, ...]


@dataclass(frozen=True)
class GroupView:
    field: str
    question: str
    scale: tuple[str, ...]
    rows: tuple[Mapping[str, Any], ...]  # stats.distributions.scores_by_group's row and its `counts`


@dataclass(frozen=True)
class SystemsTable:
    headers: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    average_scale: str | None


@dataclass(frozen=True)
class MetaRow:
    metric: str
    cells: tuple[Mapping[str, Any], ...]


@dataclass(frozen=True)
class MetaTable:
    level: str
    rows: tuple[MetaRow, ...]


@dataclass(frozen=True)
class BetterPair:
    question: str
    better: str
    worse: str
    difference: float
    low: float
    high: float


# A table longer than this shows its first rows on the page and names the download that
# holds every row: a study of 60 raters has 1,770 rater pairs per question.
PAGE_ROWS = 200


@dataclass(frozen=True)
class LongTable:
    """The first PAGE_ROWS rows of a table, how many it has, and the file with all of them."""

    rows: tuple[Any, ...]
    total: int
    file: str
    url: str

    @property
    def hidden(self) -> int:
        return self.total - len(self.rows)


def _long_table(rows, file: str, study: Study, query: str) -> LongTable:
    rows = tuple(rows)
    url = reverse("analysis:download", args=[study.slug, file]) + query
    return LongTable(rows=rows[:PAGE_ROWS], total=len(rows), file=file, url=url)


@dataclass(frozen=True)
class ReportBody:
    """The finished report as the page shows it: ``study_report`` read into the
    dataclasses, and ``report`` as stored (the JSON that report.json holds)."""

    study_report: StudyReport
    report: Mapping[str, Any]
    cites_factpico: bool
    n_resamples: int
    span_sections: tuple[SpanTable, ...]
    agreement: tuple[Mapping[str, Any], ...]
    agreement_csv: str
    errors: tuple[AgreementSection, ...]
    cohen: LongTable
    histograms: tuple[Histogram, ...]
    options: tuple[OptionTable, ...]
    groups: tuple[GroupView, ...]
    correlations: tuple[Mapping[str, Any], ...]
    meta_questions: tuple[str, ...]
    meta_tables: tuple[MetaTable, ...]
    meta_better: tuple[BetterPair, ...]
    systems: SystemsTable
    compare_groups: tuple[CompareTable, ...]
    compare_pairs: tuple[CompareTable, ...]
    adjudication: AfterAdjudication
    adjudication_items: LongTable
    drift_windows: LongTable
    retrieval: tuple[Mapping[str, Any], ...]
    plots: tuple[Plot, ...]
    plots_pending: int
    downloads: tuple[Link, ...]


@dataclass(frozen=True)
class ReportPage:
    study: Study
    phase: str
    phases: tuple[tuple[str, str], ...]
    result: AnalysisResult
    can_recompute: bool
    # The plots stored so far while the worker still draws them; None once all are.
    drawn: set[tuple[str, str]] | None = None

    @functools.cached_property
    def body(self) -> ReportBody | None:
        """The finished report's part of the page, None until the report is done. Read
        from the stored payload on first use: the template uses it only when its cached
        copy of that part is missing."""
        if self.result.status != AnalysisResult.Status.DONE:
            return None
        return report_body(self.result, study=self.study, phase=self.phase, drawn=self.drawn)

    @property
    def asks_questions(self) -> bool:
        """A study of clinical questions rates answers, not summaries (literature.answers)."""
        return bool((self.result.inputs or {}).get("questions"))

    @property
    def computed_from(self) -> tuple[str, ...]:
        return tuple(computed_from(self.result.inputs or {}, answers=self.asks_questions))

    @property
    def items_rated(self) -> str:
        return "answers" if self.asks_questions else "summaries"

    def context(self) -> dict[str, Any]:
        """The template's names: the page's, and the finished report's at the top level,
        each read (building the body) only if the template asks for it. The rendered
        body is cached for BODY_CACHE_SECONDS once every plot is drawn, 0 before."""
        names = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "drawn"}
        drawing = self.drawn is not None
        names.update(drawing=drawing, body_cache_seconds=0 if drawing else BODY_CACHE_SECONDS)
        if self.result.status == AnalysisResult.Status.DONE:
            names.update(computed_from=self.computed_from, items_rated=self.items_rated)
            names.update({f.name: functools.partial(_body_field, self, f.name) for f in dataclasses.fields(ReportBody)})
        return names


# The rendered body is keyed by the report (a new report is a new row) and the page's
# address and language, so this only bounds how long an unused copy stays.
BODY_CACHE_SECONDS = 3600


def _body_field(page: ReportPage, name: str) -> Any:
    return getattr(page.body, name)


def report_page(*, user, study: Study, phase: str, result: AnalysisResult) -> ReportPage:
    """The report page of `study` for `phase`, as `user` sees it; `result` is the report
    analysis.services.request_study_report answered (done, or its progress)."""
    return ReportPage(
        study=study,
        phase=phase,
        phases=tuple(AnalysisResult.Phase.choices),
        result=result,
        can_recompute=is_study_admin(user, study),
        drawn=selectors.stored_plots(result=result) if services.plots_pending(result) else None,
    )


def report_body(result: AnalysisResult, *, study: Study, phase: str, drawn: set[tuple[str, str]] | None) -> ReportBody:
    """The finished report's part of the page. `drawn`: the plots stored so far while the
    worker still draws them after the numbers, None once all are."""
    report = report_from_payload(result.result)
    query = f"?phase={phase}"
    plots = _plots(result.result, study, query, drawn)
    meta = report.meta_evaluation
    return ReportBody(
        study_report=report,
        report=result.result,
        cites_factpico=cites_factpico(report),
        n_resamples=report.n_resamples,
        span_sections=span_sections(report),
        agreement=_agreement(report),
        agreement_csv=reverse("analysis:download", args=[study.slug, "agreement.csv"]) + query,
        errors=tuple(a for a in report.agreement if a.error),
        cohen=_long_table(
            ({**row, "subject": _subject_of(report, row)} for row in cohen_rows(report)),
            "cohen_kappa.csv",
            study,
            query,
        ),
        histograms=report.histograms,
        options=_options(report),
        groups=_groups(report),
        correlations=tuple(row for row in correlation_rows(report) if row["scope"] == "mean"),
        meta_questions=meta.questions,
        meta_tables=meta_tables(report),
        meta_better=meta_better(report),
        systems=systems_table(report),
        compare_groups=report.compare.groups,
        compare_pairs=report.compare.pairs,
        adjudication=report.after_adjudication,
        adjudication_items=_long_table(report.after_adjudication.items, "after_adjudication_items.csv", study, query),
        drift_windows=_long_table(report.drift.windows if report.drift else (), "drift.csv", study, query),
        retrieval=report.retrieval,
        plots=plots,
        plots_pending=sum(not p.drawn for p in plots),
        downloads=tuple(
            Link(name=name, url=reverse("analysis:download", args=[study.slug, name]) + query) for name in FILE_NAMES
        ),
    )


def computed_from(counts: dict[str, int], *, answers: bool = False) -> list[str]:
    """["24 submitted ratings", "30 summaries", "1 evaluator run", ...] for the report page;
    ratings, summaries and evaluator runs are always named, the other kinds when present.
    `answers`: the study's summaries are answers to clinical questions, and named so."""
    always = {"ratings", "summaries", "evaluator_runs"}
    names = {**_INPUT_NAMES, "summaries": ("answer", "answers")} if answers else _INPUT_NAMES
    return [
        f"{counts.get(key, 0)} {one if counts.get(key, 0) == 1 else many}"
        for key, (one, many) in names.items()
        if key in always or counts.get(key)
    ]


def cites_factpico(report: StudyReport) -> bool:
    """The report is of FactPICO's own rubric (its tables are named after the paper's)."""
    return report.rubric is not None and report.rubric.key == FACTPICO_RUBRIC


def _plots(payload: dict, study: Study, query: str, drawn: set[tuple[str, str]] | None) -> tuple[Plot, ...]:
    def url(kind: str, subject: str, fmt: str) -> str:
        return reverse("analysis:plot", args=[study.slug, kind, subject, fmt]) + query

    return tuple(
        Plot(
            kind=kind,
            subject=subject,
            url=url(kind, subject, "svg"),
            png=url(kind, subject, "png"),
            drawn=drawn is None or (kind, subject) in drawn,
        )
        for kind, subject, _stem in plot_names(payload)
    )


def _subject(question: str, option: str | None) -> str:
    """A row's question as shown: a tickbox question's option after its key."""
    return f"{question}: {option}" if option else question


def _subject_of(report: StudyReport, row: Mapping[str, Any]) -> str:
    labels = {(a.question, a.option): a.option_label or a.option for a in report.agreement}
    return _subject(row["question"], labels.get((row["question"], row.get("option"))))


def _agreement(report: StudyReport) -> tuple[dict[str, Any], ...]:
    return tuple(
        {
            **row,
            "subject": _subject_of(report, row),
            "label": statistic_label(row["statistic"]),
            "note": statistic_note(row["statistic"]),
        }
        for row in agreement_rows(report)
    )


def _options(report: StudyReport) -> tuple[OptionTable, ...]:
    prompts = {q.key: f"{q.prompt} ({q.key})" for q in report.questions}
    return tuple(
        OptionTable(
            question=prompts.get(o.question, o.question),
            options=o.options,
            rows=tuple(
                CountsRow(rater=r["rater"], n_rated=r["n_rated"], counts=tuple(r[str(opt.value)] for opt in o.options))
                for r in o.rows
            ),
        )
        for o in report.option_counts
    )


def _groups(report: StudyReport) -> tuple[GroupView, ...]:
    views = []
    for g in report.by_group:
        scale_columns = [c for c in (g.rows[0] if g.rows else {}) if c.startswith("n_") and c[2:].isdigit()]
        views.append(
            GroupView(
                field=g.field,
                question=g.question,
                scale=tuple(c[2:] for c in scale_columns),
                rows=tuple({**r, "counts": [r[c] for c in scale_columns]} for r in g.rows),
            )
        )
    return tuple(views)


def span_sections(report: StudyReport) -> tuple[SpanTable, ...]:
    """Per span question, the rows of its agreement table: marking per sentence, then each
    sub-question with options on the spans two raters both marked."""
    tables = []
    for s in report.span_agreement:
        rows = [SpanRow(what="marking per sentence", units=s.n_sentences, report=s.sentences,
                        error=s.errors.get("sentences"))]  # fmt: skip
        rows += [
            SpanRow(what=f"{sub.key} ({sub.prompt}), on overlapping spans", units=sub.n_pairs, report=sub.report,
                    error=sub.error)
            for sub in s.sub_questions
        ]  # fmt: skip
        tables.append(SpanTable(question=s.question, prompt=s.prompt, rows=tuple(rows)))
    return tuple(tables)


def _system_head(column: str) -> str:
    if "." in column:
        question, name = column.split(".", 1)
        return f"{question} {_SPAN_HEADS.get(name, name)}"
    return _SYSTEM_HEADS.get(column, column)


def _system_cell(column: str, value: Any) -> str:
    if value is None:
        return "—"
    if column.endswith("share") or column.endswith("share_not_factual"):
        return f"{100 * value:.1f}%"
    if isinstance(value, float):
        return f"{value:.2f}"
    return str(value)


def systems_table(report: StudyReport) -> SystemsTable:
    """The per-system table (stats.systems) as headers and rows of display strings: means
    to 2 decimals, shares as percentages, counts as they are."""
    rows, columns = system_rows(report)
    return SystemsTable(
        headers=tuple(_system_head(c) for c in columns),
        rows=tuple(tuple(_system_cell(c, row.get(c)) for c in columns) for row in rows),
        average_scale=report.by_system.average_scale if report.by_system else None,
    )


def meta_better(report: StudyReport) -> tuple[BetterPair, ...]:
    """The pairs of metrics that differ clearly on a question (stats.metaeval_questions)."""
    rows = []
    for question, pairs in (report.meta_evaluation.comparisons or {}).items():
        for p in pairs:
            if p["a_better"] or p["b_better"]:
                better, worse = (p["a"], p["b"]) if p["a_better"] else (p["b"], p["a"])
                sign = 1 if p["a_better"] else -1
                low, high = sorted((sign * p["ci_low"], sign * p["ci_high"]))
                rows.append(BetterPair(question=question, better=better, worse=worse,
                                       difference=sign * p["difference"], low=low, high=high))  # fmt: skip
    return tuple(rows)


def meta_tables(report: StudyReport) -> tuple[MetaTable, ...]:
    """The every-question tables of the report page: per level, one row per metric with
    a cell per question (tau-b, rho, n)."""
    section = report.meta_evaluation
    levels = (
        (section.summary_level, "Summary level"),
        (section.system_level, "System level (per-generator means)"),
    )
    return tuple(
        MetaTable(
            level=label,
            rows=tuple(
                MetaRow(metric=metric, cells=tuple(by_question.get(q, {}) for q in section.questions))
                for metric, by_question in table.items()
            ),
        )
        for table, label in levels
    )
