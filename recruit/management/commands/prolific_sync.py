from django.core.management.base import BaseCommand, CommandError

from core.exceptions import ApplicationError
from recruit import panel
from recruit.management.commands._prolific import study_of


class Command(BaseCommand):
    help = (
        "Read a study's submissions from Prolific, match them to its participants, and free the "
        "items of those who returned or timed out (docs/recruitment.md)."
    )

    def add_arguments(self, parser):
        parser.add_argument("--study", required=True, help="the study's slug")

    def handle(self, *args, **options):
        study = study_of(options["study"])
        try:
            result = panel.sync_submissions(study=study)
        except ApplicationError as exc:
            raise CommandError(exc.message) from None
        self.stdout.write(
            f"{result.submissions} submissions read, {result.matched} matched to participants, "
            f"{result.freed} participants' items freed."
        )
