from pathlib import Path

from django.core.management.base import BaseCommand

from datasets.importing import import_records
from datasets.messages import importing, open_text

# A progress line on stderr each time this many more records are written (long files only).
PROGRESS_EVERY = 10_000


class Command(BaseCommand):
    help = "Import studies, sources, summaries and claims from a JSON Lines file (docs/import-format.md)."
    # Django's system checks load the URLconf and every view (the API, the schema, DRF's
    # whole stack) before any command runs: most of this command's start-up, for nothing
    # an import uses. `manage.py check` and every server start still run them.
    requires_system_checks = []

    def add_arguments(self, parser):
        parser.add_argument("file", type=Path, help="JSON Lines file, one record per line")

    def handle(self, *args, file: Path, **options):
        reported = 0

        def progress(records: int, line: int) -> None:
            nonlocal reported
            if records - reported >= PROGRESS_EVERY:
                reported = records
                self.stderr.write(f"{file}: {records:,} records written (up to line {line:,}), not yet committed")

        with importing(file), open_text(file) as handle:
            result = import_records(lines=handle, progress=progress)
        self.stdout.write(f"Imported {file}: {result.summary_line()}.")
