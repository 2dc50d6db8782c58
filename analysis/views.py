"""The study report pages. Thin: check access, call a selector or service, render.

Access: the study's admins and viewers (annotate.selectors.access.get_study_for_viewer);
anyone else gets 404, as on the other study pages, and anonymous users are sent to login.
"""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from analysis import selectors, services, tasks
from analysis.models import AnalysisResult
from analysis.plots import FORMATS, plot_names
from analysis.report_files import (
    FILE_NAMES,
    agreement_rows,
    cohen_rows,
    correlation_rows,
    report_files,
    system_rows,
)
from analysis.statistic_labels import statistic_label, statistic_note
from annotate.models import Study
from annotate.selectors.access import get_study_for_admin, get_study_for_viewer, is_study_admin, studies_for_staff_pages

CONTENT_TYPES = {"png": "image/png", "svg": "image/svg+xml"}


def _phase(request) -> str:
    phase = request.GET.get("phase", "all")
    if phase not in services.PHASES:
        raise Http404("Unknown phase.")
    return phase


def _done_result(study: Study, phase: str) -> AnalysisResult:
    """The finished report for the study's inputs as they are now, else 404 (never computes)."""
    fingerprint = selectors.report_inputs(study=study, phase=phase).fingerprint
    result = selectors.analysis_result(study=study, phase=phase, fingerprint=fingerprint)
    if result is None or result.status != AnalysisResult.Status.DONE:
        raise Http404("No finished report for the current ratings; open the report page first.")
    return result


@login_required
@require_GET
def study_list(request):
    return render(request, "analysis/study_list.html", {"studies": studies_for_staff_pages(request.user)})


@login_required
@require_GET
def study_report(request, slug: str):
    study = get_study_for_viewer(request.user, slug)
    phase = _phase(request)
    # Never computes here: the cached report, or a pending one whose progress the page shows.
    result = services.request_study_report(study=study, phase=phase, enqueue=tasks.enqueue_study_report)
    context: dict[str, Any] = {
        "study": study,
        "phase": phase,
        "phases": AnalysisResult.Phase.choices,
        "result": result,
        "can_recompute": is_study_admin(request.user, study),
    }
    if result.status == AnalysisResult.Status.DONE:
        drawn = selectors.stored_plots(result=result) if services.plots_pending(result) else None
        context.update(_report_context(result.result, study, phase, drawn))
        # A study of clinical questions rates answers, not summaries (literature.answers).
        asks_questions = bool((result.inputs or {}).get("questions"))
        context["computed_from"] = _computed_from(result.inputs, answers=asks_questions)
        context["items_rated"] = "answers" if asks_questions else "summaries"
    return render(request, "analysis/report.html", context)


@login_required
@require_POST
def study_report_recompute(request, slug: str):
    """A study admin asks for the report to be computed again (CSRF-checked POST)."""
    study = get_study_for_admin(request.user, slug)
    phase = request.POST.get("phase", "all")
    if phase not in services.PHASES:
        raise Http404("Unknown phase.")
    services.recompute_study_report(study=study, phase=phase, enqueue=tasks.enqueue_study_report)
    messages.success(request, "The report is being computed again; this page shows it when it is done.")
    return redirect(reverse("analysis:report", args=[study.slug]) + f"?phase={phase}")


@login_required
@require_POST
def study_report_resume(request, slug: str):
    """ "Compute it again" after a report failed (its worker died): any viewer may ask."""
    study = get_study_for_viewer(request.user, slug)
    phase = request.POST.get("phase", "all")
    if phase not in services.PHASES:
        raise Http404("Unknown phase.")
    services.resume_study_report(study=study, phase=phase, enqueue=tasks.enqueue_study_report)
    return redirect(reverse("analysis:report", args=[study.slug]) + f"?phase={phase}")


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
}


def _computed_from(counts: dict[str, int], *, answers: bool = False) -> list[str]:
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


@login_required
@require_GET
def study_report_progress(request, slug: str):
    """What static/js/report.js polls while the report is computed: status and percent.
    Answers at once, as the page does (and queues the report again where the page would)."""
    study = get_study_for_viewer(request.user, slug)
    result = services.request_study_report(study=study, phase=_phase(request), enqueue=tasks.enqueue_study_report)
    response = JsonResponse({"status": result.status, "progress": result.progress})
    response["Cache-Control"] = "no-store"
    return response


