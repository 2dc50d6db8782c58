from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from annotate.services.rubrics import load_rubric, read_rubric_file
from core.exceptions import ApplicationError


class Command(BaseCommand):
    help = "Load a rubric definition (YAML); a changed definition becomes a new version."

    def add_arguments(self, parser):
        parser.add_argument("file", type=Path)

    def handle(self, *args, file: Path, **options):
        try:
            rubric = load_rubric(definition=read_rubric_file(file))
        except ApplicationError as exc:
            raise CommandError(exc.message) from None
        self.stdout.write(f"Rubric {rubric.key} is at version {rubric.version}.")
