"""Dataset export runs, started over the API or from the admin: start one, poll its
status, download it.

The export itself is datasets.exporting.export_dataset (the same function as
`manage.py export_dataset`); this module only gives each run an id, a folder and a
status file, so that the API is stateless and needs no table:

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

import fcntl
import json
import os
import shutil
import uuid
import zipfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from django.conf import settings
from django.http import Http404
from django.utils import timezone

from annotate.models import Study
from core.exceptions import ApplicationError, InvalidStateError

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


def exports_root() -> Path:
    return Path(getattr(settings, "EXPORTS_DIR", None) or Path(settings.BASE_DIR) / "var" / "exports")


def export_folder(*, study_slug: str, export_id: str) -> Path:
    """The folder of one run: <EXPORTS_DIR>/<study slug>/<export id>/."""
    return exports_root() / study_slug / str(uuid.UUID(str(export_id)))


def write_status_file(folder: Path, status: Any) -> None:
    """A run's status (a dataclass) as folder/status.json, replaced whole: a poll never
    reads a half-written file. Shared with datasets.import_runs."""
    folder.mkdir(parents=True, exist_ok=True)
    temporary = folder / "status.json.tmp"
    temporary.write_text(json.dumps(asdict(status), indent=2, sort_keys=True), encoding="utf-8")
    os.replace(temporary, folder / "status.json")


def fail_if_abandoned(folder: Path, read: Callable[[], Any], write: Callable[[Any], None], error: str) -> Any:
    """The recorded status of the run in `folder`, except that a "running" run whose claim
    nobody holds has lost its worker: a worker process killed mid-run (out of memory, say)
    has its message acknowledged by Celery, so no delivery would ever finish or fail it. It
    is recorded as failed with `error`, so a poll does not wait forever. Shared with
    datasets.import_runs."""
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


def newest_first(statuses: list) -> list:
    return sorted(statuses, key=lambda s: (s.created_at, s.id), reverse=True)


def _write_status(status: ExportStatus) -> None:
    write_status_file(export_folder(study_slug=status.study, export_id=status.id), status)


def _read_status(path: Path) -> ExportStatus:
    return ExportStatus(**json.loads(path.read_text(encoding="utf-8")))


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
    # Runs in-process when no broker is configured (the returned status is then final);
    # with a broker a worker runs it and clients poll. The state lives in status.json,
    # not in a database row, so there is no transaction to wait for.
    enqueue(study_slug=study.slug, export_id=status.id)
    return _read_status(export_folder(study_slug=study.slug, export_id=status.id) / "status.json")


@contextmanager
def claim_run(folder: Path) -> Iterator[bool]:
    """Claim the run in `folder`: yields True for the one process that holds it, False
    for any other. An exclusive flock on claim.lock, not a status check, because the
    claim must be atomic (two deliveries reading "pending" at once must not both run)
    and must end when its holder dies: the kernel drops a dead process's locks, whereas
    an O_EXCL lock file or a "running" status would stay behind and block the export
    for good. EXPORTS_DIR must therefore be on a file system with working POSIX locks
    (a local disk, or NFSv4), shared by the workers as the API already requires."""
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
        status = _read_status(folder / "status.json")
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
        except Exception:
            # Recorded so a poll does not wait forever, then raised: a bug must be seen.
            status.status, status.error = "failed", "The export failed unexpectedly."
            status.finished_at = timezone.now().isoformat()
            _write_status(status)
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


def _status_now(folder: Path) -> ExportStatus:
    return fail_if_abandoned(
        folder,
        lambda: _read_status(folder / "status.json"),
        _write_status,
        "The worker running this export stopped before it finished; start a new export.",
    )


def get_export(*, study: Study, export_id) -> ExportStatus:
    folder = export_folder(study_slug=study.slug, export_id=export_id)
    if not (folder / "status.json").is_file():
        raise Http404("No such export.")
    return _status_now(folder)


def list_exports(*, study: Study) -> list[ExportStatus]:
    """The study's exports, newest first."""
    root = exports_root() / study.slug
    return newest_first([_status_now(p.parent) for p in root.glob("*/status.json")] if root.is_dir() else [])


def export_archive(*, study: Study, export_id) -> Path:
    """The zip of a finished export; 409 while it is not done."""
    status = get_export(study=study, export_id=export_id)
    archive = export_folder(study_slug=study.slug, export_id=status.id) / "dataset.zip"
    if status.status != "done" or not archive.is_file():
        raise InvalidStateError(f"The export is {status.status}; download it once it is done.")
    return archive
