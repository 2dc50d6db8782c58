"""Writes of the generation app: start a run, run one job, store its summary.

Summaries enter the study through annotate.services.summaries (create_summary, record_claims),
exactly like imported ones. The Celery task (generation.tasks) calls these services,
so they never import it: whoever starts or resumes a run passes the task's enqueue
function (`enqueue=generate_summary_task.delay`).
"""

from __future__ import annotations

import logging
import queue
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

from django.conf import settings
from django.db import connections, transaction
from django.db.models import F, OuterRef
from django.utils import timezone

from annotate.models import Source, Study
from annotate.services.summaries import create_summary, record_claims
from core.background import (
    QUEUE_UNAVAILABLE,
    WORKER_DIED,
    claim_timeout,
    enqueue_or_fail,
    heartbeat,
    run_lease,
    running_without_worker,
)
from core.exceptions import ApplicationError
from generation.conf import job_lease_seconds, llm_settings, pipeline_settings
from generation.llm import Gateway, LLMError
from generation.models import AnswerJob, GenerationJob, GenerationRun, LLMCall
from generation.pipelines import Outcome, PipelineSpec, Runner, pipeline_spec

logger = logging.getLogger(__name__)

Status = GenerationJob.Status
# Hands one job id to the workers: generation.tasks.generate_summary_task.delay.
Enqueue = Callable[[int], object]


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


def _jobs_for(sources: Sequence[Source], spec: PipelineSpec) -> list[GenerationJob]:
    """The job of each source for this pipeline version, creating the missing ones in
    one statement. A job another run created meanwhile is kept (the unique constraint
    on source and version makes the insert skip it), so every source ends with one."""
    GenerationJob.objects.bulk_create(
        [
            GenerationJob(source=source, pipeline_version=spec.version, pipeline=spec.name, config=spec.config)
            for source in sources
        ],
        ignore_conflicts=True,
    )
    study_ids = {source.study_id for source in sources}
    jobs = GenerationJob.objects.filter(source__study_id__in=study_ids, pipeline_version=spec.version)
    by_source = {job.source_id: job for job in jobs}
    return [by_source[source.pk] for source in sources]


def start_generation_run(
    *,
    study: Study,
    pipeline: str,
    source_keys: Sequence[str] = (),
    limit: int | None = None,
    enqueue: Enqueue,
) -> GenerationRun:
    """Create a run over the study's sources (all, or `source_keys`, at most `limit`)
    with one job per (source, pipeline version), and enqueue the jobs that are not
    finished once the run is committed. Finished jobs are reused as they are, so running
    the same command again generates nothing new, and failed or abandoned jobs are resumed."""
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
    jobs = _jobs_for(list(sources), spec)
    with transaction.atomic():
        run = GenerationRun.objects.create(
            study=study, pipeline=spec.name, pipeline_version=spec.version, config=spec.config
        )
        run.jobs.set(jobs)
        GenerationJob.objects.filter(pk__in=[j.pk for j in jobs], status=Status.FAILED).update(
            status=Status.PENDING, requeued=False, updated_at=timezone.now()
        )
        todo = [j.pk for j in jobs if j.status not in (Status.OK, Status.FLAGGED, Status.SKIPPED)]
        transaction.on_commit(lambda: dispatch_jobs(job_ids=todo, enqueue=enqueue))
    return run


# Why a job failed when its task could not be queued, when its worker process died, and
# when no worker took it even once queued again (RUN_CLAIM_TIMEOUT).
NOT_QUEUED_ERROR = f"{QUEUE_UNAVAILABLE}: the job was not queued; run the command again to resume it"
WORKER_DIED_ERROR = f"{WORKER_DIED} while running this job; run the command again to resume it"
UNCLAIMED_ERROR = f"{QUEUE_UNAVAILABLE}: no worker took this job, even after it was queued again"


