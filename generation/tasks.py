"""Celery tasks: thin, by id; the work is in generation.services."""

from celery import shared_task

from generation import services


@shared_task(acks_late=True)
def generate_summary_task(job_id: int) -> str:
    # No automatic retries here: the gateway already retries transient LLM errors,
    # and a failed job is resumed by the next run.
    return services.run_generation_job(job_id=job_id).status
