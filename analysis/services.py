"""Writes of the analysis app: computing, caching and exporting study reports.

The statistics are pure (analysis.report and below); these functions gather the inputs
through selectors, run them, and store or write the result.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from django.db import transaction

from analysis import selectors
from analysis.export import report_files
from analysis.metrics import metrics_frame
from analysis.models import AnalysisResult
from analysis.pipeline_checks import check_pass_rates
from analysis.plots import FORMATS, plot_names, render_plot
from analysis.report import QuestionSpec, build_study_report
from analysis.spans import span_agreement
from annotate import selectors as annotate_selectors
from annotate.exceptions import ApplicationError
from annotate.models import Study

# Bootstrap resamples per agreement interval (seeded, so a report is reproducible).
BOOTSTRAP_RESAMPLES = 1000
BOOTSTRAP_SEED = 0
# Up to this many submitted revisions the report page computes in the request; above it
# the report goes to a Celery task and the page shows its progress.
SYNC_MAX_REVISIONS = 400
PHASES = tuple(AnalysisResult.Phase.values)


class AnalysisError(ApplicationError):
    """The study cannot be analysed as asked (unknown phase or field, ...)."""


def question_specs(study: Study) -> list[QuestionSpec]:
    """Each question's kind and full scale. A scale whose N/A is declared a category
    (`na.analysis: category`) gets one more point, N/A, coded as max + 1; otherwise
    N/A is a missing rating."""
    definition = annotate_selectors.rubric_definition(study.rubric)
    specs = []
    for q in definition.questions:
        values, labels = q.analysis_scale, tuple(option.label for option in q.options)
        if q.na_code is not None:
            labels = (*labels, q.na.label)
        specs.append(
            # A per-finding question is a scale asked once per finding (each finding its own item).
            QuestionSpec(
                key=q.key,
                kind="scale" if q.is_scale else q.kind,
                prompt=q.prompt,
                required=q.required,
                values=values,
                labels=labels,
            )
        )
    return specs


def na_category_codes(study: Study) -> dict[str, int]:
    """Question key -> the code of N/A, for the scales that count N/A as a category."""
    definition = annotate_selectors.rubric_definition(study.rubric)
    return {q.key: q.na_code for q in definition.questions if q.na_code is not None}


def prepare_ratings(ratings, na_codes: dict[str, int]):
    """The ratings frame as the statistics need it: each finding of a per-finding
    question is an item of its own (summary:finding), and N/A answers of questions
    that count N/A as a category get their code (the rest stay missing)."""
    ratings = ratings.copy()
    findings = ratings["finding"].fillna("").astype(str)
    per_finding = findings != ""
    ratings["item"] = ratings["item"].astype(str).where(~per_finding, ratings["item"].astype(str) + ":" + findings)
    for key, code in na_codes.items():
        mask = (ratings["question"] == key) & (ratings["answer"] == "na")
        ratings.loc[mask, "score"] = float(code)
    return ratings


def compute_study_report(
    *,
    study: Study,
    phase: str = "all",
    group_fields: Sequence[str] | None = None,
    n_resamples: int | None = None,
    progress: Callable[[float], None] | None = None,
) -> dict[str, Any]:
    """The JSON-ready study report (analysis.report.build_study_report) for one phase.
    Calibration (pilot) batches are left out, as annotate.selectors.ratings_frame does
    by default."""
    if phase not in PHASES:
        raise AnalysisError(f"Unknown phase {phase!r}; use one of {', '.join(PHASES)}.")
    specs = question_specs(study)
    ratings = prepare_ratings(annotate_selectors.ratings_frame(study=study, phase=phase), na_category_codes(study))
    summaries = annotate_selectors.summaries_frame(study=study)
    claims = selectors.claims_frame(study=study)
    metrics = metrics_frame(selectors.summary_texts_frame(study=study), claims if len(claims) else None)
    try:
        report = build_study_report(
            ratings=ratings,
            summaries=summaries,
            metrics=metrics,
            questions=specs,
            rater_names=selectors.rater_names(rater_ids=ratings["rater"].unique()),
            group_fields=group_fields,
            n_resamples=BOOTSTRAP_RESAMPLES if n_resamples is None else n_resamples,
            seed=BOOTSTRAP_SEED,
            progress=progress,
        )
    except ValueError as exc:
        raise AnalysisError(str(exc)) from None
    report["span_agreement"] = span_agreement_sections(study=study, phase=phase, ratings=ratings)
    report["pipeline_checks"] = check_pass_rates(summaries)
    report["study"] = study.slug
    report["phase"] = phase
    return report


def span_agreement_sections(*, study: Study, phase: str, ratings) -> list[dict[str, Any]]:
    """FactPICO's span agreement for every span question on the summary: marking per
    summary sentence, and "factual" on spans both raters marked."""
    from annotate.text import split_spans

    definition = annotate_selectors.rubric_definition(study.rubric)
    questions = [q for q in definition.questions if q.kind == "span" and q.target == "summary"]
    if not questions:
        return []
    spans = annotate_selectors.spans_frame(study=study, phase=phase)
    texts = dict(study.summaries.values_list("uuid", "text"))
    raters = {item: sorted(group["rater"].unique()) for item, group in ratings.groupby("item")}
    sentences = {item: split_spans(texts[uuid.UUID(item)]) for item in raters if ":" not in item}
    sections = []
    for q in questions:
        result = span_agreement(
            spans[spans["question"] == q.key], sentences, {i: r for i, r in raters.items() if i in sentences}
        )
        sections.append({"question": q.key, "prompt": q.prompt, **dataclasses.asdict(result)})
    return sections


def write_study_report(
    *,
    study: Study,
    out: Path,
    phase: str = "all",
    group_fields: Sequence[str] | None = None,
    n_resamples: int | None = None,
) -> list[Path]:
    """Compute the report and write every file and plot (PNG and SVG) into ``out``."""
    report = compute_study_report(study=study, phase=phase, group_fields=group_fields, n_resamples=n_resamples)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in report_files(report).items():
        path = out / name
        path.write_text(text, encoding="utf-8")
        written.append(path)
    plots = out / "plots"
    plots.mkdir(exist_ok=True)
    for kind, subject, stem in plot_names(report):
        for fmt in FORMATS:
            path = plots / f"{stem}.{fmt}"
            path.write_bytes(render_plot(report, kind, subject, fmt))
            written.append(path)
    return written


def request_study_report(*, study: Study, phase: str) -> AnalysisResult:
    """The cached report for the ratings as they are now, computing or enqueueing it if needed.

    A small study is computed here and now; a large one is handed to a Celery task (after
    the transaction commits) and the returned row is pending until the task is done.
    Older reports of the same study and phase are deleted: they describe stale ratings.
    """
    if phase not in PHASES:
        raise AnalysisError(f"Unknown phase {phase!r}; use one of {', '.join(PHASES)}.")
    fingerprint, n_revisions = selectors.ratings_fingerprint(study=study, phase=phase)
    result = selectors.analysis_result(study=study, phase=phase, fingerprint=fingerprint)
    if result is not None:
        return result
    result, created = AnalysisResult.objects.get_or_create(
        study=study, phase=phase, fingerprint=fingerprint, defaults={"n_revisions": n_revisions}
    )
    if not created:
        return result
    AnalysisResult.objects.filter(study=study, phase=phase).exclude(pk=result.pk).delete()
    if n_revisions <= SYNC_MAX_REVISIONS:
        run_study_report(result_id=result.pk)
        result.refresh_from_db()
    else:
        from analysis.tasks import run_study_report_task

        transaction.on_commit(lambda: run_study_report_task.delay(result.pk))
    return result


def run_study_report(*, result_id: int) -> AnalysisResult | None:
    """Compute a pending report (claimed atomically, so a redelivered task does nothing)."""
    claimed = AnalysisResult.objects.filter(pk=result_id, status=AnalysisResult.Status.PENDING).update(
        status=AnalysisResult.Status.RUNNING, progress=0
    )
    if claimed != 1:
        return None
    result = AnalysisResult.objects.select_related("study__rubric").get(pk=result_id)
    last = [0]

    def progress(fraction: float) -> None:
        percent = min(99, int(fraction * 100))
        if percent > last[0]:
            last[0] = percent
            AnalysisResult.objects.filter(pk=result_id).update(progress=percent)

    try:
        report = compute_study_report(study=result.study, phase=result.phase, progress=progress)
    except ApplicationError as exc:
        AnalysisResult.objects.filter(pk=result_id).update(status=AnalysisResult.Status.FAILED, error=exc.message)
        result.refresh_from_db()
        return result
    result.result = report
    result.status = AnalysisResult.Status.DONE
    result.progress = 100
    result.save(update_fields=["result", "status", "progress", "updated_at"])
    return result
