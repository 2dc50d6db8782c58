"""Dataset exports started over the API or from the admin: one row per run
(datasets.models.ExportRun, its state as datasets.run_state keeps it), and its files in the
"exports" storage (core.storage):

    <study slug>/<export id>/dataset/       the dataset folder, once done
    <study slug>/<export id>/dataset.zip    what the download serves

`start_export` records a pending run and hands its id to the Celery task
`run_api_export_task` (passed in by the caller as `enqueue`; run in-process when no
broker is configured); `run_export` is what the task runs. Tasks are acknowledged
late, so a message can be delivered again: while the first delivery runs (the
broker's visibility timeout passed) or after the worker running it died.
`run_export` is written for both; see its docstring.
"""

from __future__ import annotations

import shutil
import tempfile
import uuid
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.http import Http404
from django.utils import timezone

from annotate.models import Study
from core import storage
from core.background import enqueue_or_fail, heartbeat
from core.exceptions import ApplicationError, InvalidStateError
from datasets import run_state
from datasets.models import ExportRun
from datasets.run_state import NOT_QUEUED_ERROR, Status, worker_died_error

STATUSES = ("pending", "running", "done", "failed")
FORMATS = ("jsonl", "csv", "parquet")  # datasets.exporting.FORMATS, without importing it here
PHASES = ("initial", "post_discussion", "all")
# A fixed time for every zip entry: the same dataset folder always gives the same archive.
ZIP_TIME = (1980, 1, 1, 0, 0, 0)
ARCHIVE = "dataset.zip"


@dataclass
class ExportStatus:
    """What the API and pages show of a run (the row, with its times as ISO text)."""

    id: str
    study: str
    status: str
    formats: list[str]
    phase: str
    include_calibration: bool
    include_restricted: bool
    requested_by: str
    created_at: str
    finished_at: str | None = None
    error: str = ""
    counts: dict[str, int] = field(default_factory=dict)
    withheld_sources: list[str] = field(default_factory=list)
    queued_at: str | None = None  # when it was last handed to the broker
    requeued: bool = False  # queued a second time: no worker took it (RUN_CLAIM_TIMEOUT)
    progress: int = 0
    worker: str = ""


def _status(row: ExportRun) -> ExportStatus:
    return ExportStatus(
        id=str(row.uuid),
        study=row.study.slug,
        status=row.status,
        formats=list(row.formats),
        phase=row.phase,
        include_calibration=row.include_calibration,
        include_restricted=row.include_restricted,
        requested_by=row.requested_by,
        created_at=row.created_at.isoformat(),
        finished_at=run_state._iso(row.finished_at),
        error=row.error,
        counts=dict(row.counts),
        withheld_sources=list(row.withheld_sources),
        queued_at=run_state._iso(row.queued_at),
        requeued=row.requeued,
        progress=row.progress,
        worker=row.worker,
    )


def archive_name(*, study_slug: str, export_id) -> str:
    """The name of a run's zip in the exports storage (ValueError if the id is not a UUID)."""
    return f"{study_slug}/{uuid.UUID(str(export_id))}/{ARCHIVE}"


def _row(*, study: Study, export_id) -> ExportRun:
    try:
        return ExportRun.objects.select_related("study").get(study=study, uuid=uuid.UUID(str(export_id)))
    except (ValueError, ExportRun.DoesNotExist):
        raise Http404("No such export.") from None


def start_export(
    *,
    study: Study,
    requested_by,
    formats: list[str],
    phase: str = "all",
    include_calibration: bool = False,
    include_restricted: bool = False,
    enqueue: Callable[..., Any],
) -> ExportStatus:
    """Record a new export and hand it to `enqueue(study_slug=..., export_id=...)`:
    the callers pass the Celery task's `delay` (datasets.tasks.run_api_export_task), so
    this module never imports the task that imports it. Returns the status now."""
    formats = [f for f in FORMATS if f in formats]
    if not formats:
        raise ApplicationError(f"choose at least one format of {', '.join(FORMATS)}")
    if phase not in PHASES:
        raise ApplicationError(f"phase must be one of {', '.join(PHASES)}")
    row = ExportRun.objects.create(
        study=study,
        formats=formats,
        phase=phase,
        include_calibration=include_calibration,
        include_restricted=include_restricted,
        requested_by=requested_by.get_username(),
        queued_at=timezone.now(),
    )
    # Runs in-process when no broker is configured (the returned status is then final);
    # with a broker a worker runs it and clients poll. The row is committed already (no
    # transaction is open around this in a request: ATOMIC_REQUESTS is off), so the worker
    # finds it. A broker that cannot be reached fails the run and answers 503.
    enqueue_or_fail(
        enqueue,
        study_slug=study.slug,
        export_id=str(row.uuid),
        fail=lambda message: run_state.fail_run(ExportRun, row.pk, NOT_QUEUED_ERROR, only=(Status.PENDING,)),
    )
    return _status(run_state.reread(row))


def retry_export(*, study: Study, export_id, requested_by, enqueue: Callable[..., Any]) -> ExportStatus:
    """Start a new export with the options of a failed one (its worker died, the queue was
    down): the "retry" the page and API offer. An export that is not failed is a 409."""
    old = get_export(study=study, export_id=export_id)
    if old.status != "failed":
        raise InvalidStateError(f"The export is {old.status}; only a failed export can be retried.")
    return start_export(
        study=study,
        requested_by=requested_by,
        formats=old.formats,
        phase=old.phase,
        include_calibration=old.include_calibration,
        include_restricted=old.include_restricted,
        enqueue=enqueue,
    )


class _LostClaim(Exception):
    """The run was taken over by another worker while this one ran it."""


