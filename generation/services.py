"""Writes of the generation app: start a run, run one job, store its summary.

Summaries enter the study through annotate.services (create_summary, record_claims),
exactly like imported ones.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

from django.conf import settings
from django.db import IntegrityError, close_old_connections, transaction
from django.db.models import F, Q
from django.utils import timezone

from annotate.exceptions import ApplicationError
from annotate.models import Source, Study
from annotate.services import create_summary, record_claims
from generation.conf import llm_settings, pipeline_settings
from generation.llm import Gateway, LLMError
from generation.models import GenerationJob, GenerationRun
from generation.pipelines import Outcome, PipelineSpec, Runner, pipeline_spec

logger = logging.getLogger(__name__)

# A job claimed longer ago than this is taken to belong to a dead worker and may be
# claimed again (a redelivered task, or the next `generate` run, resumes it).
JOB_LEASE = timedelta(minutes=30)
Status = GenerationJob.Status


def require_api_key() -> None:
    if not llm_settings().api_key:
        raise ApplicationError(
            "OPENAI_API_KEY is not set. Set it to your provider's key (any non-empty value for a local "
            "OpenAI-compatible server) and OPENAI_BASE_URL to the server's /v1 URL."
        )


def resolve_pipeline(name: str) -> PipelineSpec:
    try:
        return pipeline_spec(name)
    except ValueError as exc:
        raise ApplicationError(str(exc)) from None


def _job_for(source: Source, spec: PipelineSpec) -> GenerationJob:
    try:
        with transaction.atomic():
            job, _ = GenerationJob.objects.get_or_create(
                source=source,
                pipeline_version=spec.version,
                defaults={"pipeline": spec.name, "config": spec.config},
            )
    except IntegrityError:  # another run created it between our get and create
        job = GenerationJob.objects.get(source=source, pipeline_version=spec.version)
    return job


def start_generation_run(
    *, study: Study, pipeline: str, source_keys: Sequence[str] = (), limit: int | None = None
) -> GenerationRun:
    """Create a run over the study's sources (all, or `source_keys`, at most `limit`)
    with one job per (source, pipeline version), and enqueue the jobs that are not
    finished. Finished jobs are reused as they are, so running the same command again
    generates nothing new, and failed or abandoned jobs are resumed."""
    require_api_key()
    spec = resolve_pipeline(pipeline)
    sources = Source.objects.filter(study=study).order_by("key")
    if source_keys:
        sources = sources.filter(key__in=source_keys)
        missing = sorted(set(source_keys) - set(sources.values_list("key", flat=True)))
        if missing:
            raise ApplicationError(f"No source {', '.join(missing)} in study {study.slug}.")
    if limit is not None:
        sources = sources[:limit]
    jobs = [_job_for(source, spec) for source in sources]
    with transaction.atomic():
        run = GenerationRun.objects.create(
            study=study, pipeline=spec.name, pipeline_version=spec.version, config=spec.config
        )
        run.jobs.set(jobs)
        GenerationJob.objects.filter(pk__in=[j.pk for j in jobs], status=Status.FAILED).update(
            status=Status.PENDING, updated_at=timezone.now()
        )
        todo = [j.pk for j in jobs if j.status not in (Status.OK, Status.FLAGGED, Status.SKIPPED)]
        transaction.on_commit(lambda: dispatch_jobs(job_ids=todo))
    return run


def dispatch_jobs(*, job_ids: Sequence[int]) -> None:
    """Hand the jobs to Celery, one task per job.

    With a broker, workers run them (their own concurrency plus the gateway's limit
    per endpoint). Without one, Celery runs tasks eagerly in the calling thread, so we
    fan out over a thread pool of GENERATION_CONCURRENCY to keep the same parallelism.
    """
    from generation.tasks import generate_summary_task

    if not settings.CELERY_TASK_ALWAYS_EAGER:
        for job_id in job_ids:
            generate_summary_task.delay(job_id)
        return

    def run_in_thread(job_id: int) -> None:
        try:
            generate_summary_task.delay(job_id)
        finally:
            close_old_connections()

    with ThreadPoolExecutor(max_workers=llm_settings().concurrency) as pool:
        for future in [pool.submit(run_in_thread, job_id) for job_id in job_ids]:
            future.result()


def claim_job(*, job_id: int) -> GenerationJob | None:
    """Take the job for this worker, or None when it is finished or another live
    worker has it. One UPDATE decides, so two deliveries of a task cannot both win."""
    now = timezone.now()
    claimable = Q(status=Status.PENDING) | Q(status=Status.RUNNING, claimed_at__lt=now - JOB_LEASE)
    updated = GenerationJob.objects.filter(claimable, pk=job_id).update(
        status=Status.RUNNING, claimed_at=now, tries=F("tries") + 1, updated_at=now
    )
    if updated != 1:
        return None
    return GenerationJob.objects.select_related("source__study").get(pk=job_id)


def run_generation_job(*, job_id: int) -> GenerationJob:
    """Claim the job, run its pipeline and store the outcome. A job that is already
    finished or taken is returned untouched (a redelivered task does no harm)."""
    job = claim_job(job_id=job_id)
    if job is None:
        return GenerationJob.objects.get(pk=job_id)
    claimed_at = job.claimed_at
    spec = resolve_pipeline(job.pipeline)
    if spec.version != job.pipeline_version:
        _finish(
            job,
            claimed_at,
            status=Status.FAILED,
            error="The pipeline's configuration changed since this job was created; start a new run.",
        )
        return job
    try:
        outcome = Runner(spec=spec, source=job.source, job=job, gateway=Gateway()).run()
    except LLMError as exc:
        _finish(job, claimed_at, status=Status.FAILED, error=exc.message)
        job.refresh_from_db()
        return job
    except Exception as exc:
        # Not ours to handle: mark the job so the run shows it, then let it propagate.
        _finish(job, claimed_at, status=Status.FAILED, error=f"{type(exc).__name__}: {exc}")
        raise
    store_outcome(job=job, claimed_at=claimed_at, spec=spec, outcome=outcome)
    job.refresh_from_db()
    return job


def _finish(job: GenerationJob, claimed_at, **fields) -> bool:
    """Write the job's result only if this worker still holds the claim."""
    updated = GenerationJob.objects.filter(pk=job.pk, status=Status.RUNNING, claimed_at=claimed_at).update(
        finished_at=timezone.now(), updated_at=timezone.now(), **fields
    )
    return updated == 1


