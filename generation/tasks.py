"""Celery tasks: thin, by id; the work is in generation.services."""

import logging
from concurrent.futures import Future, ThreadPoolExecutor

from celery import shared_task
from django.conf import settings
from django.db import connections

from generation import services
from generation.models import AnswerJob, GenerationJob

logger = logging.getLogger(__name__)


@shared_task(bind=True, acks_late=True, max_retries=None)
def generate_summary_task(self, job_id: int) -> str:
    # No automatic retries on errors: the gateway already retries transient LLM
    # errors, and a failed job is resumed by the next run.
    job = services.run_generation_job(job_id=job_id)
    if job.status == GenerationJob.Status.RUNNING and not self.request.is_eager:
        # Another worker holds the job. If that worker died (this delivery may be the
        # broker handing us its task again), nobody else would resume the job: look
        # again once its lease can have run out. A live holder will have finished by
        # then, and this delivery does nothing.
        raise self.retry(countdown=services.job_lease().total_seconds())
    return job.status


@shared_task(bind=True, acks_late=True, max_retries=None)
def answer_question_task(self, job_id: int) -> str:
    """One clinical question (generation.services.run_answer_job), resumed like a summary job."""
    job = services.run_answer_job(job_id=job_id)
    if job.status == AnswerJob.Status.RUNNING and not self.request.is_eager:
        raise self.retry(countdown=services.job_lease().total_seconds())
    return job.status


# --- evaluators (generation.evaluators) ---------------------------------------------------

# Without a broker an evaluation runs in this thread pool, one at a time, never in the
# request that started it (as the analysis app's reports do).
_in_process = ThreadPoolExecutor(max_workers=1, thread_name_prefix="evaluation")


@shared_task(acks_late=True)
def evaluate_task(study_id: int, evaluator: str) -> str:
    from annotate.models import Study
    from generation.evaluators import run_evaluation

    run = run_evaluation(study=Study.objects.get(pk=study_id), evaluator_name=evaluator)
    return str(run.uuid)


def _run_in_thread(task, *args) -> None:
    try:
        task(*args)
    except Exception:  # what was written so far stays; the page shows the run's progress
        logger.exception("%s%r failed", task.name, args)
    finally:
        connections.close_all()


def _enqueue(task, *args) -> Future | None:
    """A Celery worker runs `task` when a broker is configured, else this process's thread."""
    if not settings.CELERY_TASK_ALWAYS_EAGER:
        task.delay(*args)
        return None
    return _in_process.submit(_run_in_thread, task, *args)


def enqueue_evaluation(study_id: int, evaluator: str) -> Future | None:
    return _enqueue(evaluate_task, study_id, evaluator)


# --- the rubric judge (generation.judging) --------------------------------------------------


@shared_task(acks_late=True)
def judge_task(study_id: int) -> str:
    from annotate.models import Study
    from generation.judging import run_judge

    run, _ = run_judge(study=Study.objects.get(pk=study_id))
    return str(run.uuid)


def enqueue_judge(study_id: int) -> Future | None:
    return _enqueue(judge_task, study_id)
