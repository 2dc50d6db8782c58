"""Background runs, the same way for every app: where a task runs when no broker is
configured, how a task is handed to the broker (and what happens when it cannot be), how a
running run shows it is alive (a heartbeat thread renewing a short lease), and how a run
that lost its worker is told from a live one.

Settings (environment, read when asked; documented in .env.example and docs/deployment.md):
RUN_LEASE (seconds a running run may go without a heartbeat, default 30),
RUN_CLAIM_TIMEOUT (seconds a queued run may wait for a worker before it is queued again
once, then failed; default 300).

Used by the study report (analysis), generation jobs, evaluators and the rubric judge
(generation), and dataset import and export runs (datasets.run_state).
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from datetime import datetime, timedelta

from django.conf import settings
from django.db import DatabaseError, connections
from django.db.models import Exists, QuerySet
from kombu.exceptions import OperationalError as BrokerError

from core.env import env_float
from core.exceptions import ApplicationError

logger = logging.getLogger(__name__)

_pools: dict[str, ThreadPoolExecutor] = {}
_pools_lock = threading.Lock()


# What a run says when its task could not be handed to the broker (or no worker ever took
# it), and when the worker running it died (killed, out of memory, its machine gone).
QUEUE_UNAVAILABLE = "the task queue is unavailable"
WORKER_DIED = "stopped: the worker died"
DEFAULT_RUN_LEASE_SECONDS = 30
DEFAULT_RUN_CLAIM_TIMEOUT_SECONDS = 300


class QueueUnavailableError(ApplicationError):
    """The broker could not be reached: the run was recorded as failed (503)."""

    code = "queue_unavailable"
    http_status = 503


def run_lease() -> timedelta:
    """RUN_LEASE (seconds, default 30): a running run whose worker has not renewed its
    lease for this long has lost its worker. The heartbeat renews it every third of it."""
    return timedelta(seconds=env_float("RUN_LEASE", DEFAULT_RUN_LEASE_SECONDS, positive=True))


def claim_timeout() -> timedelta:
    """RUN_CLAIM_TIMEOUT (seconds, default 300): a queued run that no worker claimed within
    this is queued again, once; if no worker claims it within this again, it fails."""
    return timedelta(seconds=env_float("RUN_CLAIM_TIMEOUT", DEFAULT_RUN_CLAIM_TIMEOUT_SECONDS, positive=True))


def enqueue_or_fail(enqueue: Callable, *args, fail: Callable[[str], object], **kwargs):
    """Call `enqueue(*args, **kwargs)` (a task's `delay`, or a function that calls one);
    when the broker cannot be reached, or does not answer within BROKER_CONNECT_TIMEOUT and
    BROKER_TIMEOUT (config/settings.py: kombu then raises the same OperationalError),
    `fail(QUEUE_UNAVAILABLE)` records it on the run and QueueUnavailableError (503, with
    that message) is raised instead of a 500."""
    try:
        return enqueue(*args, **kwargs)
    except (BrokerError, QueueUnavailableError) as exc:
        logger.error("could not queue %r: %s", getattr(enqueue, "__qualname__", enqueue), exc)
        fail(QUEUE_UNAVAILABLE)
        raise QueueUnavailableError(
            f"{QUEUE_UNAVAILABLE.capitalize()}: the run was not started and is marked failed. Try again later."
        ) from None


@contextmanager
def heartbeat(renew: Callable[[], object], *, every: float | None = None) -> Iterator[None]:
    """Renew a run's lease from a thread of its own every `every` seconds (default: a third
    of RUN_LEASE) while the block runs, whatever the run is doing: a stage that makes no
    progress for minutes (a slow LLM call, the text metrics of a large study) is still
    alive, while a killed process stops renewing at once. `renew()` is one conditional
    UPDATE; a database error is logged and tried again at the next beat. The thread is not
    joined: it stops at its next wake-up and closes its own connection."""
    interval = every if every is not None else run_lease().total_seconds() / 3
    stop = threading.Event()

    def beat() -> None:
        try:
            while not stop.wait(interval):
                try:
                    renew()
                except DatabaseError as exc:
                    logger.warning("heartbeat: %s", exc)
        finally:
            connections.close_all()  # this thread's connection

    threading.Thread(target=beat, daemon=True, name="run-heartbeat").start()
    try:
        yield
    finally:
        stop.set()


def worker_lost(exception: BaseException | None) -> bool:
    """Whether a task_failure signal says the worker process running the task died
    (Celery's WorkerLostError: killed, out of memory). The parent worker process sends it
    at once, so the run can be marked failed without waiting for its lease."""
    from billiard.exceptions import WorkerLostError

    return isinstance(exception, WorkerLostError)


# How much lower than the web process's own threads a background thread runs (nice).
BACKGROUND_NICENESS = 10


def lower_thread_priority(increment: int = BACKGROUND_NICENESS) -> None:
    """Lower the CPU priority of the calling thread only. On Linux every thread is a task of
    its own with its own nice value, which setpriority() sets by the thread's id; os.nice()
    would lower the whole web process (its request threads too). Elsewhere, or if the
    kernel refuses, the thread keeps its priority: a best effort, never an error.

    Why a thread and not a process of its own: a process per report (spawned, niced) would
    import Django, pandas and the statistics again and hold a second copy of them, on the
    small machine that runs without a broker; the production shape has no such thread at
    all (a broker and a Celery worker, docs/deployment.md). The limit of a niced thread:
    it shares its process's GIL with the request threads, so it yields the cores to other
    processes (the other gunicorn workers, the database) rather than to its own process's
    requests; the heavy parts (numpy's bootstrap, scipy) release the GIL while they run."""
    try:
        tid = threading.get_native_id()
        os.setpriority(os.PRIO_PROCESS, tid, min(19, os.getpriority(os.PRIO_PROCESS, tid) + increment))
    except (AttributeError, OSError) as exc:
        logger.debug("background thread keeps its priority: %s", exc)


def _pool(name: str) -> ThreadPoolExecutor:
    with _pools_lock:
        if name not in _pools:
            # One thread per pool: a burst of requests cannot take every core of a small machine;
            # and it runs at a lower priority than the requests' threads.
            _pools[name] = ThreadPoolExecutor(max_workers=1, thread_name_prefix=name, initializer=lower_thread_priority)
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
