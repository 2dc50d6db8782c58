"""Dataset exports started over the API: start one, poll its status, download it.

The export itself is annotate.exporting.export_dataset (the same function as
`manage.py export_dataset`); this module only gives each run an id, a folder and a
status file, so that the API is stateless and needs no table:

    <EXPORTS_DIR>/<study slug>/<export id>/status.json   what the API answers
    <EXPORTS_DIR>/<study slug>/<export id>/dataset/      the dataset folder
    <EXPORTS_DIR>/<study slug>/<export id>/dataset.zip   what the download serves

EXPORTS_DIR is the setting of that name if there is one, else var/exports.

`run_export` takes only the study slug and the export id, so a Celery task can call
it unchanged; for now `start_export` runs it in the request (the demo study exports
in well under a second), and clients poll all the same.
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
import zipfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

from django.conf import settings
from django.http import Http404
from django.utils import timezone

from annotate.exceptions import ApplicationError, InvalidStateError
from annotate.models import Study

STATUSES = ("pending", "running", "done", "failed")
FORMATS = ("jsonl", "csv", "parquet")  # annotate.exporting.FORMATS, without importing it here
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


def _folder(study_slug: str, export_id: str) -> Path:
    return exports_root() / study_slug / str(uuid.UUID(str(export_id)))


def _write_status(status: ExportStatus) -> None:
    folder = _folder(status.study, status.id)
    folder.mkdir(parents=True, exist_ok=True)
    temporary = folder / "status.json.tmp"
    temporary.write_text(json.dumps(asdict(status), indent=2, sort_keys=True), encoding="utf-8")
    os.replace(temporary, folder / "status.json")  # a poll never reads a half-written file


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
) -> ExportStatus:
    """Record a new export and hand it to a Celery task; returns its status now."""
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
    from annotate.tasks import run_api_export_task

    # Runs in-process when no broker is configured (the returned status is then final);
    # with a broker a worker runs it and clients poll. The state lives in status.json,
    # not in a database row, so there is no transaction to wait for.
    run_api_export_task.delay(study_slug=study.slug, export_id=status.id)
    return _read_status(_folder(study.slug, status.id) / "status.json")


def run_export(*, study_slug: str, export_id: str) -> ExportStatus:
    """Write the dataset folder and its zip for a pending export, recording the outcome."""
    from annotate.exporting import export_dataset  # the export lives in its own module

    folder = _folder(study_slug, export_id)
    status = _read_status(folder / "status.json")
    if status.status != "pending":
        return status
    status.status = "running"
    _write_status(status)
    try:
        study = Study.objects.select_related("rubric").get(slug=study_slug)
        result = export_dataset(
            study=study,
            out_dir=folder / "dataset",
            formats=status.formats,
            phase=status.phase,
            include_calibration=status.include_calibration,
            include_restricted=status.include_restricted,
        )
        _zip(folder / "dataset", folder / "dataset.zip")
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


def get_export(*, study: Study, export_id) -> ExportStatus:
    path = _folder(study.slug, export_id) / "status.json"
    if not path.is_file():
        raise Http404("No such export.")
    return _read_status(path)


def list_exports(*, study: Study) -> list[ExportStatus]:
    """The study's exports, newest first."""
    root = exports_root() / study.slug
    statuses = [_read_status(p) for p in root.glob("*/status.json")] if root.is_dir() else []
    return sorted(statuses, key=lambda s: (s.created_at, s.id), reverse=True)


def export_archive(*, study: Study, export_id) -> Path:
    """The zip of a finished export; 409 while it is not done."""
    status = get_export(study=study, export_id=export_id)
    archive = _folder(study.slug, status.id) / "dataset.zip"
    if status.status != "done" or not archive.is_file():
        raise InvalidStateError(f"The export is {status.status}; download it once it is done.")
    return archive
