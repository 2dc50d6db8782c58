from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from annotate.exceptions import ApplicationError
from datasets.importing import import_records


class Command(BaseCommand):
    help = "Import studies, sources, summaries and claims from a JSON Lines file (docs/import-format.md)."

    def add_arguments(self, parser):
        parser.add_argument("file", type=Path, help="JSON Lines file, one record per line")

    def handle(self, *args, file: Path, **options):
        try:
            with file.open(encoding="utf-8") as handle:
                result = import_records(lines=handle)
        except FileNotFoundError:
            raise CommandError(f"{file}: no such file") from None
        except UnicodeDecodeError as exc:
            raise CommandError(f"{file}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
        except ApplicationError as exc:
            raise CommandError(f"{file}: {exc.message}. Nothing was imported.") from None
        self.stdout.write(f"Imported {file}: {result.summary_line()}.")
