from django.core.management.base import BaseCommand, CommandError

from core.exceptions import ApplicationError
from recruit import panel
from recruit.management.commands._prolific import participants_of, study_of
from recruit.prolific import MIN_REJECTION_MESSAGE, REJECTION_CATEGORIES


class Command(BaseCommand):
    help = "Reject Prolific submissions of a study's participants, with Prolific's category and a message."

    def add_arguments(self, parser):
        parser.add_argument("--study", required=True, help="the study's slug")
        parser.add_argument(
            "--participant", action="append", required=True, metavar="PROLIFIC_PID", help="repeat for several"
        )
        parser.add_argument("--category", required=True, choices=[c for c, _ in REJECTION_CATEGORIES])
        parser.add_argument(
            "--message", required=True, help=f"to the participant, at least {MIN_REJECTION_MESSAGE} characters"
        )

    def handle(self, *args, **options):
        study = study_of(options["study"])
        chosen = participants_of(study, options["participant"])
        try:
            n = panel.reject(participants=chosen, category=options["category"], message=options["message"])
        except ApplicationError as exc:
            raise CommandError(exc.message) from None
        self.stdout.write(f"{n} submission{'s' if n != 1 else ''} rejected on Prolific ({options['category']}).")
