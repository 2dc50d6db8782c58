"""Dataset export runs, started over the API or from the admin: start one, poll its
status, download it.

The export itself is datasets.exporting.export_dataset (the same function as
`manage.py export_dataset`); this module only gives each run an id, a folder and a
status file (datasets.run_files, shared with the import runs), so that the API is
stateless and needs no table:

    <EXPORTS_DIR>/<study slug>/<export id>/status.json   what the API answers
    <EXPORTS_DIR>/<study slug>/<export id>/claim.lock    held by the worker running it
    <EXPORTS_DIR>/<study slug>/<export id>/dataset/      the dataset folder, once done
    <EXPORTS_DIR>/<study slug>/<export id>/dataset.zip   what the download serves

EXPORTS_DIR is the setting of that name if there is one, else var/exports.

`start_export` records a pending run and hands its id to the Celery task
`run_api_export_task` (passed in by the caller as `enqueue`; run in-process when no
broker is configured); `run_export` is what the task runs. Tasks are acknowledged
late, so a message can be delivered again: while the first delivery runs (the
broker's visibility timeout passed) or after the worker running it died.
`run_export` is written for both; see its docstring.
"""

from __future__ import annotations

import os
import shutil
import uuid
import zipfile
from collections.abc import Callable
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
    clear_partial,
    fail_if_abandoned,
    fail_run,
    read_status_file,
    run_folder,
    statuses_under,
    worker_died_error,
    write_status_file,
)

STATUSES = ("pending", "running", "done", "failed")
FORMATS = ("jsonl", "csv", "parquet")  # datasets.exporting.FORMATS, without importing it here
PHASES = ("initial", "post_discussion", "all")
# A fixed time for every zip entry: the same dataset folder always gives the same archive.
ZIP_TIME = (1980, 1, 1, 0, 0, 0)


@dataclass
class ExportStatus:
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


def exports_root() -> Path:
    return Path(getattr(settings, "EXPORTS_DIR", None) or Path(settings.BASE_DIR) / "var" / "exports")


def export_folder(*, study_slug: str, export_id: str) -> Path:
    """The folder of one run: <EXPORTS_DIR>/<study slug>/<export id>/."""
    return run_folder(exports_root(), study_slug=study_slug, run_id=export_id)


def _write_status(status: ExportStatus) -> None:
    write_status_file(export_folder(study_slug=status.study, export_id=status.id), status)


def _read_status(folder: Path) -> ExportStatus:
    return read_status_file(folder, ExportStatus)


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
    status = ExportStatus(
        id=str(uuid.uuid4()),
        study=study.slug,
        status="pending",
        formats=formats,
        phase=phase,
        include_calibration=include_calibration,
        include_restricted=include_restricted,
        requested_by=requested_by.get_username(),
        created_at=timezone.now().isoformat(),
    )
    _write_status(status)
    folder = export_folder(study_slug=study.slug, export_id=status.id)
    # Runs in-process when no broker is configured (the returned status is then final);
    # with a broker a worker runs it and clients poll. The state lives in status.json,
    # not in a database row, so there is no transaction to wait for. A broker that cannot
    # be reached fails the run and answers 503 (core.background.enqueue_or_fail).
    enqueue_or_fail(
        enqueue,
        study_slug=study.slug,
        export_id=status.id,
        fail=lambda message: fail_run(
            folder, lambda: _read_status(folder), _write_status, NOT_QUEUED_ERROR, only=("pending",)
        ),
    )
    return _read_status(folder)


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


def _clear_unfinished(folder: Path) -> None:
    """Remove what an earlier delivery of an unfinished run may have left."""
    for name in ("dataset.partial", "dataset"):
        shutil.rmtree(folder / name, ignore_errors=True)
    for name in ("dataset.zip", "dataset.zip.tmp"):
        (folder / name).unlink(missing_ok=True)


