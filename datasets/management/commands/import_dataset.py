from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from annotate.exceptions import ApplicationError
from datasets.exporting import import_dataset


class Command(BaseCommand):
    help = (
        "Import a dataset folder written by export_dataset into this instance: the study, its rubric "
        "versions, sources, summaries, claims, batches, pseudonymous rater accounts and every answer. "
        "All or nothing (docs/export-format.md)."
    )

    def add_arguments(self, parser):
        parser.add_argument("folder", type=Path, help="the dataset folder (with study.json and SHA256SUMS)")
        parser.add_argument(
            "--allow-withheld",
            action="store_true",
            help="store sources whose text was withheld without text, instead of refusing them",
        )

    def handle(self, *args, folder: Path, allow_withheld: bool, **options):
        if not folder.is_dir():
            raise CommandError(f"{folder}: no such folder")
        try:
            result = import_dataset(folder=folder, allow_withheld=allow_withheld)
        except ApplicationError as exc:
            raise CommandError(f"{folder}: {exc.message}. Nothing was imported.") from None
        self.stdout.write(result.summary_line())
