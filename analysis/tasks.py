"""Celery tasks of the study report: thin wrappers around analysis.services.

The views and the API hand ``enqueue_study_report`` to services.request_study_report
(tasks import services, never the reverse). A report is never computed in the request:
with a broker configured the Celery task goes to a worker; without one (a fresh machine)
it runs in this process's "study-report" thread, one report at a time (core.background).
"""

from __future__ import annotations

from concurrent.futures import Future

from celery import shared_task
from celery.signals import task_failure

from analysis import services
from core.background import run_in_background, worker_lost

POOL = "study-report"


@shared_task
def run_study_report_task(result_id: int) -> None:
    """The numbers first (the page shows them as soon as they are stored), then the plots."""
    services.run_study_report(result_id=result_id)
    services.draw_missing_plots(result_id=result_id)


def enqueue_study_report(result_id: int) -> Future | None:
    """Have the report computed off the request thread. Returns the thread's future (for
    tests and the benchmark), None when a broker has it. A run lost with its process (a
    restart) is picked up again by the next request after one lease (services)."""
    return run_in_background(run_study_report_task, result_id, pool=POOL)


@task_failure.connect
def _report_worker_lost(sender=None, exception=None, args=None, **kwargs) -> None:
    """The pool process computing a report died: the worker's main process says so at
    once (WorkerLostError), and the report is marked "stopped: the worker died"."""
    if getattr(sender, "name", None) == run_study_report_task.name and worker_lost(exception) and args:
        services.fail_lost_report(result_id=int(args[0]))
