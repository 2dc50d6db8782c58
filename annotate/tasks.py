"""Celery tasks of the annotate app: thin wrappers around its services."""

from pathlib import Path

from celery import shared_task

from annotate import exporting
from annotate.models import Study


@shared_task
def export_dataset_task(
    study_id: int, out_dir: str, *, formats: list[str], phase: str = "all", include_calibration: bool = False
) -> str:
    """Write a CC BY export of the study (restricted sources withheld) into out_dir."""
    study = Study.objects.select_related("rubric").get(pk=study_id)
    result = exporting.export_dataset(
        study=study, out_dir=Path(out_dir), formats=formats, phase=phase, include_calibration=include_calibration
    )
    return str(result.out_dir)


@shared_task
def run_api_export_task(*, study_slug: str, export_id: str) -> str:
    """Run an export started through the API (annotate.api_exports)."""
    from annotate.api_exports import run_export

    return run_export(study_slug=study_slug, export_id=export_id).status
