"""Celery tasks of the datasets app: thin wrappers around its services."""

from celery import shared_task

from datasets.export_runs import run_export
from datasets.import_runs import run_import


@shared_task
def run_api_export_task(*, study_slug: str, export_id: str) -> str:
    """Run an export started through the API or the admin (datasets.export_runs).
    Safe to deliver twice: run_export claims the run and restarts one whose worker died."""
    return run_export(study_slug=study_slug, export_id=export_id).status


@shared_task
def run_api_import_task(*, study_slug: str, import_id: str) -> str:
    """Run an import uploaded through the API or the study pages (datasets.import_runs)."""
    return run_import(study_slug=study_slug, import_id=import_id).status
