"""The run state of dataset imports and exports, kept in database rows (datasets.models),
for both kinds of run alike: datasets.export_runs and datasets.import_runs.

Every change of state is one conditional UPDATE that checks its row count, so two
processes on two machines never both win:

- a worker claims a run that is pending, or running with its lease run out (its worker
  died), setting itself as the run's worker (`claim`);
- while it runs, a heartbeat thread renews the lease (`renew`, core.background.heartbeat);
- it records the outcome only while it still holds the run (`finish`): a worker whose run
  was taken over records nothing;
- the periodic sweep (`recover`) queues again a pending run no worker claimed within
  RUN_CLAIM_TIMEOUT, and a running run whose lease ran out (it goes back to pending and the
  next worker takes it over), at most MAX_TRIES claims in all; then it fails the run.

Without a broker there is no sweep and no other worker: a poll fails a running run whose
lease ran out at once (the process that ran it in its request died).
"""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Callable
from datetime import datetime

from django.conf import settings
from django.db.models import F, Q
from django.utils import timezone
from kombu.exceptions import OperationalError as BrokerError

from core.background import QUEUE_UNAVAILABLE, WORKER_DIED, claim_timeout, run_lease
from datasets.models import DatasetRun

Status = DatasetRun.Status
# Why a run failed when no worker took it, even once queued again (RUN_CLAIM_TIMEOUT).
UNCLAIMED_ERROR = f"{QUEUE_UNAVAILABLE.capitalize()}: no worker took this run, even after it was queued again."
# Why a run failed when its task could not be handed to the broker at all.
NOT_QUEUED_ERROR = f"{QUEUE_UNAVAILABLE.capitalize()}: the run was not started."
# How many workers may claim a run before it is failed: a run that kills its worker every
# time (out of memory on one file, say) is not handed round for ever.
MAX_TRIES = 3


def worker_name() -> str:
    """host:pid of this process and a token of one claim, recorded on the run it claims:
    two claims in one process (two threads, a redelivery) are two holders."""
    return f"{socket.gethostname()[:150]}:{os.getpid()}/{uuid.uuid4().hex[:12]}"


def _iso(moment: datetime | None) -> str | None:
    return moment.isoformat() if moment else None


def claim(model: type[DatasetRun], run_id) -> DatasetRun | None:
    """Claim the run for this process: the row, now running with this claim as its worker
    (`row.worker`, what renew and finish are given) and a fresh lease, or None when another
    live worker holds it or it has ended."""
    now, me = timezone.now(), worker_name()
    takeable = Q(status=Status.PENDING) | Q(status=Status.RUNNING, heartbeat_at__lt=now - run_lease())
    claimed = model.objects.filter(takeable, uuid=run_id, tries__lt=MAX_TRIES).update(
        status=Status.RUNNING, worker=me, claimed_at=now, heartbeat_at=now, tries=F("tries") + 1, progress=0
    )
    return model.objects.select_related("study").get(uuid=run_id) if claimed else None


def renew(model: type[DatasetRun], pk: int, *, worker: str, progress: int | None = None) -> bool:
    """Renew the lease of a run this worker holds (the heartbeat), with its progress."""
    fields = {"heartbeat_at": timezone.now()}
    if progress is not None:
        fields["progress"] = progress
    return bool(model.objects.filter(pk=pk, status=Status.RUNNING, worker=worker).update(**fields))


def finish(model: type[DatasetRun], pk: int, *, worker: str, status: str, **fields) -> bool:
    """Record the outcome of a run this worker still holds; False (nothing recorded) when
    the run was taken over meanwhile."""
    return bool(
        model.objects.filter(pk=pk, status=Status.RUNNING, worker=worker).update(
            status=status, finished_at=timezone.now(), **fields
        )
    )


