"""Imports of JSON Lines over the API and from the study pages: upload a file,
then poll its run.

The import itself is datasets.importing.import_records, the same all-or-nothing import as
`manage.py import_jsonl`, restricted to the study the file is imported into. This module,
like datasets.export_runs, gives each run a row (datasets.models.ImportRun, its state as
datasets.run_state keeps it) and keeps the file in the "imports" storage (core.storage):

    <study slug>/<import id>/upload.jsonl   the file as received

The upload, as Django received it (in memory up to FILE_UPLOAD_MAX_MEMORY_SIZE, 2.5 MiB,
on disk beyond), is refused past MAX_IMPORT_BYTES by its size before anything is stored,
and stored whole (core.storage.save_upload): a worker on another machine reads it from
the storage.
"""

from __future__ import annotations

import io
import os
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.core.files import File
from django.db import transaction
from django.http import Http404
from django.utils import timezone

from annotate.models import Study
from core import storage
from core.background import enqueue_or_fail, heartbeat
from core.exceptions import ApplicationError, InvalidStateError
from datasets import run_state
from datasets.importing import ImportLineError, import_records
from datasets.models import ImportRun
from datasets.run_state import NOT_QUEUED_ERROR, Status, worker_died_error

STATUSES = ("pending", "running", "done", "failed")
UPLOAD = "upload.jsonl"
SETTINGS_CHANGED = "settings_changed"  # ImportRun.counts' key for the study settings changed


@dataclass
class ImportStatus:
    """What the API and pages show of a run (the row, with its times as ISO text)."""

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
    # Every study setting the file's study line changed: {"study", "field", "before", "after"}.
    settings_changed: list[dict[str, str]] = field(default_factory=list)
    queued_at: str | None = None  # when it was last handed to the broker
    requeued: bool = False  # queued a second time: no worker took it (RUN_CLAIM_TIMEOUT)
    progress: int = 0  # lines read so far
    worker: str = ""


def _status(row: ImportRun) -> ImportStatus:
    return ImportStatus(
        id=str(row.uuid),
        study=row.study.slug,
        status=row.status,
        file_name=row.file_name,
        size_bytes=row.size_bytes,
        requested_by=row.requested_by,
        created_at=row.created_at.isoformat(),
        finished_at=run_state._iso(row.finished_at),
        error=row.error,
        error_line=row.error_line,
        error_field=row.error_field or None,
        counts={k: v for k, v in row.counts.items() if k != SETTINGS_CHANGED},
        settings_changed=list(row.counts.get(SETTINGS_CHANGED, [])),
        queued_at=run_state._iso(row.queued_at),
        requeued=row.requeued,
        progress=row.progress,
        worker=row.worker,
    )


class ImportTooLargeError(ApplicationError):
    http_status = 413


def max_import_bytes() -> int:
    return int(getattr(settings, "MAX_IMPORT_BYTES", 200 * 1024 * 1024))


def upload_name(*, study_slug: str, import_id) -> str:
    """The name of a run's file in the imports storage (ValueError if the id is not a UUID)."""
    return f"{study_slug}/{uuid.UUID(str(import_id))}/{UPLOAD}"


def _too_large(limit: int):
    raise ImportTooLargeError(
        f"The file is larger than the import limit of {limit:,} bytes (MAX_IMPORT_BYTES). "
        "Split it into several files: each import is all or nothing, and records are idempotent by key."
    )


def _row(*, study: Study, import_id) -> ImportRun:
    try:
        return ImportRun.objects.select_related("study").get(study=study, uuid=uuid.UUID(str(import_id)))
    except (ValueError, ImportRun.DoesNotExist):
        raise Http404("No such import.") from None


def start_import(
    *, study: Study, requested_by, upload: File, file_name: str, enqueue: Callable[..., Any]
) -> ImportStatus:
    """Store the uploaded file (`upload`: the request's UploadedFile, or any Django File) and
    hand the run to `enqueue(study_slug=..., import_id=...)` (the Celery task's delay: in
    process without a broker, so the status returned is then final). A file over
    MAX_IMPORT_BYTES is refused (413) and nothing is kept."""
    import_id = uuid.uuid4()
    name = upload_name(study_slug=study.slug, import_id=import_id)
    size = storage.save_upload(storage.imports_storage(), name, upload, limit=max_import_bytes(), too_large=_too_large)
    if size == 0:
        raise ApplicationError("The file is empty.")
    row = ImportRun.objects.create(
        uuid=import_id,
        study=study,
        file_name=os.path.basename(file_name or UPLOAD)[:200],
        size_bytes=size,
        requested_by=requested_by.get_username(),
        queued_at=timezone.now(),
    )
    _enqueue(row, enqueue)
    return _status(run_state.reread(row))


def _enqueue(row: ImportRun, enqueue: Callable[..., Any]) -> None:
    """Hand the run to the broker; one that cannot be reached fails it (503)."""
    enqueue_or_fail(
        enqueue,
        study_slug=row.study.slug,
        import_id=str(row.uuid),
        fail=lambda message: run_state.fail_run(ImportRun, row.pk, NOT_QUEUED_ERROR, only=(Status.PENDING,)),
    )


