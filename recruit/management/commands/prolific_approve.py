from django.core.management.base import BaseCommand, CommandError

from core.exceptions import ApplicationError
from recruit import panel
from recruit.management.commands._prolific import participants_of, study_of


class Command(BaseCommand):
    help = "Approve Prolific submissions of a study's participants (one, or several in bulk)."

    def add_arguments(self, parser):
        parser.add_argument("--study", required=True, help="the study's slug")
        parser.add_argument(
            "--participant", action="append", required=True, metavar="PROLIFIC_PID", help="repeat for several"
        )

    def handle(self, *args, **options):
        study = study_of(options["study"])
        chosen = participants_of(study, options["participant"])
        try:
            n = panel.approve(participants=chosen)
        except ApplicationError as exc:
            raise CommandError(exc.message) from None
        self.stdout.write(f"{n} submission{'s' if n != 1 else ''} approved on Prolific.")
