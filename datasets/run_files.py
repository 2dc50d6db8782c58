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
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import Any, TypeVar

from django.utils import timezone

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


def fail_if_abandoned(folder: Path, read: Callable[[], Any], write: Callable[[Any], None], error: str) -> Any:
    """The recorded status of the run in `folder`, except that a "running" run whose claim
    nobody holds has lost its worker: a worker process killed mid-run (out of memory, say)
    has its message acknowledged by Celery, so no delivery would ever finish or fail it. It
    is recorded as failed with `error`, so a poll does not wait forever."""
    status = read()
    if status.status != "running":
        return status
    with claim_run(folder) as claimed:
        if not claimed:
            return status  # a worker holds it: it is running
        status = read()
        if status.status == "running":
            status.status = "failed"
            status.error = error
            status.finished_at = timezone.now().isoformat()
            write(status)
        return status


def statuses_under(root: Path, status_now: Callable[[Path], Status]) -> list[Status]:
    """The status of every run under <root> (one study's folder), newest first."""
    found = [status_now(p.parent) for p in root.glob("*/status.json")] if root.is_dir() else []
    return sorted(found, key=lambda s: (s.created_at, s.id), reverse=True)