def retry_import(*, study: Study, import_id, enqueue: Callable[..., Any]) -> ImportStatus:
    """Run a failed import again from the file as uploaded (kept for FILE_RETENTION_DAYS):
    the "retry" the page and API offer after a worker died or the queue was down. The
    import is all or nothing, so a failed run left nothing to undo. 409 unless failed."""
    row = _row(study=study, import_id=import_id)
    if row.status != Status.FAILED:
        raise InvalidStateError(f"The import is {row.status}; only a failed import can be retried.")
    if not storage.imports_storage().exists(upload_name(study_slug=study.slug, import_id=row.uuid)):
        raise InvalidStateError("The uploaded file is no longer kept (FILE_RETENTION_DAYS); upload it again.")
    reset = ImportRun.objects.filter(pk=row.pk, status=Status.FAILED).update(
        status=Status.PENDING,
        error="",
        error_line=None,
        error_field="",
        finished_at=None,
        requeued=False,
        queued_at=timezone.now(),
        tries=0,
        worker="",
        heartbeat_at=None,
        progress=0,
    )
    if not reset:  # retried twice at once: the other request won
        row.refresh_from_db()
        raise InvalidStateError(f"The import is {row.status}; only a failed import can be retried.")
    _enqueue(row, enqueue)
    return _status(run_state.reread(row))


class _LostClaim(Exception):
    """The run was taken over by another worker while this one ran it."""


def _counted_lines(handle, counter: list[int]):
    for line in handle:
        counter[0] += 1
        yield line


def run_import(*, study_slug: str, import_id: str) -> ImportStatus:
    """Run a recorded import: all of the file or none of it, the outcome recorded on its
    row. Safe to deliver twice, on any machine: a delivery that cannot claim the run (a
    live worker holds it, or it ended) changes nothing. The import and the "done" of its
    row are one transaction, and "done" is written only while this worker still holds the
    run: a worker that died, or whose run was taken over, leaves nothing behind, and the
    one that takes it over imports the file from the start (no duplicate rows)."""
    row = run_state.claim(ImportRun, import_id)
    if row is None:
        return _status(ImportRun.objects.select_related("study").get(uuid=import_id))
    return _run_claimed(row)


def _run_claimed(row: ImportRun) -> ImportStatus:
    """Run the import of a run this worker claimed (`row.worker` is its claim)."""
    study_slug, me, lines = row.study.slug, row.worker, [0]
    fail = {}
    with heartbeat(lambda: run_state.renew(ImportRun, row.pk, worker=me, progress=lines[0])):
        try:
            with (
                storage.local_copy(storage.imports_storage(), run_state.run_prefix(row) + "/" + UPLOAD) as path,
                path.open("rb") as raw,
                io.TextIOWrapper(raw, encoding="utf-8", errors="strict", newline="") as handle,
                transaction.atomic(),
            ):
                result = import_records(lines=_counted_lines(handle, lines), only_study=study_slug)
                counts = {
                    kind: {
                        "created": result.created[kind],
                        "updated": result.updated[kind],
                        "unchanged": result.unchanged[kind],
                    }
                    for kind in ("source", "summary", "claim", "finding")
                }
                # Kept beside the counts: the API and the page list them (ImportStatus).
                counts[SETTINGS_CHANGED] = result.settings_changed()
                if not run_state.finish(
                    ImportRun, row.pk, worker=me, status=Status.DONE, counts=counts, progress=lines[0]
                ):
                    raise _LostClaim  # rolls the import back: the worker that took it over imports it
        except _LostClaim:
            pass
        except ImportLineError as exc:
            fail = {"error": exc.message, "error_line": exc.line, "error_field": exc.field or ""}
        except ApplicationError as exc:
            fail = {"error": exc.message}
        except UnicodeDecodeError as exc:
            fail = {"error": f"The file is not UTF-8 text (byte {exc.start})."}
        except FileNotFoundError:
            fail = {"error": "The uploaded file is no longer kept (FILE_RETENTION_DAYS); upload it again."}
        except Exception:
            error = "The import failed unexpectedly; nothing was imported."
            run_state.finish(ImportRun, row.pk, worker=me, status=Status.FAILED, error=error)
            raise
        if fail:
            run_state.finish(ImportRun, row.pk, worker=me, status=Status.FAILED, progress=lines[0], **fail)
    return _status(run_state.reread(row))


WORKER_DIED_ERROR = worker_died_error("import", "Nothing was imported; retry it to import the file again.")


def _enqueue_again(enqueue: Callable[..., Any], row: ImportRun) -> Callable[[], object]:
    return lambda: enqueue(study_slug=row.study.slug, import_id=str(row.uuid))


def fail_lost_import(*, study_slug: str, import_id: str, enqueue: Callable[..., Any] | None = None) -> ImportStatus:
    """The worker process running the import died (WorkerLostError): as
    datasets.export_runs.fail_lost_export."""
    row = ImportRun.objects.select_related("study").get(uuid=import_id)
    if enqueue is None:
        run_state.fail_run(ImportRun, row.pk, WORKER_DIED_ERROR, only=(Status.PENDING, Status.RUNNING))
    else:
        run_state.requeue_lost(ImportRun, row.pk, error=WORKER_DIED_ERROR, enqueue_run=_enqueue_again(enqueue, row))
    return _status(run_state.reread(row))


def sweep_imports(*, enqueue: Callable[..., Any]) -> list[ImportStatus]:
    """As datasets.export_runs.sweep_exports, for imports."""
    changed = []
    for row in run_state.unfinished(ImportRun):
        if run_state.recover(row, error=WORKER_DIED_ERROR, enqueue_run=_enqueue_again(enqueue, row)):
            changed.append(_status(run_state.reread(row)))
    return changed


def get_import(*, study: Study, import_id) -> ImportStatus:
    return _status(run_state.status_now(_row(study=study, import_id=import_id), error=WORKER_DIED_ERROR))


def list_imports(*, study: Study) -> list[ImportStatus]:
    """The study's imports, newest first."""
    rows = ImportRun.objects.select_related("study").filter(study=study).order_by("-created_at", "-id")
    return [_status(run_state.status_now(row, error=WORKER_DIED_ERROR)) for row in rows]
