"""Background runs, the same way for every app: where a task runs when no broker is
configured, and how a run that lost its worker is told from a live one.

Used by the study report (analysis), generation jobs, evaluators and the rubric judge
(generation). Dataset import and export runs keep their state in files and tell a dead run
by a kernel file lock instead (datasets.run_files).
"""

from __future__ import annotations

import logging
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import datetime

from django.conf import settings
from django.db import connections
from django.db.models import Exists, QuerySet

logger = logging.getLogger(__name__)

_pools: dict[str, ThreadPoolExecutor] = {}
_pools_lock = threading.Lock()


def _pool(name: str) -> ThreadPoolExecutor:
    with _pools_lock:
        if name not in _pools:
            # One thread per pool: a burst of requests cannot take every core of a small machine.
            _pools[name] = ThreadPoolExecutor(max_workers=1, thread_name_prefix=name)
        return _pools[name]


def _run_in_thread(task, *args) -> None:
    try:
        task(*args)
    except Exception:  # a run records its own failure on its row; logged here as well
        logger.exception("%s%r failed", getattr(task, "name", task), args)
    finally:
        connections.close_all()  # this thread's connections, not the request's


def run_in_background(task, *args, pool: str) -> Future | None:
    """Have the Celery `task` run off the request: by a worker when a broker is configured
    (returns None), else by this process's thread for `pool`, one task of a pool at a time
    (returns its future). Without a broker Celery would run the task eagerly, which means
    in the request; a run lost with its process is picked up again by its own app's
    lease check."""
    if not settings.CELERY_TASK_ALWAYS_EAGER:
        task.delay(*args)
        return None
    return _pool(pool).submit(_run_in_thread, task, *args)


def wait_for_pool(pool: str, timeout: float) -> None:
    """Return once every task queued so far on `pool` has run (for tests, benchmarks and
    commands that must see a background run's outcome); TimeoutError after `timeout` s."""
    _pool(pool).submit(lambda: None).result(timeout=timeout)


def running_without_worker(
    rows: QuerySet, *, field: str, before: datetime, activity: QuerySet | None = None
) -> QuerySet:
    """Those of `rows` (with a `status`) that are running although no worker holds them any
    more: `field`, the time of the worker's last sign of life or the end of its lease, is
    before `before`; and none of `activity` (rows a live worker writes as it goes, filtered
    on OuterRef("pk"), with a `created_at`) is newer than `before` either.

    Callers update the queryset conditionally (`.update(status=...)`), so a worker that
    shows a sign of life at the same moment wins and no run is taken over twice."""
    rows = rows.filter(status="running", **{f"{field}__lt": before})
    if activity is not None:
        rows = rows.filter(~Exists(activity.filter(created_at__gte=before)))
    return rows