def _report_context(
    report: dict[str, Any], study: Study, phase: str, drawn: set[tuple[str, str]] | None
) -> dict[str, Any]:
    """Everything the template shows, precomputed (templates stay logic-free). `drawn`: the
    plots stored so far while the worker still draws them after the numbers, None once all are."""
    query = f"?phase={phase}"
    plots = []
    for kind, subject, _stem in plot_names(report):
        url = reverse("analysis:plot", args=[study.slug, kind, subject, "svg"]) + query
        png = reverse("analysis:plot", args=[study.slug, kind, subject, "png"]) + query
        plots.append(
            {
                "kind": kind,
                "subject": subject,
                "url": url,
                "png": png,
                "drawn": drawn is None or (kind, subject) in drawn,
            }
        )
    histograms = []
    for h in report["histograms"]:
        histograms.append({"question": h["question"], "scale": h["scale"], "raters": h["raters"]})
    prompts = {q["key"]: f"{q['prompt']} ({q['key']})" for q in report.get("questions", [])}
    options = []
    for o in report["option_counts"]:
        rows = [{"rater": r["rater"], "n_rated": r["n_rated"], "counts": [r[opt["value"]] for opt in o["options"]]}
                for r in o["rows"]]  # fmt: skip
        options.append({"question": prompts.get(o["question"], o["question"]), "options": o["options"], "rows": rows})
    groups = []
    for g in report["by_group"]:
        scale_columns = [c for c in (g["rows"][0] if g["rows"] else {}) if c.startswith("n_") and c[2:].isdigit()]
        rows = [{**r, "counts": [r[c] for c in scale_columns]} for r in g["rows"]]
        groups.append({"field": g["field"], "question": g["question"], "scale": [c[2:] for c in scale_columns],
                       "rows": rows})  # fmt: skip
    labels = {(a["question"], a.get("option")): a.get("option_label") or a.get("option") for a in report["agreement"]}
    return {
        "report": report,
        "cites_factpico": cites_factpico(report),
        "n_resamples": report.get("n_resamples", (report["agreement"] or [{}])[0].get("n_resamples", 0)),
        "span_sections": _span_sections(report),
        "agreement": [
            {
                **row,
                "subject": _subject(row["question"], labels.get((row["question"], row.get("option")))),
                "label": statistic_label(row["statistic"]),
                "note": statistic_note(row["statistic"]),
            }
            for row in agreement_rows(report)
        ],
        "agreement_csv": reverse("analysis:download", args=[study.slug, "agreement.csv"]) + query,
        "errors": [a for a in report["agreement"] if a["error"]],
        "cohen": [
            {**row, "subject": _subject(row["question"], labels.get((row["question"], row.get("option"))))}
            for row in cohen_rows(report)
        ],
        "histograms": histograms,
        "options": options,
        "groups": groups,
        "correlations": [row for row in correlation_rows(report) if row["scope"] == "mean"],
        "meta_questions": (report.get("meta_evaluation") or {}).get("questions", []),
        "meta_tables": _meta_tables(report),
        "meta_better": _meta_better(report),
        "systems": _systems(report),
        "compare_groups": (report.get("compare") or {}).get("groups", []),
        "compare_pairs": (report.get("compare") or {}).get("pairs", []),
        "adjudication": report.get("after_adjudication") or {},
        "retrieval": report.get("retrieval") or [],
        "plots": plots,
        "plots_pending": sum(not p["drawn"] for p in plots),
        "downloads": [
            {"name": name, "url": reverse("analysis:download", args=[study.slug, name]) + query} for name in FILE_NAMES
        ],
    }


# The rubric whose paper the report's FactPICO tables reproduce: only its report cites them.
FACTPICO_RUBRIC = "factpico"


def cites_factpico(report: dict) -> bool:
    """The report is of FactPICO's own rubric (its tables are named after the paper's)."""
    return (report.get("rubric") or {}).get("key") == FACTPICO_RUBRIC


def _subject(question: str, option: str | None) -> str:
    """A row's question as shown: a tickbox question's option after its key."""
    return f"{question}: {option}" if option else question


