"""Writes of the study report: computing, caching and recomputing it, and drawing its plots.

The statistics are pure (stats/ and analysis.report); these functions gather the inputs
through analysis.selectors (ratings through annotate, evaluator and judge scores through
generation, gold answers through literature), run them, and store or write the result.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from django.db import transaction
from django.utils import timezone

from analysis import selectors
from analysis.conf import report_lease
from analysis.models import AnalysisResult, ReportPlot
from analysis.plots import plot_names, render_plot
from analysis.report_files import report_files
from annotate.models import Study
from annotate.selectors.contents import rubric_definition
from annotate.selectors.counting import rater_answer_revisions
from annotate.selectors.frames import (
    consensus_frame,
    raters_by_item,
    ratings_frame,
    spans_frame,
    summaries_frame,
)
from core.background import (
    QUEUE_UNAVAILABLE,
    WORKER_DIED,
    claim_timeout,
    enqueue_or_fail,
    heartbeat,
    running_without_worker,
)
from core.exceptions import ApplicationError

if TYPE_CHECKING:
    import pandas as pd

    from analysis.report import QuestionSpec

# The statistics (analysis.report, stats/: pandas, numpy, scipy, statsmodels,
# krippendorff) and matplotlib are imported inside the functions that compute, so that the
# web app, which imports this module for its report pages and API, starts without them.
# A worker pays for them on its first report.

# Bootstrap resamples per agreement interval (seeded, so a report is reproducible).
BOOTSTRAP_RESAMPLES = 1000
BOOTSTRAP_SEED = 0
PHASES = tuple(AnalysisResult.Phase.values)
# Recorded on a report whose worker stopped without finishing it (killed, out of memory,
# its machine gone): nothing else would ever finish it.
ABANDONED_ERROR = (
    f"{WORKER_DIED.capitalize()}: the worker running this report stopped before it finished. "
    "Ask for the report again to compute it anew."
)
# Recorded on a report that no worker took, even once queued again (RUN_CLAIM_TIMEOUT).
UNCLAIMED_ERROR = (
    f"{QUEUE_UNAVAILABLE.capitalize()}: no worker took this report, even after it was queued again. "
    "Ask for the report again once the workers run."
)

logger = logging.getLogger(__name__)


class AnalysisError(ApplicationError):
    """The study cannot be analysed as asked (unknown phase or field, ...)."""


def question_specs(study: Study) -> list[QuestionSpec]:
    """Each question's kind and full scale. A scale whose N/A is declared a category
    (`na.analysis: category`) gets one more point, N/A, coded as max + 1; otherwise
    N/A is a missing rating."""
    from analysis.report import QuestionSpec

    definition = rubric_definition(study.rubric)
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


def compute_study_report(
    *,
    study: Study,
    phase: str = "all",
    group_fields: Sequence[str] | None = None,
    n_resamples: int | None = None,
    progress: Callable[[float], None] | None = None,
) -> dict[str, Any]:
    """The study report of one phase as its stored JSON payload (analysis.report_json;
    analysis.report.build_study_report and analysis.study_sections build its sections).
    Calibration (pilot) batches are left out, as annotate.selectors.frames.ratings_frame does
    by default. ``progress(fraction)`` is called as the bootstrap advances, and with 0 between
    the stages before it as a sign of life (run_study_report renews its lease there)."""
    if phase not in PHASES:
        raise AnalysisError(f"Unknown phase {phase!r}; use one of {', '.join(PHASES)}.")
    from analysis.report import build_study_report
    from analysis.report_json import report_payload
    from analysis.sections import ReferenceMetrics
    from stats.frames import prepare_ratings
    from stats.metrics import metrics_frame

    alive = progress or (lambda fraction: None)
    resamples = BOOTSTRAP_RESAMPLES if n_resamples is None else n_resamples
    specs = question_specs(study)
    counting = rater_answer_revisions(study=study, phase=phase)  # the answers every frame below reads
    ratings = prepare_ratings(
        ratings_frame(study=study, phase=phase, revisions=counting), rubric_definition(study.rubric).na_codes
    )
    summaries = summaries_frame(study=study)
    claims = selectors.claims_frame(study=study)
    alive(0.0)
    texts = selectors.summary_texts_frame(study=study)
    stored = selectors.stored_reference_metrics(study=study)
    metrics = metrics_frame(texts, claims if len(claims) else None, stored=stored)
    metrics = selectors.with_evaluator_metrics(study=study, metrics=metrics)
    alive(0.0)
    names = selectors.rater_names(rater_ids=ratings["rater"].unique())
    raters = raters_by_item(study=study, phase=phase, revisions=counting)
    try:
        report = build_study_report(
            ratings=ratings,
            summaries=summaries,
            metrics=metrics,
            questions=specs,
            rater_names=names,
            group_fields=group_fields,
            consensus=consensus_frame(study=study),
            raters=raters,
            n_resamples=resamples,
            seed=BOOTSTRAP_SEED,
            progress=progress,
        )
    except ValueError as exc:
        raise AnalysisError(str(exc)) from None
    stored_rows = int(texts["item"].isin(stored["item"]).sum()) if stored is not None else 0
    # Where the reference metrics came from: the `reference` evaluator's stored run, or computed now.
    reference = ReferenceMetrics(stored=stored_rows, computed=int(len(texts)) - stored_rows)
    sections = _database_sections(
        study=study, phase=phase, ratings=ratings, summaries=summaries, metrics=metrics, specs=specs, names=names,
        raters=raters, n_resamples=resamples, counting=counting,
    )  # fmt: skip
    report = dataclasses.replace(report, **sections, reference_metrics=reference, study=study.slug, phase=phase)
    return report_payload(report)


def _database_sections(
    *,
    study: Study,
    phase: str,
    ratings: pd.DataFrame,
    summaries: pd.DataFrame,
    metrics: pd.DataFrame,
    specs: Sequence[QuestionSpec],
    names: dict[str, str],
    raters: dict[str, list[str]],
    n_resamples: int,
    counting: list,
) -> dict[str, Any]:
    """The report's sections that read more of the database (analysis.study_sections), by
    field; `counting`: the answers that count (rater_answer_revisions)."""
    from analysis import rater_sections, study_sections
    from analysis.sections import RubricInfo
    from stats.pipeline_checks import check_pass_rates

    spans = spans_frame(study=study, phase=phase, revisions=counting)
    named = ratings.assign(rater=[names.get(str(r), str(r)) for r in ratings["rater"]])
    judges = selectors.judge_scores(study=study)
    return {
        "span_agreement": study_sections.span_agreement_sections(study=study, spans=spans, raters=raters),
        "by_system": study_sections.system_section(
            study=study, ratings=ratings, spans=spans, summaries=summaries, metrics=metrics
        ),
        "claim_judgements": study_sections.claim_judgement_sections(study=study, ratings=named, judges=judges),
        "judges": study_sections.judge_sections(named_ratings=named, specs=specs, judges=judges),
        "pipeline_checks": check_pass_rates(summaries),
        "retrieval": tuple(selectors.retrieval_figures(study=study)),
        "comparisons": study_sections.comparison_sections(
            study=study,
            phase=phase,
            ratings=ratings,
            specs=specs,
            names=names,
            n_resamples=n_resamples,
            seed=BOOTSTRAP_SEED,
        ),  # fmt: skip
        "rubric": RubricInfo(key=study.rubric.key, version=study.rubric.version, title=study.rubric.title),
        "severity": rater_sections.severity_sections(named, specs, seed=BOOTSTRAP_SEED),
        "drift": rater_sections.drift_section(named, specs, selectors.gold_answers(study=study)),
        "protocol": rater_sections.protocol_section(study=study, names=names),
    }


# The page shows the SVGs, so the worker draws every plot's SVG before any PNG (the
# download): the report is complete on screen after the first pass.
DRAWING_ORDER = ("svg", "png")


def draw_report_plots(
    report: dict[str, Any], *, skip: set[tuple[str, str, str]] = frozenset(), formats: Sequence[str] = DRAWING_ORDER
):
    """Every plot of the report (analysis.plots.plot_names) in each of `formats`, format by
    format (all the SVGs, then all the PNGs), leaving out those in `skip` ((kind, subject,
    format) triples): yields each as an unsaved ReportPlot row."""
    for fmt in formats:
        for kind, subject, _stem in plot_names(report):
            if (kind, subject, fmt) not in skip:
                image = render_plot(report, kind, subject, (fmt,))[fmt]
                yield ReportPlot(kind=kind, subject=subject, format=fmt, image=image)


def draw_missing_plots(*, result_id: int, formats: Sequence[str] = DRAWING_ORDER) -> int:
    """Draw and store the plots a finished report does not have yet; returns how many images
    were drawn (0 for a report that is not finished). The worker's task calls it right after
    run_study_report, so the page shows the numbers without waiting for matplotlib, and
    again when a request re-queues a report whose plots stopped being drawn (it then draws
    only the missing ones). Every plot's SVG (what the page shows) is drawn before any PNG
    (the download). An image is stored as soon as it is drawn, and each one renews the
    report's `updated_at`, the sign of life that request_study_report reads (a worker that
    died half-way is replaced by the next request after one lease). Two workers drawing the
    same image store it once (the unique constraint); a report deleted meanwhile (its inputs
    changed) stops the drawing. ``formats`` (default every one): only those are drawn now
    (`compute_reports` draws every study's SVGs before any PNG); the plots count as done
    only once every format is stored."""
    result = AnalysisResult.objects.filter(pk=result_id, status=AnalysisResult.Status.DONE).first()
    if result is None:
        return 0
    stored = set(ReportPlot.objects.filter(result=result).values_list("kind", "subject", "format"))
    drawn = 0
    for image in draw_report_plots(result.result, skip=stored, formats=formats):
        with transaction.atomic():
            alive = AnalysisResult.objects.filter(pk=result_id, status=AnalysisResult.Status.DONE)
            if not alive.update(updated_at=timezone.now()):
                break
            image.result_id = result_id
            ReportPlot.objects.bulk_create([image], ignore_conflicts=True)
        drawn += 1
    else:
        if set(formats) < set(DRAWING_ORDER):
            return drawn
        AnalysisResult.objects.filter(pk=result_id, status=AnalysisResult.Status.DONE).update(
            plots_done_at=timezone.now(), updated_at=timezone.now()
        )
    return drawn


def plots_pending(result: AnalysisResult) -> bool:
    """A finished report whose plots are not all stored yet (no query)."""
    return result.status == AnalysisResult.Status.DONE and result.plots_done_at is None


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
    (out / "plots").mkdir(exist_ok=True)
    stems = {(kind, subject): stem for kind, subject, stem in plot_names(report)}
    for plot in draw_report_plots(report):
        path = out / "plots" / f"{stems[plot.kind, plot.subject]}.{plot.format}"
        path.write_bytes(plot.image)
        written.append(path)
    return written


def _current_result(*, study: Study, phase: str) -> tuple[AnalysisResult, bool]:
    """The report row for the study's inputs as they are now (report_inputs) and whether
    this call made it (pending: the caller queues it); older reports of the study and phase
    are deleted when it is made (they describe data that changed)."""
    if phase not in PHASES:
        raise AnalysisError(f"Unknown phase {phase!r}; use one of {', '.join(PHASES)}.")
    inputs = selectors.report_inputs(study=study, phase=phase)
    result = selectors.analysis_result(study=study, phase=phase, fingerprint=inputs.fingerprint)
    if result is not None:
        return result, False
    result, created = AnalysisResult.objects.get_or_create(
        study=study, phase=phase, fingerprint=inputs.fingerprint, defaults={"n_revisions": inputs.ratings[0]}
    )
    if created:
        AnalysisResult.objects.filter(study=study, phase=phase).exclude(pk=result.pk).delete()
    return result, created


def request_study_report(*, study: Study, phase: str, enqueue: Callable[[int], object]) -> AnalysisResult:
    """The cached report for the study's inputs as they are now (ratings, summaries,
    evaluator runs, ...: analysis.selectors.ReportInputs), enqueueing its computation if
    needed.

    Never computes: a report that is missing (or failed) is handed to ``enqueue(result_id)``
    after the transaction commits (the caller passes analysis.tasks.enqueue_study_report:
    tasks import services, never the reverse), and the returned row is pending until it is
    done. Older reports of the same study and phase are deleted: they describe stale data.

    Every request is also a look at the run: one whose worker stopped (its lease ran out)
    is marked failed with the reason, and a failed report is queued anew by the next
    request; a pending one that no worker took within one lease (its process was restarted,
    or a broker lost the message) is queued again, and so is a finished one whose plots
    stopped being drawn (no plot stored within one lease).
    """
    result, created = _current_result(study=study, phase=phase)
    if created:
        pass
    elif result.status == AnalysisResult.Status.RUNNING:
        return fail_abandoned_report(result=result)
    elif result.status == AnalysisResult.Status.FAILED:
        if result.error == ABANDONED_ERROR:
            return result  # "stopped: the worker died" stays shown until someone resumes it
        restarted = restart_study_report(result=result)
        result.refresh_from_db()
        if not restarted:
            return result  # another request restarted it first
    elif result.status == AnalysisResult.Status.PENDING or plots_pending(result):
        if not requeue_forgotten_report(result=result):
            return result
        result.refresh_from_db()
    else:
        return result
    transaction.on_commit(lambda: enqueue_report(result=result, enqueue=enqueue))
    return result


def enqueue_report(*, result: AnalysisResult, enqueue: Callable[[int], object]) -> None:
    """Hand the report to `enqueue`; when the broker cannot be reached the report is marked
    failed with "the task queue is unavailable" and the caller gets QueueUnavailableError
    (503). The next request queues it anew, as for any failed report."""

    def fail(message: str) -> None:
        AnalysisResult.objects.filter(pk=result.pk, status=AnalysisResult.Status.PENDING).update(
            status=AnalysisResult.Status.FAILED,
            error=f"{message.capitalize()}: the report was not queued. Ask for it again later.",
            updated_at=timezone.now(),
        )

    enqueue_or_fail(enqueue, result.pk, fail=fail)


def recompute_study_report(*, study: Study, phase: str, enqueue: Callable[[int], object]) -> AnalysisResult:
    """A study admin's "Recompute": the report of the inputs as they are now is computed
    again even though it is cached (after an upgrade of the code or the packages behind it,
    say); its stored plots go with it. A report that is missing, failed, waiting or being
    computed is handled as request_study_report handles it (queued once, never twice), so
    asking twice does no harm."""
    result = request_study_report(study=study, phase=phase, enqueue=enqueue)
    restartable = (AnalysisResult.Status.DONE, AnalysisResult.Status.FAILED)
    if result.status in restartable and restart_study_report(result=result, statuses=restartable):
        result.refresh_from_db()
        transaction.on_commit(lambda: enqueue_report(result=result, enqueue=enqueue))
    return result


def resume_study_report(*, study: Study, phase: str, enqueue: Callable[[int], object]) -> AnalysisResult:
    """ "Compute it again" on a report that failed (its worker died: ABANDONED_ERROR, which a
    request does not restart by itself, so that the page and API can say so): queued anew.
    Any viewer of the report may ask; a report in any other state is handled as
    request_study_report handles it."""
    result = request_study_report(study=study, phase=phase, enqueue=enqueue)
    if result.status == AnalysisResult.Status.FAILED and restart_study_report(result=result):
        result.refresh_from_db()
        transaction.on_commit(lambda: enqueue_report(result=result, enqueue=enqueue))
    return result


def requeue_forgotten_report(*, result: AnalysisResult) -> bool:
    """True when ``result`` (pending, or finished with plots still to draw) has shown no
    sign of life for more than RUN_CLAIM_TIMEOUT: no worker took it, or the one drawing its
    plots went away. Its timestamp is renewed (one conditional UPDATE, so one request
    re-queues it) and the caller queues it again. A pending report is queued again once:
    the second time no worker took it, it is marked failed (UNCLAIMED_ERROR), which the
    next request queues anew like any failed report."""
    now = timezone.now()
    if result.updated_at >= now - claim_timeout():
        return False
    same = AnalysisResult.objects.filter(pk=result.pk, status=result.status, updated_at=result.updated_at)
    if result.status == AnalysisResult.Status.PENDING and result.requeued:
        if same.update(status=AnalysisResult.Status.FAILED, error=UNCLAIMED_ERROR, updated_at=now):
            logger.warning("study report %s: no worker took it, even queued again; marked failed", result.pk)
            result.status, result.error, result.updated_at = AnalysisResult.Status.FAILED, UNCLAIMED_ERROR, now
        return False
    fields = {"requeued": True} if result.status == AnalysisResult.Status.PENDING else {}
    return bool(same.update(updated_at=now, **fields))


def _abandoned(results, *, now):
    """Those of `results` running without a live worker: their lease ran out."""
    return running_without_worker(results, field="lease_expires_at", before=now)


def fail_abandoned_report(*, result: AnalysisResult) -> AnalysisResult:
    """Mark the report failed with ABANDONED_ERROR if, as read, it is running and its lease
    ran out; one conditional UPDATE decides, so a worker renewing meanwhile wins. Returns
    the report as stored."""
    now = timezone.now()
    if result.status != AnalysisResult.Status.RUNNING or result.lease_expires_at >= now:
        return result  # as read: alive (the usual answer to a poll costs no write)
    abandoned = _abandoned(AnalysisResult.objects.filter(pk=result.pk), now=now)
    if abandoned.update(status=AnalysisResult.Status.FAILED, error=ABANDONED_ERROR, updated_at=now):
        logger.warning("study report %s: its worker stopped; marked failed", result.pk)
        result.refresh_from_db()
    return result


@transaction.atomic
def restart_study_report(*, result: AnalysisResult, statuses: Sequence[str] = (AnalysisResult.Status.FAILED,)) -> bool:
    """Put a failed (or, for a recompute, finished) report back to pending, without its
    result and plots, to be computed again; False when it is no longer in one of `statuses`
    (another request restarted it first)."""
    restarted = AnalysisResult.objects.filter(pk=result.pk, status__in=statuses).update(
        status=AnalysisResult.Status.PENDING,
        progress=0,
        result=None,
        error="",
        inputs={},
        computed_at=None,
        plots_expected=0,
        plots_done_at=None,
        claimed_at=None,
        lease_expires_at=None,
        requeued=False,
        updated_at=timezone.now(),
    )
    if restarted:
        ReportPlot.objects.filter(result_id=result.pk).delete()
    return bool(restarted)


class _LeaseLost(Exception):
    """This worker no longer holds the report: it was marked abandoned or taken over."""


def run_study_report(*, result_id: int) -> AnalysisResult | None:
    """Compute a report and store it; None when this call did not get to run it. Its plots
    are drawn next, by the same task (draw_missing_plots), so the numbers are shown first.

    The run is claimed with one conditional UPDATE: a pending report, or a running one
    whose lease ran out (its worker died and this is the redelivered task). A report that
    is done, failed or held by a live worker is left alone, so a redelivered task does no
    harm. While computing, the worker renews its lease (report_lease) at every percent of
    progress and at least every quarter lease; every write checks the claim is still its
    own, and a worker that lost it (marked abandoned after a long stall) stops. What the
    report was computed from (analysis.selectors.ReportInputs.counts) is read before the
    statistics and stored with it.
    """
    now = timezone.now()
    claim = {
        "status": AnalysisResult.Status.RUNNING,
        "progress": 0,
        "claimed_at": now,
        "lease_expires_at": now + report_lease(),
        "updated_at": now,
    }
    mine = AnalysisResult.objects.filter(pk=result_id)
    if not mine.filter(status=AnalysisResult.Status.PENDING).update(**claim):
        if not _abandoned(mine, now=now).update(**claim):
            return None
    held = mine.filter(status=AnalysisResult.Status.RUNNING, claimed_at=now)
    result = AnalysisResult.objects.select_related("study__rubric").get(pk=result_id)
    last_percent, renewed = 0, time.monotonic()

    def progress(fraction: float) -> None:
        nonlocal last_percent, renewed
        percent = min(99, int(fraction * 100))
        lease = report_lease()
        if percent <= last_percent and time.monotonic() - renewed < lease.total_seconds() / 4:
            return
        last_percent, renewed = max(percent, last_percent), time.monotonic()
        at = timezone.now()
        if not held.update(progress=last_percent, lease_expires_at=at + lease, updated_at=at):
            raise _LeaseLost

    def renew() -> None:
        at = timezone.now()
        held.update(lease_expires_at=at + report_lease(), updated_at=at)

    try:
        with heartbeat(renew, every=report_lease().total_seconds() / 3):
            inputs = selectors.report_inputs(study=result.study, phase=result.phase).counts
            report = compute_study_report(study=result.study, phase=result.phase, progress=progress)
        done = held.update(
            status=AnalysisResult.Status.DONE,
            result=report,
            inputs=inputs,
            plots_expected=len(plot_names(report)),
            progress=100,
            computed_at=timezone.now(),
            updated_at=timezone.now(),
        )
        if not done:
            raise _LeaseLost
        _record_look(result.study, report)
    except _LeaseLost:
        logger.warning("study report %s: lost its claim while computing; stopped", result_id)
        return AnalysisResult.objects.filter(pk=result_id).first()
    except ApplicationError as exc:
        held.update(status=AnalysisResult.Status.FAILED, error=exc.message, updated_at=timezone.now())
    except Exception as exc:
        # Recorded so that polls stop waiting (and the next request starts it again), then
        # raised: a bug must be seen.
        held.update(
            status=AnalysisResult.Status.FAILED,
            error=f"The report failed unexpectedly ({type(exc).__name__}).",
            updated_at=timezone.now(),
        )
        raise
    return AnalysisResult.objects.get(pk=result_id)


def _record_look(study: Study, report: dict) -> None:
    """A report computed under a frozen protocol is a look at the data (planning)."""
    protocol = report.get("protocol")
    if protocol:
        from planning.services import record_look

        record_look(study=study, version=protocol["version"], at=timezone.now(), n_rated=protocol["n_rated"])


def fail_lost_report(*, result_id: int) -> bool:
    """The worker process computing the report died (Celery's WorkerLostError, seen by the
    parent worker process at once): mark it failed with ABANDONED_ERROR now, rather than
    one lease later. A report already finished is left alone."""
    unfinished = (AnalysisResult.Status.PENDING, AnalysisResult.Status.RUNNING)
    return bool(
        AnalysisResult.objects.filter(pk=result_id, status__in=unfinished).update(
            status=AnalysisResult.Status.FAILED, error=ABANDONED_ERROR, updated_at=timezone.now()
        )
    )