def dispatch_jobs(*, job_ids: Sequence[int], enqueue: Enqueue, model=GenerationJob) -> None:
    """Hand the jobs to Celery, one task per job (`enqueue(job_id)`).

    With a broker, workers run them (their own concurrency plus the gateway's limit
    per endpoint). Without one, Celery runs tasks eagerly in the calling thread, so we
    fan out over GENERATION_CONCURRENCY threads to keep the same parallelism. Each
    thread takes the next job when it finishes one and keeps its database connection
    for the whole run, as a worker process does (opening one per job costs more than
    the job's own queries); the first error is raised once every job has run.
    """
    if not settings.CELERY_TASK_ALWAYS_EAGER:
        for position, job_id in enumerate(job_ids):
            # A broker that cannot be reached fails this job and those not queued yet
            # (QueueUnavailableError: the command says so and exits non-zero).
            left = list(job_ids[position:])
            enqueue_or_fail(
                enqueue,
                job_id,
                fail=lambda message, left=left: fail_jobs(
                    job_ids=left, model=model, error=NOT_QUEUED_ERROR, statuses=(Status.PENDING, Status.RUNNING)
                ),
            )
        return

    pending: queue.SimpleQueue[int] = queue.SimpleQueue()
    for job_id in job_ids:
        pending.put(job_id)
    errors: list[BaseException] = []

    def drain() -> None:
        try:
            while True:
                try:
                    job_id = pending.get_nowait()
                except queue.Empty:
                    return
                try:
                    enqueue(job_id)
                except Exception as exc:  # the job is marked failed; raised below, after the others ran
                    errors.append(exc)
        finally:
            connections.close_all()

    workers = min(llm_settings().concurrency, len(job_ids))
    if workers:
        with ThreadPoolExecutor(max_workers=workers) as pool:
            for future in [pool.submit(drain) for _ in range(workers)]:
                future.result()
    if errors:
        raise errors[0]


def job_lease() -> timedelta:
    """How long a running job may show no sign of life before another worker may take
    it over. A live worker records every LLM attempt when it ends, and attempts are at
    most GENERATION_TIMEOUT plus one backoff apart, so the lease is never shorter than
    three such gaps, whatever GENERATION_JOB_LEASE says."""
    conf = llm_settings()
    return timedelta(seconds=max(job_lease_seconds(), 3 * (conf.timeout + conf.backoff_max)))


def claim_job(*, job_id: int, model=GenerationJob) -> GenerationJob | AnswerJob | None:
    """Take the job for this worker, or None when it is finished or another live
    worker has it. One UPDATE decides, so two deliveries of a task cannot both win.

    A running job is taken over only when it was claimed longer ago than the lease
    and none of its LLM calls is more recent than that: its worker died (a job that
    retries a slow endpoint for an hour is still alive). `model` is GenerationJob or
    AnswerJob (clinical questions); both follow these rules."""
    now = timezone.now()
    claim = {"status": Status.RUNNING, "claimed_at": now, "tries": F("tries") + 1, "updated_at": now}
    # The usual case first, in the cheapest statement: a pending job.
    if not model.objects.filter(pk=job_id, status=Status.PENDING).update(**claim):
        if not _abandoned(model.objects.filter(pk=job_id), now=now).update(**claim):
            return None
    related = "source__study" if model is GenerationJob else "question__study"
    return model.objects.select_related(related).get(pk=job_id)


def _abandoned(jobs, *, now):
    """Those of `jobs` running without a live worker: their heartbeat (`updated_at`,
    renewed every third of RUN_LEASE while the job runs) is older than RUN_LEASE; or,
    for a job claimed by a worker without a heartbeat, claimed longer ago than the lease
    and with no LLM call since."""
    link = "job" if jobs.model is GenerationJob else "answer_job"
    calls = LLMCall.objects.filter(**{link: OuterRef("pk")})
    silent = running_without_worker(jobs, field="updated_at", before=now - run_lease())
    old = running_without_worker(jobs, field="claimed_at", before=now - job_lease(), activity=calls)
    return silent | old


def job_heartbeat(job: GenerationJob | AnswerJob, claimed_at):
    """The heartbeat of a running job: its `updated_at` renewed every third of RUN_LEASE
    while this worker holds the claim (core.background.heartbeat)."""

    def renew() -> None:
        type(job).objects.filter(pk=job.pk, status=Status.RUNNING, claimed_at=claimed_at).update(
            updated_at=timezone.now()
        )

    return heartbeat(renew)


def fail_jobs(*, job_ids: Sequence[int], model=GenerationJob, error: str, statuses=(Status.PENDING,)) -> int:
    """Mark the jobs of `job_ids` that are in one of `statuses` failed with `error`."""
    now = timezone.now()
    return model.objects.filter(pk__in=job_ids, status__in=statuses).update(
        status=Status.FAILED, error=error, finished_at=now, updated_at=now
    )


