from pathlib import Path

from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from annotate.models import Study
from annotate.services.studies import ensure_study
from datasets.messages import importing, read_text
from literature.importing import date_layouts, import_questions, read_rows, summary_line


class Command(BaseCommand):
    help = (
        "Import clinical questions into a study from CSV or JSON Lines: our layout or the PubMedRS-200 "
        "benchmark's (docs/import-format.md, Questions). Dates may be ISO (2021-03-15) or "
        "month/day/year (3/15/2021) as PubMedRS-200 writes them."
    )

    def add_arguments(self, parser):
        parser.add_argument("file", type=Path, help="CSV (.csv) or JSON Lines file")
        parser.add_argument("--study", required=True, help="slug of the study")
        parser.add_argument(
            "--create",
            action="store_true",
            help="create the study when there is none (with --rubric and --title); all or nothing with the import",
        )
        parser.add_argument("--rubric", default="clinfo", help="built-in rubric of a created study (default clinfo)")
        parser.add_argument("--title", default="", help="title of a created study")

    def handle(self, *args, file: Path, study: str, create: bool, rubric: str, title: str, **options):
        if not create and not Study.objects.filter(slug=study).exists():
            raise CommandError(f"no study {study!r}: create it with --create --rubric clinfo --title TITLE") from None
        created = False
        with importing(file):
            rows = read_rows(read_text(file), name=file.name)
            # One transaction: a refused file leaves no empty study behind.
            with transaction.atomic():
                if create:
                    study_obj, created = ensure_study(slug=study, title=title, rubric_key=rubric)
                else:
                    study_obj = Study.objects.get(slug=study)
                result = import_questions(study=study_obj, rows=rows)
        made = f"created study {study!r} (rubric {study_obj.rubric.key}); " if created else ""
        self.stdout.write(f"Imported {file}: {made}{summary_line(result)}; {date_layouts(rows)}.")