def _span_sections(report: dict) -> list[dict]:
    """Per span question, the rows of its agreement table: marking per sentence, then each
    sub-question with options on the spans two raters both marked."""
    sections = []
    for s in report.get("span_agreement") or []:
        rows = [{"what": "marking per sentence", "units": s["n_sentences"], "report": s["sentences"],
                 "error": (s.get("errors") or {}).get("sentences")}]  # fmt: skip
        for sub in s.get("sub_questions", []):
            rows.append(
                {"what": f"{sub['key']} ({sub.get('prompt', '')}), on overlapping spans", "units": sub["n_pairs"],
                 "report": sub["report"], "error": sub["error"]}
            )  # fmt: skip
        sections.append({"question": s["question"], "prompt": s["prompt"], "rows": rows})
    return sections


# How the per-system table heads its columns (FactPICO Table 3's names where it has them).
_SYSTEM_HEADS = {
    "n_summaries": "summaries",
    "n_rated": "rated",
    "average": "average",
    "n_words": "words",
    "delta_fk": "ΔFK",
    "rougeL": "ROUGE-L",
}


def _systems(report: dict) -> dict:
    """The per-system table (stats.systems) as headers and rows of display strings: means
    to 2 decimals, shares as percentages, counts as they are."""
    rows, columns = system_rows(report)

    def head(column: str) -> str:
        if "." in column:
            question, name = column.split(".", 1)
            what = {"n": "#", "share": "%", "n_not_factual": "# not factual", "share_not_factual": "% not factual"}
            return f"{question} {what.get(name, name)}"
        return _SYSTEM_HEADS.get(column, column)

    def cell(column: str, value) -> str:
        if value is None:
            return "—"
        if column.endswith("share") or column.endswith("share_not_factual"):
            return f"{100 * value:.1f}%"
        if isinstance(value, float):
            return f"{value:.2f}"
        return str(value)

    return {
        "headers": [head(c) for c in columns],
        "rows": [[cell(c, row.get(c)) for c in columns] for row in rows],
        "average_scale": (report.get("by_system") or {}).get("average_scale"),
    }


def _meta_better(report: dict) -> list[dict]:
    """The pairs of metrics that differ clearly on a question (stats.metaeval_questions)."""
    rows = []
    for question, pairs in ((report.get("meta_evaluation") or {}).get("comparisons") or {}).items():
        for p in pairs:
            if p["a_better"] or p["b_better"]:
                better, worse = (p["a"], p["b"]) if p["a_better"] else (p["b"], p["a"])
                sign = 1 if p["a_better"] else -1
                low, high = sorted((sign * p["ci_low"], sign * p["ci_high"]))
                rows.append(
                    {"question": question, "better": better, "worse": worse, "difference": sign * p["difference"],
                     "low": low, "high": high}
                )  # fmt: skip
    return rows


def _meta_tables(report: dict) -> list[dict]:
    """The every-question tables of the report page: per level, one row per metric with
    a cell per question (tau-b, rho, n)."""
    section = report.get("meta_evaluation") or {}
    questions = section.get("questions", [])
    return [
        {
            "level": label,
            "rows": [
                {"metric": metric, "cells": [by_question.get(q, {}) for q in questions]}
                for metric, by_question in section.get(key, {}).items()
            ],
        }
        for key, label in (("summary_level", "Summary level"), ("system_level", "System level (per-generator means)"))
    ]


@login_required
@require_GET
def study_report_plot(request, slug: str, kind: str, subject: str, fmt: str):
    if fmt not in FORMATS:
        raise Http404("Unknown image format.")
    study = get_study_for_viewer(request.user, slug)
    result = _done_result(study, _phase(request))
    # Drawn by the worker with the report (analysis.services.draw_report_plots): only served here.
    plot = selectors.report_plot(result=result, kind=kind, subject=subject, fmt=fmt)
    if plot is None:
        raise Http404("No such plot.")
    response = HttpResponse(bytes(plot.image), content_type=CONTENT_TYPES[fmt])
    # An SVG opened directly must not run anything even if it somehow held markup.
    response["Content-Security-Policy"] = "default-src 'none'; style-src 'unsafe-inline'"
    return response


@login_required
@require_GET
def study_report_download(request, slug: str, name: str):
    if name not in FILE_NAMES:
        raise Http404("No such file.")
    study = get_study_for_viewer(request.user, slug)
    phase = _phase(request)
    result = _done_result(study, phase)
    content_type = "application/json" if name.endswith(".json") else "text/csv"
    response = HttpResponse(report_files(result.result)[name], content_type=f"{content_type}; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{study.slug}-{phase}-{name}"'
    return response