def fail_lost_job(*, job_id: int, model=GenerationJob) -> int:
    """The worker process running the job died (Celery's WorkerLostError, seen at once by
    the worker's main process): mark it failed now; the next run of the command resumes it."""
    return fail_jobs(job_ids=[job_id], model=model, error=WORKER_DIED_ERROR, statuses=(Status.PENDING, Status.RUNNING))


def sweep_jobs(*, model=GenerationJob, enqueue: Enqueue) -> dict[str, int]:
    """The periodic sweep: a pending job that no worker claimed within RUN_CLAIM_TIMEOUT is
    queued again once (`requeued`), and failed the second time (UNCLAIMED_ERROR).

    A job waits in line behind the others of a large run, for longer than the timeout: while
    the workers claimed any job of its kind within the timeout, they are alive and taking
    work, and no pending job is touched."""
    before = timezone.now() - claim_timeout()
    if model.objects.filter(claimed_at__gte=before).exists():
        return {"requeued": 0, "failed": 0}
    stale = model.objects.filter(status=Status.PENDING, updated_at__lt=before)
    failed = fail_jobs(
        job_ids=list(stale.filter(requeued=True).values_list("pk", flat=True)), model=model, error=UNCLAIMED_ERROR
    )
    again = []
    for job_id in stale.filter(requeued=False).values_list("pk", flat=True):
        if model.objects.filter(pk=job_id, status=Status.PENDING, requeued=False).update(
            requeued=True, updated_at=timezone.now()
        ):
            again.append(job_id)
    if again:
        dispatch_jobs(job_ids=again, enqueue=enqueue, model=model)
    return {"requeued": len(again), "failed": failed}


def abandoned_jobs(*, run: GenerationRun) -> list[int]:
    """The run's jobs that are running without a live worker (see claim_job)."""
    return list(_abandoned(run.jobs.all(), now=timezone.now()).values_list("pk", flat=True))


def requeue_abandoned_jobs(*, run: GenerationRun, enqueue: Enqueue) -> list[int]:
    """Hand the run's abandoned jobs to the workers again. A worker process that was
    killed (out of memory, say) has its message acknowledged by Celery, so nothing
    else would deliver its job again; claiming is atomic, so a job that a live worker
    takes meanwhile is not run twice."""
    job_ids = abandoned_jobs(run=run)
    if job_ids:
        dispatch_jobs(job_ids=job_ids, enqueue=enqueue)
    return job_ids


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
        with job_heartbeat(job, claimed_at):
            outcome = Runner(spec=spec, source=job.source, job=job, gateway=Gateway()).run()
            return store_outcome(job=job, claimed_at=claimed_at, spec=spec, outcome=outcome)
    except ApplicationError as exc:  # the endpoint failed after its retries, or the model's answer was unusable
        _finish(job, claimed_at, status=Status.FAILED, error=exc.message)
        return job
    except Exception as exc:
        # Not ours to handle: mark the job so the run shows it, then let it propagate.
        _finish(job, claimed_at, status=Status.FAILED, error=internal_error(exc))
        raise


def internal_error(exc: Exception) -> str:
    """A job's reason for an error that is a bug of ours, not the model's or the endpoint's."""
    return f"an internal error stopped the job ({type(exc).__name__}: {exc}); the worker's log has the details"


def _finish(job: GenerationJob | AnswerJob, claimed_at, **fields) -> bool:
    """Write the job's result only if this worker still holds the claim (and on the
    instance too, so the caller need not read the row again)."""
    now = timezone.now()
    updated = (
        type(job)
        .objects.filter(pk=job.pk, status=Status.RUNNING, claimed_at=claimed_at)
        .update(finished_at=now, updated_at=now, **fields)
    )
    if updated == 1:
        for name, value in {"finished_at": now, "updated_at": now, **fields}.items():
            setattr(job, name, value)
    return updated == 1


CLAIM_FIELDS = ("index", "text", "start", "end", "refs", "verdict", "explanation", "probability")


def _claim_fields(claim: dict) -> dict:
    return {key: claim.get(key) for key in CLAIM_FIELDS}


