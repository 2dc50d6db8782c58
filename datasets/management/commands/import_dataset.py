from pathlib import Path

from django.core.management.base import BaseCommand

from datasets.exporting import import_dataset
from datasets.messages import importing, refusal


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
            raise refusal(folder, "no such folder")
        with importing(folder):
            result = import_dataset(folder=folder, allow_withheld=allow_withheld)
        self.stdout.write(result.summary_line())
