from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from annotate.models import Study
from datasets.messages import importing, read_text
from literature.importing import import_questions, read_rows, summary_line


class Command(BaseCommand):
    help = (
        "Import clinical questions into a study from CSV or JSON Lines: our layout or the PubMedRS-200 "
        "benchmark's (docs/import-format.md, Questions)."
    )

    def add_arguments(self, parser):
        parser.add_argument("file", type=Path, help="CSV (.csv) or JSON Lines file")
        parser.add_argument("--study", required=True, help="slug of an existing study")

    def handle(self, *args, file: Path, study: str, **options):
        try:
            study_obj = Study.objects.get(slug=study)
        except Study.DoesNotExist:
            raise CommandError(f"no study {study!r}: create it first (import_jsonl with a study line)") from None
        with importing(file):
            result = import_questions(study=study_obj, rows=read_rows(read_text(file), name=file.name))
        self.stdout.write(f"Imported {file}: {summary_line(result)}.")
