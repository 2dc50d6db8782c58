"""Celery tasks of the annotate app: thin wrappers around its services."""

from celery import shared_task


@shared_task
def run_api_export_task(*, study_slug: str, export_id: str) -> str:
    """Run an export started through the API or the admin (annotate.api_exports).
    Safe to deliver twice: run_export claims the run and restarts one whose worker died."""
    from annotate.api_exports import run_export

    return run_export(study_slug=study_slug, export_id=export_id).status
