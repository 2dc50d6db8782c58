"""Celery tasks of the analysis app: thin wrappers around analysis.services.

The views and the API hand ``run_study_report_task.delay`` to
services.request_study_report: tasks import services, never the reverse.
"""

from celery import shared_task

from analysis import services


@shared_task
def run_study_report_task(result_id: int) -> None:
    services.run_study_report(result_id=result_id)
