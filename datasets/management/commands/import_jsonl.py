from pathlib import Path

from django.core.management.base import BaseCommand

from datasets.importing import import_records
from datasets.messages import importing, open_text


class Command(BaseCommand):
    help = "Import studies, sources, summaries and claims from a JSON Lines file (docs/import-format.md)."

    def add_arguments(self, parser):
        parser.add_argument("file", type=Path, help="JSON Lines file, one record per line")

    def handle(self, *args, file: Path, **options):
        with importing(file), open_text(file) as handle:
            result = import_records(lines=handle)
        self.stdout.write(f"Imported {file}: {result.summary_line()}.")
