"""How long uploaded files and export archives are kept (FILE_RETENTION_DAYS, default 30):
a run's files (the upload of an import, the dataset folder and zip of an export) and its
row are removed once the run ended longer ago than that. Through the storages of
core.storage, so the same on the local disk and in an object store. Run by the periodic
task datasets.tasks.remove_expired_files_task (Celery beat, config/settings.py) and by
`manage.py remove_expired_files` (for cron where no beat runs; docs/deployment.md)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from django.db.models import Q
from django.utils import timezone

from core import storage
from core.env import env_int
from datasets import run_state
from datasets.models import DatasetRun, ExportRun, ImportRun

DEFAULT_RETENTION_DAYS = 30


def file_retention() -> timedelta:
    """FILE_RETENTION_DAYS (whole days, at least 1; default 30)."""
    return timedelta(days=env_int("FILE_RETENTION_DAYS", DEFAULT_RETENTION_DAYS, minimum=1))


@dataclass(frozen=True)
class Removed:
    exports: int
    imports: int


def _remove(model: type[DatasetRun], files, cutoff, keep: Q | None = None) -> int:
    ended = Q(finished_at__lt=cutoff) | Q(finished_at__isnull=True, created_at__lt=cutoff)
    removed = 0
    rows = model.objects.select_related("study").filter(
        ended, status__in=(DatasetRun.Status.DONE, DatasetRun.Status.FAILED)
    )
    for row in rows.exclude(keep) if keep is not None else rows:
        storage.delete_tree(files, run_state.run_prefix(row))
        # Conditional: a retry that made the run pending again meanwhile keeps it (and
        # uploads again; the retry answers that the file is gone).
        removed += model.objects.filter(pk=row.pk, status=row.status).delete()[0]
    return removed


def remove_expired_files(*, older_than: timedelta | None = None) -> Removed:
    """Remove the files and rows of exports and imports that ended (done or failed) longer
    ago than `older_than` (default FILE_RETENTION_DAYS). Runs still pending or running are
    kept, and so are released exports: a release is pushed and deposited from its export's
    files, and keeps its export (datasets.releases)."""
    cutoff = timezone.now() - (older_than if older_than is not None else file_retention())
    return Removed(
        exports=_remove(ExportRun, storage.exports_storage(), cutoff, keep=Q(releases__isnull=False)),
        imports=_remove(ImportRun, storage.imports_storage(), cutoff),
    )
