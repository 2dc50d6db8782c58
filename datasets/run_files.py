"""The run state of dataset imports and exports, kept in files (one folder per run), for
both kinds of run alike: datasets.export_runs and datasets.import_runs.

    <root>/<study slug>/<run id>/status.json   what the API answers (a dataclass as JSON)
    <root>/<study slug>/<run id>/claim.lock    held by the worker running it

The status file is replaced whole (a poll never reads half of it), and a worker holds a
kernel file lock on claim.lock while it runs, which dies with its process: a "running" run
whose lock nobody holds has lost its worker.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

from django.utils import timezone
from kombu.exceptions import OperationalError as BrokerError

from core.background import QUEUE_UNAVAILABLE, WORKER_DIED, claim_timeout

# Why a run failed when no worker took it, even once queued again (RUN_CLAIM_TIMEOUT).
UNCLAIMED_ERROR = f"{QUEUE_UNAVAILABLE.capitalize()}: no worker took this run, even after it was queued again."
# Why a run failed when its task could not be handed to the broker at all.
NOT_QUEUED_ERROR = f"{QUEUE_UNAVAILABLE.capitalize()}: the run was not started."

Status = TypeVar("Status")


def run_folder(root: Path, *, study_slug: str, run_id: str) -> Path:
    """The folder of one run: <root>/<study slug>/<run id>/ (ValueError if the id is not a UUID)."""
    return root / study_slug / str(uuid.UUID(str(run_id)))


def write_status_file(folder: Path, status: Any) -> None:
    """A run's status (a dataclass) as folder/status.json, replaced whole: a poll never
    reads a half-written file."""
    folder.mkdir(parents=True, exist_ok=True)
    temporary = folder / "status.json.tmp"
    temporary.write_text(json.dumps(asdict(status), indent=2, sort_keys=True), encoding="utf-8")
    os.replace(temporary, folder / "status.json")


def read_status_file(folder: Path, kind: type[Status]) -> Status:
    return kind(**json.loads((folder / "status.json").read_text(encoding="utf-8")))


@contextmanager
def claim_run(folder: Path) -> Iterator[bool]:
    """Claim the run in `folder`: yields True for the one process that holds it, False
    for any other. An exclusive flock on claim.lock, not a status check, because the
    claim must be atomic (two deliveries reading "pending" at once must not both run)
    and must end when its holder dies: the kernel drops a dead process's locks, whereas
    an O_EXCL lock file or a "running" status would stay behind and block the export
    for good. EXPORTS_DIR and IMPORTS_DIR must therefore be on a file system with working
    POSIX locks (a local disk, or NFSv4), shared by the workers as the API already requires."""
    fd = os.open(folder / "claim.lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
        else:
            yield True
    finally:
        os.close(fd)  # releases the lock


def clear_partial(folder: Path) -> None:
    """Remove what an unfinished run leaves in its folder (an export's dataset.partial/ and
    half-written zip): a run that failed or was abandoned keeps only its status."""
    shutil.rmtree(folder / "dataset.partial", ignore_errors=True)
    (folder / "dataset.zip.tmp").unlink(missing_ok=True)


def fail_run(folder: Path, read: Callable[[], Any], write: Callable[[Any], None], error: str, *, only=("running",)):
    """Record the run in `folder` as failed with `error` if it is in one of the statuses
    `only` and no live worker holds it (its claim lock is free); its partial files go.
    Returns the status as recorded."""
    with claim_run(folder) as claimed:
        status = read()
        if not claimed or status.status not in only:
            return status  # a worker holds it, or it ended meanwhile
        status.status = "failed"
        status.error = error
        status.finished_at = timezone.now().isoformat()
        write(status)
        clear_partial(folder)
        return status


def fail_if_abandoned(
    folder: Path,
    read: Callable[[], Any],
    write: Callable[[Any], None],
    error: str,
    *,
    requeue: Callable[[Any], object] | None = None,
) -> Any:
    """The recorded status of the run in `folder`, except that:

    - a "running" run whose claim nobody holds has lost its worker: a worker process killed
      mid-run (out of memory, say) has its message acknowledged by Celery, so no delivery
      would ever finish or fail it. It is recorded as failed with `error`, so a poll does
      not wait forever, and its partial files are removed.
    - a "pending" run that no worker claimed within RUN_CLAIM_TIMEOUT is handed to
      `requeue(status)` once (when given: the periodic sweep passes the task); the second
      time, it is recorded as failed with "the task queue is unavailable"."""
    status = read()
    if status.status == "pending":
        return _unclaimed(folder, status, read, write, requeue)
    if status.status == "failed" and (folder / "dataset.partial").exists():
        with claim_run(folder) as claimed:
            if claimed:  # nobody is writing it: what a dead worker left
                clear_partial(folder)
        return status
    if status.status != "running":
        return status
    return fail_run(folder, read, write, error)


def _unclaimed(folder: Path, status: Any, read, write, requeue) -> Any:
    waited = timezone.now() - datetime.fromisoformat(status.queued_at or status.created_at)
    if waited < claim_timeout():
        return status
    if not status.requeued:
        if requeue is None:
            return status  # the sweep queues it again; a poll only reads
        with claim_run(folder) as claimed:
            status = read()
            if not claimed or status.status != "pending" or status.requeued:
                return status
            status.requeued = True
            status.queued_at = timezone.now().isoformat()
            write(status)
        try:
            requeue(status)
        except BrokerError:
            return fail_run(folder, read, write, UNCLAIMED_ERROR, only=("pending",))
        return status
    return fail_run(folder, read, write, UNCLAIMED_ERROR, only=("pending",))


def worker_died_error(what: str, advice: str) -> str:
    """The error of a run whose worker died: "Stopped: the worker died ..." and what to do."""
    return f"{WORKER_DIED.capitalize()} before this {what} finished. {advice}"


def expired_runs(root: Path, *, older_than: timedelta) -> Iterator[Path]:
    """The run folders under <root>/<study>/ of runs that ended (done or failed) more than
    `older_than` ago, or, for a run whose status cannot be read, whose folder was last
    changed that long ago. Pending and running runs are never expired."""
    cutoff = timezone.now() - older_than
    for folder in sorted(root.glob("*/*/")) if root.is_dir() else []:
        status_file = folder / "status.json"
        try:
            status = json.loads(status_file.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            changed = datetime.fromtimestamp(folder.stat().st_mtime, tz=cutoff.tzinfo)
            if changed < cutoff:
                yield folder
            continue
        ended = status.get("finished_at") or status.get("created_at")
        if status.get("status") in ("done", "failed") and ended and datetime.fromisoformat(ended) < cutoff:
            yield folder


def remove_run_folder(folder: Path) -> bool:
    """Remove one run's folder, unless a worker holds it (its claim lock is taken)."""
    if (folder / "claim.lock").exists():
        with claim_run(folder) as claimed:
            if not claimed:
                return False
            shutil.rmtree(folder, ignore_errors=True)
            return True
    shutil.rmtree(folder, ignore_errors=True)
    return True


def statuses_under(root: Path, status_now: Callable[[Path], Status]) -> list[Status]:
    """The status of every run under <root> (one study's folder), newest first."""
    found = [status_now(p.parent) for p in root.glob("*/status.json")] if root.is_dir() else []
    return sorted(found, key=lambda s: (s.created_at, s.id), reverse=True)
