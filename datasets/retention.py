"""How long uploaded files and export archives are kept (FILE_RETENTION_DAYS, default 30):
a run's folder (the upload of an import, the dataset folder and zip of an export, their
status) is removed once the run ended longer ago than that. Run by the periodic task
datasets.tasks.remove_expired_files_task (Celery beat, config/settings.py) and by
`manage.py remove_expired_files` (for cron where no beat runs; docs/deployment.md)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from core.env import env_int
from datasets.export_runs import exports_root
from datasets.import_runs import imports_root
from datasets.run_files import expired_runs, remove_run_folder

DEFAULT_RETENTION_DAYS = 30


def file_retention() -> timedelta:
    """FILE_RETENTION_DAYS (whole days, at least 1; default 30)."""
    return timedelta(days=env_int("FILE_RETENTION_DAYS", DEFAULT_RETENTION_DAYS, minimum=1))


@dataclass(frozen=True)
class Removed:
    exports: int
    imports: int


def remove_expired_files(*, older_than: timedelta | None = None) -> Removed:
    """Remove the folders of exports and imports that ended (done or failed) longer ago
    than `older_than` (default FILE_RETENTION_DAYS). Runs still pending or running, and a
    folder a worker holds, are kept."""
    keep = older_than if older_than is not None else file_retention()
    exports = sum(remove_run_folder(folder) for folder in list(expired_runs(exports_root(), older_than=keep)))
    imports = sum(remove_run_folder(folder) for folder in list(expired_runs(imports_root(), older_than=keep)))
    return Removed(exports=exports, imports=imports)
