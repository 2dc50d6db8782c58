"""Celery tasks: thin, by id; the work is in generation.services."""

import logging
from concurrent.futures import Future

from celery import shared_task

from core.background import run_in_background
from generation import services
from generation.models import AnswerJob, GenerationJob

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
