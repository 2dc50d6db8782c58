"""Celery tasks: thin, by id; the work is in generation.services."""

import logging
from concurrent.futures import Future

from celery import shared_task
from celery.signals import task_failure

from core.background import enqueue_or_fail, run_in_background, worker_lost
from generation import run_records, services
from generation.models import AnswerJob, EvaluationRun, GenerationJob, JudgeRun

logger = logging.getLogger(__name__)


def _report(task, kind: str, job) -> None:
    """One line on the worker's log for a finished job, with its reason (in-process, the
    command that ran it reports instead). The task itself returns nothing: Celery's
    "Task ... succeeded in 2.1s: 'failed'" read as a contradiction."""
    if task.request.is_eager:
        return
    if job.status == "failed":
        logger.warning("%s job %s failed: %s", kind, job.pk, job.error)
    elif job.status == "skipped":
        logger.info("%s job %s skipped: %s", kind, job.pk, job.skip_reason)
    elif job.status != "running":
        logger.info("%s job %s: %s", kind, job.pk, job.get_status_display().lower())


@shared_task(bind=True, acks_late=True, max_retries=None, ignore_result=True)
def generate_summary_task(self, job_id: int) -> None:
    # No automatic retries on errors: the gateway already retries transient LLM
    # errors, and a failed job is resumed by the next run.
    job = services.run_generation_job(job_id=job_id)
    if job.status == GenerationJob.Status.RUNNING and not self.request.is_eager:
        # Another worker holds the job. If that worker died (this delivery may be the
        # broker handing us its task again), nobody else would resume the job: look
        # again once its lease can have run out. A live holder will have finished by
        # then, and this delivery does nothing.
        raise self.retry(countdown=services.job_lease().total_seconds())
    _report(self, "summary", job)


@shared_task(bind=True, acks_late=True, max_retries=None, ignore_result=True)
def answer_question_task(self, job_id: int) -> None:
    """One clinical question (generation.services.run_answer_job), resumed like a summary job."""
    job = services.run_answer_job(job_id=job_id)
    if job.status == AnswerJob.Status.RUNNING and not self.request.is_eager:
        raise self.retry(countdown=services.job_lease().total_seconds())
    _report(self, "question", job)


# --- evaluators (generation.evaluators) and the rubric judge (generation.judging) -----------

# Without a broker an evaluation or a judge run goes to this process's "evaluation" thread,
# one at a time, never into the request that started it (core.background).
POOL = "evaluation"


@shared_task(acks_late=True)
def automatic_run_task(study_id: int, name: str) -> None:
    """Score (an evaluator) or judge (the rubric judge) every summary of the study."""
    from annotate.models import Study
    from generation.evaluators import automatic_runs

    automatic_runs()[name].run(Study.objects.get(pk=study_id))


def enqueue_automatic_run(study_id: int, name: str) -> Future | None:
    return run_in_background(automatic_run_task, study_id, name, pool=POOL)


# --- asked questions (generation.asking) ---------------------------------------------------

# Without a broker, asked questions run on this process's "ask" thread, one at a time, never
# in the request that asked (core.background).
ASK_POOL = "ask"


def enqueue_asked_question(job_id: int) -> Future | None:
    return run_in_background(answer_question_task, job_id, pool=ASK_POOL)


@shared_task(acks_late=True, ignore_result=True)
def verify_answer_task(job_id: int) -> None:
    """Factored Verification of an answer once it is stored (an asked answer once added)."""
    job = AnswerJob.objects.select_related("summary").get(pk=job_id)
    if job.summary_id:
        services.verify_stored_answer(job=job)


def enqueue_answer_verification(job_id: int) -> Future | None:
    return run_in_background(verify_answer_task, job_id, pool=ASK_POOL)


def queue_automatic_run(run: EvaluationRun | JudgeRun, name: str) -> Future | None:
    """Record the run as waiting for a worker and queue it; a broker that cannot be reached
    fails it with "the task queue is unavailable" (QueueUnavailableError: the page's 503).
    A run that a live worker is running is not queued twice."""
    if not run_records.mark_queued(run):
        return None
    return enqueue_or_fail(
        enqueue_automatic_run,
        run.study_id,
        name,
        fail=lambda message: run_records.fail_run(run, run_records.NOT_QUEUED_ERROR),
    )


def _automatic_run_name(run: EvaluationRun | JudgeRun) -> str:
    from generation.judging import JUDGE_NAME

    return JUDGE_NAME if isinstance(run, JudgeRun) else run.evaluator


def _lost_automatic_run(study_id: int, name: str) -> None:
    """The newest pending or running run of that evaluator (or the judge) in the study."""
    from generation.judging import JUDGE_NAME

    rows = JudgeRun.objects.all() if name == JUDGE_NAME else EvaluationRun.objects.filter(evaluator=name)
    run = rows.filter(study_id=study_id, status__in=["pending", "running"]).order_by("-updated_at").first()
    if run is not None:
        run_records.fail_run(run, run_records.WORKER_DIED_ERROR)


@shared_task
def sweep_generation_runs_task() -> int:
    """Periodic (Celery beat): runs and jobs that no worker took within RUN_CLAIM_TIMEOUT
    are queued again once, then failed; evaluator and judge runs whose heartbeat stopped
    are failed ("stopped: the worker died")."""
    changed = run_records.sweep_automatic_runs(enqueue=enqueue_automatic_run, name_of=_automatic_run_name)
    for model, task in ((GenerationJob, generate_summary_task), (AnswerJob, answer_question_task)):
        counts = services.sweep_jobs(model=model, enqueue=task.delay)
        changed += counts["requeued"] + counts["failed"]
    return changed


@task_failure.connect
def _generation_worker_lost(sender=None, exception=None, args=None, **_) -> None:
    """The pool process running a job or a run died (WorkerLostError): the worker's main
    process records it at once as "stopped: the worker died"."""
    if not worker_lost(exception) or not args:
        return
    name = getattr(sender, "name", None)
    if name == generate_summary_task.name:
        services.fail_lost_job(job_id=int(args[0]))
    elif name == answer_question_task.name:
        services.fail_lost_job(job_id=int(args[0]), model=AnswerJob)
    elif name == automatic_run_task.name:
        _lost_automatic_run(int(args[0]), str(args[1]))
