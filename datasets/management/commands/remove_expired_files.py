from django.core.management.base import BaseCommand, CommandError

from core.commands import counted
from datasets.retention import file_retention, remove_expired_files


class Command(BaseCommand):
    help = (
        "Remove uploaded import files and export archives (each run's folder under IMPORTS_DIR and "
        "EXPORTS_DIR) of runs that ended more than FILE_RETENTION_DAYS ago (default 30). For cron where no "
        "Celery beat runs: the beat schedule runs the same every day (docs/deployment.md)."
    )

    def add_arguments(self, parser):
        parser.add_argument("--days", type=int, default=None, help="keep this many days instead of FILE_RETENTION_DAYS")

    def handle(self, *args, days: int | None, **options):
        if days is not None and days < 1:
            raise CommandError("--days must be at least 1")
        from datetime import timedelta

        keep = timedelta(days=days) if days is not None else file_retention()
        removed = remove_expired_files(older_than=keep)
        self.stdout.write(
            f"Removed {counted(removed.exports, 'export')} and {counted(removed.imports, 'import')} "
            f"older than {keep.days} days."
        )
