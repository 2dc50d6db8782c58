"""Imports of JSON Lines over the API and from the study pages (issue 19): upload a file,
then poll its run.

The import itself is datasets.importing.import_records, the same all-or-nothing import as
`manage.py import_jsonl`, restricted to the study the file is imported into. This module,
like datasets.export_runs, gives each run an id, a folder and a status file
(datasets.run_files):

    <IMPORTS_DIR>/<study slug>/<import id>/upload.jsonl   the file as received
    <IMPORTS_DIR>/<study slug>/<import id>/status.json    what the API answers
    <IMPORTS_DIR>/<study slug>/<import id>/claim.lock     held by the worker running it

IMPORTS_DIR is the setting of that name if there is one, else var/imports; with separate
Celery workers it must be shared with them (as EXPORTS_DIR is). The upload is streamed to
disk in blocks and refused past MAX_IMPORT_BYTES, so a web process never holds a whole file.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.conf import settings
from django.http import Http404
from django.utils import timezone

from annotate.models import Study
from core.background import enqueue_or_fail
from core.exceptions import ApplicationError, InvalidStateError
from datasets.run_files import (
    NOT_QUEUED_ERROR,
    claim_run,
    fail_if_abandoned,
    fail_run,
    read_status_file,
    run_folder,
    statuses_under,
    worker_died_error,
    write_status_file,
)

STATUSES = ("pending", "running", "done", "failed")
BLOCK = 1 << 20


@dataclass
class ImportStatus:
    id: str
    study: str
    status: str
    file_name: str
    size_bytes: int
    requested_by: str
    created_at: str
    finished_at: str | None = None
    error: str = ""
    error_line: int | None = None
    error_field: str | None = None
    # {"source": {"created": 3, "updated": 0, "unchanged": 1}, ...}
    counts: dict[str, dict[str, int]] = field(default_factory=dict)
    queued_at: str | None = None  # when it was last handed to the broker
    requeued: bool = False  # queued a second time: no worker took it (RUN_CLAIM_TIMEOUT)


class ImportTooLargeError(ApplicationError):
    http_status = 413


def imports_root() -> Path:
    return Path(getattr(settings, "IMPORTS_DIR", None) or Path(settings.BASE_DIR) / "var" / "imports")


def max_import_bytes() -> int:
    return int(getattr(settings, "MAX_IMPORT_BYTES", 200 * 1024 * 1024))


def import_folder(*, study_slug: str, import_id: str) -> Path:
    return run_folder(imports_root(), study_slug=study_slug, run_id=import_id)


def _write_status(status: ImportStatus) -> None:
    write_status_file(import_folder(study_slug=status.study, import_id=status.id), status)


def _read_status(folder: Path) -> ImportStatus:
    return read_status_file(folder, ImportStatus)


def start_import(
    *, study: Study, requested_by, chunks: Iterable[bytes], file_name: str, enqueue: Callable[..., Any]
) -> ImportStatus:
    """Store the uploaded file (`chunks`, e.g. an UploadedFile's .chunks()) and hand the run
    to `enqueue(study_slug=..., import_id=...)` (the Celery task's delay: in process without a
    broker, so the status returned is then final). A file over MAX_IMPORT_BYTES is refused
    (413) and nothing is kept."""
    import_id = str(uuid.uuid4())
    folder = import_folder(study_slug=study.slug, import_id=import_id)
    folder.mkdir(parents=True)
    limit, size = max_import_bytes(), 0
    try:
        with (folder / "upload.jsonl").open("wb") as out:
            for chunk in chunks:
                size += len(chunk)
                if size > limit:
                    raise ImportTooLargeError(
                        f"The file is larger than the import limit of {limit:,} bytes (MAX_IMPORT_BYTES). "
                        "Split it into several files: each import is all or nothing, and records are idempotent by key."
                    )
                out.write(chunk)
    except BaseException:
        (folder / "upload.jsonl").unlink(missing_ok=True)
        folder.rmdir()
        raise
    if size == 0:
        (folder / "upload.jsonl").unlink()
        folder.rmdir()
        raise ApplicationError("The file is empty.")
    status = ImportStatus(
        id=import_id,
        study=study.slug,
        status="pending",
        file_name=os.path.basename(file_name or "upload.jsonl")[:200],
        size_bytes=size,
        requested_by=requested_by.get_username(),
        created_at=timezone.now().isoformat(),
    )
    _write_status(status)
    _enqueue(status, enqueue)
    return _read_status(folder)


def _enqueue(status: ImportStatus, enqueue: Callable[..., Any]) -> None:
    """Hand the run to the broker; one that cannot be reached fails it (503)."""
    folder = import_folder(study_slug=status.study, import_id=status.id)
    enqueue_or_fail(
        enqueue,
        study_slug=status.study,
        import_id=status.id,
        fail=lambda message: fail_run(
            folder, lambda: _read_status(folder), _write_status, NOT_QUEUED_ERROR, only=("pending",)
        ),
    )


def retry_import(*, study: Study, import_id, enqueue: Callable[..., Any]) -> ImportStatus:
    """Run a failed import again from the file as uploaded (kept for FILE_RETENTION_DAYS):
    the "retry" the page and API offer after a worker died or the queue was down. The
    import is all or nothing, so a failed run left nothing to undo. 409 unless failed."""
    get_import(study=study, import_id=import_id)  # an unknown import is a 404, before any lock file
    folder = import_folder(study_slug=study.slug, import_id=import_id)
    with claim_run(folder) as claimed:
        status = get_import(study=study, import_id=import_id)
        if not claimed or status.status != "failed":
            raise InvalidStateError(f"The import is {status.status}; only a failed import can be retried.")
        if not (folder / "upload.jsonl").is_file():
            raise InvalidStateError("The uploaded file is no longer kept (FILE_RETENTION_DAYS); upload it again.")
        status.status, status.error, status.error_line, status.error_field = "pending", "", None, None
        status.finished_at, status.requeued, status.queued_at = None, False, timezone.now().isoformat()
        _write_status(status)
    _enqueue(status, enqueue)
    return _read_status(folder)


def _lines(path: Path):
    with path.open(encoding="utf-8", errors="strict", newline="") as handle:
        yield from handle


def run_import(*, study_slug: str, import_id: str) -> ImportStatus:
    """Run a recorded import: all of the file or none of it, the outcome recorded in its
    status. Safe to deliver twice: a delivery that finds the run claimed, done or failed
    changes nothing; the import is one transaction, so a worker that died mid-way left
    nothing behind and a redelivery runs it from the start."""
    from datasets.importing import ImportLineError, import_records

    folder = import_folder(study_slug=study_slug, import_id=import_id)
    with claim_run(folder) as claimed:
        status = _read_status(folder)
        if not claimed or status.status in ("done", "failed"):
            return status
        status.status = "running"
        _write_status(status)
        try:
            result = import_records(lines=_lines(folder / "upload.jsonl"), only_study=study_slug)
        except ImportLineError as exc:
            status.status, status.error = "failed", exc.message
            status.error_line, status.error_field = exc.line, exc.field
        except ApplicationError as exc:
            status.status, status.error = "failed", exc.message
        except UnicodeDecodeError as exc:
            status.status, status.error = "failed", f"The file is not UTF-8 text (byte {exc.start})."
        except Exception:
            status.status, status.error = "failed", "The import failed unexpectedly; nothing was imported."
            status.finished_at = timezone.now().isoformat()
            _write_status(status)
            raise
        else:
            status.status = "done"
            status.counts = {
                kind: {
                    "created": result.created[kind],
                    "updated": result.updated[kind],
                    "unchanged": result.unchanged[kind],
                }
                for kind in ("source", "summary", "claim", "finding")
            }
        status.finished_at = timezone.now().isoformat()
        _write_status(status)
        return status


WORKER_DIED_ERROR = worker_died_error("import", "Nothing was imported; retry it to import the file again.")


def _status_now(folder: Path, requeue: Callable[[ImportStatus], object] | None = None) -> ImportStatus:
    return fail_if_abandoned(folder, lambda: _read_status(folder), _write_status, WORKER_DIED_ERROR, requeue=requeue)


def fail_lost_import(*, study_slug: str, import_id: str) -> ImportStatus:
    """The worker process running the import died (WorkerLostError): record it now."""
    folder = import_folder(study_slug=study_slug, import_id=import_id)
    return fail_run(folder, lambda: _read_status(folder), _write_status, WORKER_DIED_ERROR, only=("pending", "running"))


def sweep_imports(*, enqueue: Callable[..., Any]) -> list[ImportStatus]:
    """As datasets.export_runs.sweep_exports, for imports."""
    changed = []
    root = imports_root()
    for path in sorted(root.glob("*/*/status.json")) if root.is_dir() else []:
        before = _read_status(path.parent)
        if before.status not in ("pending", "running"):
            continue
        after = _status_now(path.parent, requeue=lambda s: enqueue(study_slug=s.study, import_id=s.id))
        if (after.status, after.requeued) != (before.status, before.requeued):
            changed.append(after)
    return changed


def get_import(*, study: Study, import_id) -> ImportStatus:
    try:
        folder = import_folder(study_slug=study.slug, import_id=import_id)
    except ValueError:
        raise Http404("No such import.") from None
    if not (folder / "status.json").is_file():
        raise Http404("No such import.")
    return _status_now(folder)


def list_imports(*, study: Study) -> list[ImportStatus]:
    """The study's imports, newest first."""
    return statuses_under(imports_root() / study.slug, _status_now)