@transaction.atomic
def store_outcome(*, job: GenerationJob, claimed_at, spec: PipelineSpec, outcome: Outcome) -> GenerationJob:
    """Store the summary, its claims and the job's result in one transaction, so a
    crash leaves either all of it or none (and the job can simply run again)."""
    locked = GenerationJob.objects.select_for_update().get(pk=job.pk)
    if locked.status != Status.RUNNING or locked.claimed_at != claimed_at:
        logger.warning("job %s was taken over by another worker; discarding this result", job.pk)
        return locked
    result = {
        "attempts": outcome.attempts,
        "reference_checks": outcome.references.as_dict() if outcome.references else None,
        "flags": outcome.flags,
        **outcome.trace,
    }
    summary = None
    if outcome.status != "skipped":
        stage = spec.stages[-1]
        summary = create_summary(
            study=job.source.study,
            source=job.source,
            key=f"{job.source.key}/{spec.name}@{spec.version}",
            text=outcome.text,
            generator=spec.generator,
            metadata={
                "pipeline": spec.name,
                "pipeline_version": spec.version,
                "generation_job": str(job.uuid),
                "model": pipeline_settings(stage).model,
                "attempts": outcome.attempts,
                "context": outcome.trace.get("context"),
                "reference_checks": result["reference_checks"],
                "factored": outcome.trace.get("factored"),
                # For LitSumm's Table 2: did self-consistency find problems that needed a revision?
                "consistency_revised": any(
                    step.get("step") == "self_consistency:reverify" for step in outcome.trace.get("steps", [])
                ),
            },
            flags=outcome.flags,
        )
        record_claims(
            summary=summary,
            claims=[
                {
                    key: c.get(key)
                    for key in ("index", "text", "start", "end", "refs", "verdict", "explanation", "probability")
                }
                for c in outcome.claims
            ],
        )
    GenerationJob.objects.filter(pk=job.pk).update(
        status=outcome.status,
        summary=summary,
        result=result,
        skip_reason=outcome.skip_reason,
        error="",
        finished_at=timezone.now(),
        updated_at=timezone.now(),
    )
    return locked