@transaction.atomic
def store_outcome(*, job: GenerationJob, claimed_at, spec: PipelineSpec, outcome: Outcome) -> GenerationJob:
    """Store the summary, its claims and the job's result in one transaction, so a
    crash leaves either all of it or none (and the job can simply run again)."""
    locked = GenerationJob.objects.select_for_update().only("status", "claimed_at").get(pk=job.pk)
    if locked.status != Status.RUNNING or locked.claimed_at != claimed_at:
        logger.warning("job %s was taken over by another worker; discarding this result", job.pk)
        return GenerationJob.objects.get(pk=job.pk)
    result = {
        "attempts": outcome.attempts,
        "reference_checks": outcome.references.as_dict() if outcome.references else None,
        "flags": outcome.flags,
        **outcome.trace,
    }
    summary = None
    draft = None
    if outcome.status != "skipped" and outcome.trace.get("draft"):
        draft = create_summary(
            study=job.source.study,
            source=job.source,
            key=f"{job.source.key}/{spec.name}@{spec.version}/draft",
            text=outcome.trace["draft"]["text"],
            generator=f"{spec.generator}/draft",
            metadata={
                "pipeline": spec.name,
                "pipeline_version": spec.version,
                "generation_job": str(job.uuid),
                "draft_of_revision": True,
                "model": pipeline_settings(spec.stages[-1]).model,
            },
            # `draft` keeps it out of batches unless the study asks for drafts (annotate's
            # filter_summaries); the others are the checks it failed.
            flags=outcome.trace["draft"].get("flags", ["draft"]),
        )
        record_claims(summary=draft, claims=[_claim_fields(c) for c in outcome.trace["draft"]["claims"]])
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
            parent=draft,
        )
        record_claims(summary=summary, claims=[_claim_fields(c) for c in outcome.claims])
    _finish(
        job,
        claimed_at,
        status=outcome.status,
        summary=summary,
        result=result,
        skip_reason=outcome.skip_reason,
        error="",
    )
    return job


# --- clinical questions (Clinfo.ai) ------------------------------------------------------


def question_engine(study: Study, name: str):
    """The search engine of an answer run: the local BM25 index over the study's sources,
    or PubMed through NCBI E-utilities (articles found are imported as sources)."""
    if name == "local":
        from literature.engines import LocalEngine

        return LocalEngine(study)
    if name == "pubmed":
        from literature.pubmed import PubMedEngine

        return PubMedEngine(study)
    raise ApplicationError(f"unknown engine {name!r}; use local or pubmed")


def start_answer_run(
    *,
    study: Study,
    engine: str,
    regime: str,
    question_keys: Sequence[str] = (),
    limit: int | None = None,
    enqueue: Enqueue,
) -> list[AnswerJob]:
    """One job per question for this engine, regime and pipeline version (reused when it
    exists: finished jobs are not run again, failed ones are resumed), enqueued once the
    jobs are committed. Returns the jobs in question order."""
    from generation.questions import question_settings
    from literature.models import Question, Retrieval

    require_api_key()
    if regime not in Retrieval.Regime.values:
        raise ApplicationError(f"unknown regime {regime!r}; use one of {', '.join(Retrieval.Regime.values)}")
    if engine not in Retrieval.Engine.values:
        raise ApplicationError(f"unknown engine {engine!r}; use one of {', '.join(Retrieval.Engine.values)}")
    conf = question_settings()
    questions = Question.objects.filter(study=study).order_by("key")
    if question_keys:
        questions = questions.filter(key__in=question_keys)
        missing = sorted(set(question_keys) - set(questions.values_list("key", flat=True)))
        if missing:
            raise ApplicationError(f"No question {', '.join(missing)} in study {study.slug}.")
    questions = list(questions[:limit] if limit is not None else questions)
    if not questions:
        raise ApplicationError(f"Study {study.slug} has no questions: import them with import_questions.")
    with transaction.atomic():
        AnswerJob.objects.bulk_create(
            [
                AnswerJob(question=q, engine=engine, regime=regime, pipeline_version=conf.version, config=conf.config())
                for q in questions
            ],
            ignore_conflicts=True,
        )
        jobs = {
            job.question_id: job
            for job in AnswerJob.objects.filter(
                question__in=questions, engine=engine, regime=regime, pipeline_version=conf.version
            )
        }
        AnswerJob.objects.filter(pk__in=[j.pk for j in jobs.values()], status=Status.FAILED).update(
            status=Status.PENDING, requeued=False, updated_at=timezone.now()
        )
        todo = [j.pk for j in jobs.values() if j.status not in (Status.OK, Status.FLAGGED, Status.SKIPPED)]
        transaction.on_commit(lambda: dispatch_jobs(job_ids=todo, enqueue=enqueue, model=AnswerJob))
    return [jobs[q.pk] for q in questions]