def run_export(*, study_slug: str, export_id: str) -> ExportStatus:
    """Write the dataset folder and its zip for a recorded export, recording the outcome.

    Safe to deliver more than once: a delivery that finds the run claimed by a live
    worker, or already done or failed, changes nothing and returns the status. One that
    finds it "running" but unclaimed is the redelivery after the worker died, and starts
    the export again from nothing. The folder is written as dataset.partial/ and renamed
    to dataset/ at the end, so dataset/ and dataset.zip only ever exist complete."""
    from datasets.exporting import export_dataset  # the export lives in its own package

    folder = export_folder(study_slug=study_slug, export_id=export_id)
    with claim_run(folder) as claimed:
        status = _read_status(folder)
        if not claimed or status.status in ("done", "failed"):
            return status
        status.status = "running"
        _write_status(status)
        _clear_unfinished(folder)
        partial = folder / "dataset.partial"
        try:
            study = Study.objects.select_related("rubric").get(slug=study_slug)
            result = export_dataset(
                study=study,
                out_dir=partial,
                formats=status.formats,
                phase=status.phase,
                include_calibration=status.include_calibration,
                include_restricted=status.include_restricted,
            )
            _zip(partial, folder / "dataset.zip")
            os.replace(partial, folder / "dataset")
        except ApplicationError as exc:
            status.status, status.error = "failed", exc.message
            clear_partial(folder)
        except Exception:
            # Recorded so a poll does not wait forever, then raised: a bug must be seen.
            status.status, status.error = "failed", "The export failed unexpectedly."
            status.finished_at = timezone.now().isoformat()
            _write_status(status)
            clear_partial(folder)
            raise
        else:
            status.status = "done"
            status.counts = dict(result.counts)
            status.withheld_sources = list(result.withheld_sources)
        status.finished_at = timezone.now().isoformat()
        _write_status(status)
        return status


def _zip(folder: Path, archive: Path) -> None:
    temporary = archive.with_suffix(".zip.tmp")
    with zipfile.ZipFile(temporary, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for path in sorted(p for p in folder.rglob("*") if p.is_file()):
            info = zipfile.ZipInfo(str(Path("dataset") / path.relative_to(folder)), date_time=ZIP_TIME)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            with path.open("rb") as source, zf.open(info, "w", force_zip64=True) as target:
                shutil.copyfileobj(source, target, 1 << 20)  # streamed: tables can be large
    os.replace(temporary, archive)


WORKER_DIED_ERROR = worker_died_error("export", "Retry it to start a new export with the same options.")


def _status_now(folder: Path, requeue: Callable[[ExportStatus], object] | None = None) -> ExportStatus:
    return fail_if_abandoned(folder, lambda: _read_status(folder), _write_status, WORKER_DIED_ERROR, requeue=requeue)


def fail_lost_export(*, study_slug: str, export_id: str) -> ExportStatus:
    """The worker process running the export died (WorkerLostError, seen at once by the
    worker's main process): record it as failed now and remove its partial folder."""
    folder = export_folder(study_slug=study_slug, export_id=export_id)
    return fail_run(folder, lambda: _read_status(folder), _write_status, WORKER_DIED_ERROR, only=("pending", "running"))


def sweep_exports(*, enqueue: Callable[..., Any]) -> list[ExportStatus]:
    """Look at every unfinished export (the periodic sweep): fail those whose worker died,
    queue again once those that no worker claimed within RUN_CLAIM_TIMEOUT, and fail them
    the second time. Returns the statuses that changed."""
    changed = []
    root = exports_root()
    for path in sorted(root.glob("*/*/status.json")) if root.is_dir() else []:
        before = _read_status(path.parent)
        if before.status not in ("pending", "running"):
            continue
        after = _status_now(path.parent, requeue=lambda s: enqueue(study_slug=s.study, export_id=s.id))
        if (after.status, after.requeued) != (before.status, before.requeued):
            changed.append(after)
    return changed


def get_export(*, study: Study, export_id) -> ExportStatus:
    folder = export_folder(study_slug=study.slug, export_id=export_id)
    if not (folder / "status.json").is_file():
        raise Http404("No such export.")
    return _status_now(folder)


def list_exports(*, study: Study) -> list[ExportStatus]:
    """The study's exports, newest first."""
    return statuses_under(exports_root() / study.slug, _status_now)


def export_archive(*, study: Study, export_id) -> Path:
    """The zip of a finished export; 409 while it is not done."""
    status = get_export(study=study, export_id=export_id)
    archive = export_folder(study_slug=study.slug, export_id=status.id) / "dataset.zip"
    if status.status != "done" or not archive.is_file():
        raise InvalidStateError(f"The export is {status.status}; download it once it is done.")
    return archive