def fail_run(model: type[DatasetRun], pk: int, error: str, *, only=(Status.RUNNING,), expired_only=False) -> bool:
    """Fail the run if it is in one of the statuses `only` (and, with `expired_only`, its
    lease ran out: no live worker holds it)."""
    rows = model.objects.filter(pk=pk, status__in=only)
    if expired_only:
        rows = rows.filter(Q(heartbeat_at__isnull=True) | Q(heartbeat_at__lt=timezone.now() - run_lease()))
    return bool(rows.update(status=Status.FAILED, error=error, finished_at=timezone.now(), worker=""))


def requeue_lost(model: type[DatasetRun], pk: int, *, error: str, enqueue_run: Callable[[], object]) -> bool:
    """The worker running the run died (its pool process was killed: the worker's main
    process sees it at once; or its lease ran out): put it back to pending and queue it
    again for another worker to take over, or fail it with `error` after MAX_TRIES claims.
    Returns whether anything changed."""
    now = timezone.now()
    back = model.objects.filter(pk=pk, status=Status.RUNNING, tries__lt=MAX_TRIES).update(
        status=Status.PENDING, worker="", heartbeat_at=None, queued_at=now, requeued=False
    )
    if not back:
        return fail_run(model, pk, error)
    try:
        enqueue_run()
    except BrokerError:
        fail_run(model, pk, UNCLAIMED_ERROR, only=(Status.PENDING,))
    return True


def recover(row: DatasetRun, *, error: str, enqueue_run: Callable[[], object]) -> bool:
    """What the periodic sweep does with one unfinished run (see the module docstring);
    returns whether its state changed."""
    model, now = type(row), timezone.now()
    if row.status == Status.RUNNING:
        if row.heartbeat_at and row.heartbeat_at >= now - run_lease():
            return False  # alive
        return requeue_lost(model, row.pk, error=error, enqueue_run=enqueue_run)
    if row.status != Status.PENDING or now - (row.queued_at or row.created_at) < claim_timeout():
        return False
    if row.requeued:
        return fail_run(model, row.pk, UNCLAIMED_ERROR, only=(Status.PENDING,))
    if not model.objects.filter(pk=row.pk, status=Status.PENDING, requeued=False).update(requeued=True, queued_at=now):
        return False
    try:
        enqueue_run()
    except BrokerError:
        fail_run(model, row.pk, UNCLAIMED_ERROR, only=(Status.PENDING,))
    return True


def status_now(row: DatasetRun, *, error: str) -> DatasetRun:
    """The run as a poll should report it. With a broker a poll only reads (the sweep and
    the workers decide); without one, a running run whose lease ran out has lost the
    process that ran it and nobody else will: it is failed now."""
    if (
        row.status == Status.PENDING
        and row.requeued
        and timezone.now() - (row.queued_at or row.created_at) >= claim_timeout()
        and fail_run(type(row), row.pk, UNCLAIMED_ERROR, only=(Status.PENDING,))
    ):
        row.refresh_from_db()  # queued twice and no worker came: the sweep would fail it next
    if (
        settings.CELERY_TASK_ALWAYS_EAGER
        and row.status == Status.RUNNING
        and (row.heartbeat_at is None or row.heartbeat_at < timezone.now() - run_lease())
        and fail_run(type(row), row.pk, error, expired_only=True)
    ):
        row.refresh_from_db()
    return row


def unfinished(model: type[DatasetRun]):
    return model.objects.select_related("study").filter(status__in=(Status.PENDING, Status.RUNNING)).order_by("pk")


def worker_died_error(what: str, advice: str) -> str:
    """The error of a run whose worker died: "Stopped: the worker died ..." and what to do."""
    return f"{WORKER_DIED.capitalize()} before this {what} finished. {advice}"


def reread(row: DatasetRun) -> DatasetRun:
    """The run's row as stored now, its study kept: refresh_from_db drops the cached study,
    and the status built next would read it again (one query instead of two)."""
    study = row.study
    row.refresh_from_db()
    row.study = study
    return row


def run_prefix(row: DatasetRun) -> str:
    """The run's folder in its storage: <study slug>/<run id>."""
    return f"{row.study.slug}/{row.uuid}"
