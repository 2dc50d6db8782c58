"""What an evaluator run or a rubric-judge run (generation.models.QueuedRun) records of the
worker doing it: queued, running under a heartbeat, done, or failed with why; and, seen from
outside, whether its worker died ("stopped: the worker died") or no worker ever took it."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from django.utils import timezone

from core.background import (
    QUEUE_UNAVAILABLE,
    WORKER_DIED,
    QueueUnavailableError,
    claim_timeout,
    enqueue_or_fail,
    heartbeat,
    run_lease,
)
from core.exceptions import ApplicationError
from generation.models import EvaluationRun, JudgeRun, QueuedRun

Status = QueuedRun.Status
NOT_QUEUED_ERROR = f"{QUEUE_UNAVAILABLE.capitalize()}: the run was not started. Start it again later."
WORKER_DIED_ERROR = f"{WORKER_DIED.capitalize()} before this run finished. Start it again to resume it."
UNCLAIMED_ERROR = f"{QUEUE_UNAVAILABLE.capitalize()}: no worker took this run, even after it was queued again."


def _rows(run: QueuedRun):
    return type(run).objects.filter(pk=run.pk)


def mark_queued(run: QueuedRun) -> bool:
    """The run is handed to a worker: pending, its error cleared. A run that a live worker
    is running is left alone (False: nothing to queue)."""
    alive = _rows(run).filter(status=Status.RUNNING, heartbeat_at__gte=timezone.now() - run_lease())
    if alive.exists():
        return False
    _rows(run).update(status=Status.PENDING, error="", requeued=False, updated_at=timezone.now())
    return True


def fail_run(run: QueuedRun, error: str, *, statuses=(Status.PENDING, Status.RUNNING)) -> bool:
    now = timezone.now()
    return bool(_rows(run).filter(status__in=statuses).update(status=Status.FAILED, error=error, updated_at=now))


@contextmanager
def recording(run: QueuedRun) -> Iterator[None]:
    """The work of `run`, recorded: running (with a heartbeat every third of RUN_LEASE),
    then done, or failed with the reason (an unexpected error is re-raised)."""
    now = timezone.now()
    _rows(run).update(status=Status.RUNNING, error="", heartbeat_at=now, updated_at=now)

    def renew() -> None:
        _rows(run).filter(status=Status.RUNNING).update(heartbeat_at=timezone.now())

    try:
        with heartbeat(renew):
            yield
    except ApplicationError as exc:
        fail_run(run, exc.message)
        raise
    except Exception as exc:
        fail_run(run, f"The run failed unexpectedly ({type(exc).__name__}); the worker's log has the details.")
        raise
    _rows(run).filter(status=Status.RUNNING).update(status=Status.DONE, updated_at=timezone.now())


def worker_died(run: QueuedRun, *, now) -> bool:
    """Running, but its heartbeat is older than RUN_LEASE: its worker died (no query)."""
    return run.status == Status.RUNNING and (run.heartbeat_at is None or run.heartbeat_at < now - run_lease())


def sweep_automatic_runs(*, enqueue: Callable[[int, str], object], name_of: Callable[[QueuedRun], str]) -> int:
    """The periodic sweep: a running run whose heartbeat stopped is failed with
    WORKER_DIED_ERROR; a pending one that no worker took within RUN_CLAIM_TIMEOUT is
    queued again once (`enqueue(study_id, name_of(run))`), and failed the second time."""
    now = timezone.now()
    changed = 0
    for model in (EvaluationRun, JudgeRun):
        dead = model.objects.filter(status=Status.RUNNING, heartbeat_at__lt=now - run_lease())
        changed += dead.update(status=Status.FAILED, error=WORKER_DIED_ERROR, updated_at=now)
        stale = model.objects.filter(status=Status.PENDING, updated_at__lt=now - claim_timeout())
        changed += stale.filter(requeued=True).update(status=Status.FAILED, error=UNCLAIMED_ERROR, updated_at=now)
        for run in stale.filter(requeued=False):
            if model.objects.filter(pk=run.pk, status=Status.PENDING, requeued=False).update(
                requeued=True, updated_at=now
            ):
                changed += 1
                fail = lambda message, run=run: fail_run(run, NOT_QUEUED_ERROR, statuses=(Status.PENDING,))  # noqa: E731
                try:
                    enqueue_or_fail(enqueue, run.study_id, name_of(run), fail=fail)
                except QueueUnavailableError:
                    pass  # recorded on the run by `fail`
    return changed