def run_answer_job(*, job_id: int) -> AnswerJob:
    """Claim the job, answer its question and store the answer. A job that is finished
    or taken is returned untouched."""
    from generation.questions import QuestionRunner, question_settings

    job = claim_job(job_id=job_id, model=AnswerJob)
    if job is None:
        return AnswerJob.objects.get(pk=job_id)
    claimed_at = job.claimed_at
    conf = question_settings()
    if conf.version != job.pipeline_version:
        _finish(job, claimed_at, status=Status.FAILED, error="The settings changed since this job was created.")
        return job
    try:
        with job_heartbeat(job, claimed_at):
            engine = question_engine(job.question.study, job.engine)
            outcome = QuestionRunner(
                question=job.question, engine=engine, regime=job.regime, settings=conf, job=job, gateway=Gateway()
            ).run()
            job = store_answer_outcome(job=job, claimed_at=claimed_at, conf=conf, outcome=outcome)
    except ApplicationError as exc:  # the LLM or NCBI failed after their retries, an unusable answer
        _finish(job, claimed_at, status=Status.FAILED, error=exc.message)
        return job
    except Exception as exc:
        _finish(job, claimed_at, status=Status.FAILED, error=internal_error(exc))
        raise
    if conf.verify and job.summary_id:
        verify_stored_answer(job=job)
    return job


def verify_stored_answer(*, job: AnswerJob) -> None:
    """Factored Verification of the job's answer, after it is stored (no LLM call inside a
    transaction): its claims with verdicts, P(answer) and the unsupported count in its
    metadata. A verification that fails is recorded on the job; the answer stays."""
    from generation.claims import summary_probability
    from generation.questions import verify_answer
    from generation.verdicts import NOT_SUPPORTED

    summary = job.summary
    try:
        claims = verify_answer(summary=summary, job=job, gateway=Gateway())
    except LLMError as exc:
        AnswerJob.objects.filter(pk=job.pk).update(result={**job.result, "verification_error": exc.message})
        return
    with transaction.atomic():
        record_claims(
            summary=summary,
            claims=[
                {
                    k: c.get(k)
                    for k in ("index", "text", "start", "end", "refs", "verdict", "explanation", "probability")
                }
                for c in claims
            ],
        )
        summary.metadata = {
            **summary.metadata,
            "factored": {
                "p_summary": summary_probability(claims),
                "unsupported": sum(1 for c in claims if c["verdict"] == NOT_SUPPORTED),
                "claims": len(claims),
            },
        }
        summary.save(update_fields=["metadata", "updated_at"])


@transaction.atomic
def store_answer_outcome(*, job: AnswerJob, claimed_at, conf, outcome) -> AnswerJob:
    """Store the answer (literature.answers.store_answer) and the job's trace together."""
    from literature.answers import store_answer

    locked = AnswerJob.objects.select_for_update().only("status", "claimed_at").get(pk=job.pk)
    if locked.status != Status.RUNNING or locked.claimed_at != claimed_at:
        logger.warning("answer job %s was taken over by another worker; discarding this result", job.pk)
        return AnswerJob.objects.get(pk=job.pk)
    summary = None
    # An answer asked for on the ask page stays in the job's trace until a study admin adds
    # it to the study for rating (generation.asking.add_asked_answer).
    if outcome.status == "ok" and not job.config.get("ask"):
        summary = store_answer(
            question=job.question,
            retrieval=outcome.retrieval,
            synthesis=outcome.synthesis,
            tldr=outcome.tldr,
            generator=f"{conf.model}/clinfo@{conf.version}",
            key=f"{job.question.key}:answer:{job.engine}-{job.regime}@{conf.version}",
            citations=outcome.citations,
            metadata={
                "pipeline": "clinfo",
                "pipeline_version": conf.version,
                "answer_job": str(job.uuid),
                "model": conf.model,
                "engine": job.engine,
                "regime": job.regime,
                "article_summaries": outcome.trace.get("article_summaries", {}),
            },
        )
    _finish(
        job,
        claimed_at,
        status=outcome.status,
        retrieval=outcome.retrieval,
        summary=summary,
        result=outcome.trace,
        skip_reason=outcome.skip_reason,
        error="",
    )
    return job
