"""Celery tasks of the analysis app: thin wrappers around analysis.services.

The views and the API hand ``enqueue_study_report`` to services.request_study_report
(tasks import services, never the reverse). A report is never computed in the request:
with a broker configured the Celery task goes to a worker; without one (a fresh machine,
where Celery runs tasks eagerly, which would mean in the request) it runs in a background
thread of this process, one report at a time.
"""

from __future__ import annotations

import logging
from concurrent.futures import Future, ThreadPoolExecutor

from celery import shared_task
from django.conf import settings
from django.db import connections

from analysis import services

logger = logging.getLogger(__name__)

# One thread: reports of a process without a broker are computed one at a time, so a
# burst of requests cannot take every core of a small machine.
_in_process = ThreadPoolExecutor(max_workers=1, thread_name_prefix="study-report")


@shared_task
def run_study_report_task(result_id: int) -> None:
    services.run_study_report(result_id=result_id)


def _run_in_thread(result_id: int) -> None:
    try:
        services.run_study_report(result_id=result_id)
    except Exception:  # recorded on the row as failed by run_study_report; logged here
        logger.exception("study report %s failed", result_id)
    finally:
        connections.close_all()  # this thread's connections, not the request's


def enqueue_study_report(result_id: int) -> Future | None:
    """Have the report computed off the request thread: by a Celery worker when a broker
    is configured, else by this process's report thread. Returns the thread's future (for
    tests and the benchmark), None when a broker has it. A run lost with its process (a
    restart) is picked up again by the next request after one lease (services)."""
    if not settings.CELERY_TASK_ALWAYS_EAGER:
        run_study_report_task.delay(result_id)
        return None
    return _in_process.submit(_run_in_thread, result_id)