def run_export(*, study_slug: str, export_id: str) -> ExportStatus:
    """Write the dataset folder and its zip for a recorded export, recording the outcome.

    Safe to deliver more than once, on any machine: a delivery that cannot claim the run
    (a live worker holds it, or it ended) changes nothing and returns the status. One that
    finds it running with its lease run out (the worker died) takes it over and starts the
    export again from nothing. The folder and zip are built in a temporary folder of this
    machine and stored only while this worker still holds the run, the zip last: a stored
    dataset.zip is always complete, and the run is done only once it is stored."""
    from datasets.exporting import export_dataset  # the export lives in its own package

    row = run_state.claim(ExportRun, export_id)
    if row is None:
        return _status(ExportRun.objects.select_related("study").get(uuid=export_id))
    me, files = row.worker, storage.exports_storage()
    stored = [0]
    with (
        heartbeat(lambda: run_state.renew(ExportRun, row.pk, worker=me, progress=stored[0])),
        tempfile.TemporaryDirectory(prefix="export-") as scratch,
    ):
        folder = Path(scratch) / "dataset"
        try:
            result = export_dataset(
                study=row.study,
                out_dir=folder,
                formats=row.formats,
                phase=row.phase,
                include_calibration=row.include_calibration,
                include_restricted=row.include_restricted,
            )
            _zip(folder, Path(scratch) / ARCHIVE)
            if not run_state.renew(ExportRun, row.pk, worker=me):
                raise _LostClaim
            prefix = run_state.run_prefix(row)
            storage.delete_tree(files, prefix)  # what an earlier, taken-over delivery stored
            for path in sorted(p for p in folder.rglob("*") if p.is_file()):
                storage.save_file(files, f"{prefix}/dataset/{path.relative_to(folder).as_posix()}", path)
                stored[0] += 1
            storage.save_file(files, f"{prefix}/{ARCHIVE}", Path(scratch) / ARCHIVE)
        except _LostClaim:
            pass
        except ApplicationError as exc:
            run_state.finish(ExportRun, row.pk, worker=me, status=Status.FAILED, error=exc.message)
        except Exception:
            # Recorded so a poll does not wait forever, then raised: a bug must be seen.
            run_state.finish(
                ExportRun, row.pk, worker=me, status=Status.FAILED, error="The export failed unexpectedly."
            )
            raise
        else:
            run_state.finish(
                ExportRun,
                row.pk,
                worker=me,
                status=Status.DONE,
                counts=dict(result.counts),
                withheld_sources=list(result.withheld_sources),
                progress=stored[0] + 1,
            )
    return _status(run_state.reread(row))


def _zip(folder: Path, archive: Path) -> None:
    with zipfile.ZipFile(archive, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for path in sorted(p for p in folder.rglob("*") if p.is_file()):
            info = zipfile.ZipInfo(str(Path("dataset") / path.relative_to(folder)), date_time=ZIP_TIME)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            with path.open("rb") as source, zf.open(info, "w", force_zip64=True) as target:
                shutil.copyfileobj(source, target, 1 << 20)  # streamed: tables can be large


WORKER_DIED_ERROR = worker_died_error("export", "Retry it to start a new export with the same options.")


def _enqueue_again(enqueue: Callable[..., Any], row: ExportRun) -> Callable[[], object]:
    return lambda: enqueue(study_slug=row.study.slug, export_id=str(row.uuid))


def fail_lost_export(*, study_slug: str, export_id: str, enqueue: Callable[..., Any] | None = None) -> ExportStatus:
    """The worker process running the export died (WorkerLostError, seen at once by the
    worker's main process): queue it again for another worker to take over (with
    `enqueue`), or fail it after run_state.MAX_TRIES claims or without `enqueue`."""
    row = ExportRun.objects.select_related("study").get(uuid=export_id)
    if enqueue is None:
        run_state.fail_run(ExportRun, row.pk, WORKER_DIED_ERROR, only=(Status.PENDING, Status.RUNNING))
    else:
        run_state.requeue_lost(ExportRun, row.pk, error=WORKER_DIED_ERROR, enqueue_run=_enqueue_again(enqueue, row))
    return _status(run_state.reread(row))


def sweep_exports(*, enqueue: Callable[..., Any]) -> list[ExportStatus]:
    """Look at every unfinished export (the periodic sweep): queue again those whose
    worker died (another takes them over) and those no worker claimed within
    RUN_CLAIM_TIMEOUT, failing them when that was tried already. Returns the statuses
    that changed."""
    changed = []
    for row in run_state.unfinished(ExportRun):
        if run_state.recover(row, error=WORKER_DIED_ERROR, enqueue_run=_enqueue_again(enqueue, row)):
            changed.append(_status(run_state.reread(row)))
    return changed


def get_export(*, study: Study, export_id) -> ExportStatus:
    return _status(run_state.status_now(_row(study=study, export_id=export_id), error=WORKER_DIED_ERROR))


def list_exports(*, study: Study) -> list[ExportStatus]:
    """The study's exports, newest first."""
    rows = ExportRun.objects.select_related("study").filter(study=study).order_by("-created_at", "-id")
    return [_status(run_state.status_now(row, error=WORKER_DIED_ERROR)) for row in rows]


def export_archive(*, study: Study, export_id):
    """The zip of a finished export, open for a streamed download; 409 while it is not done."""
    status = get_export(study=study, export_id=export_id)
    name = archive_name(study_slug=study.slug, export_id=status.id)
    files = storage.exports_storage()
    if status.status != "done" or not files.exists(name):
        raise InvalidStateError(f"The export is {status.status}; download it once it is done.")
    return storage.open_for_download(files, name)
