from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from core.exceptions import ApplicationError
from datasets.demo import DEFAULT_DEMO_PASSWORD, load_demo


class Command(BaseCommand):
    help = (
        "Load the demo study and create the demo accounts admin (a superuser), rater1, rater2 "
        "(idempotent). With DEBUG off, DEMO_PASSWORD must be set: the default password is public."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--with-answers",
            action="store_true",
            help="also submit seeded answers for the demo raters (all but the last 3 main items of each queue)",
        )

    def handle(self, *args, with_answers: bool = False, **options):
        if not settings.DEBUG and not settings.DEMO_PASSWORD:
            raise CommandError(
                "DEMO_PASSWORD is not set: with DEBUG off the demo would create a superuser 'admin' with the "
                f"public password {DEFAULT_DEMO_PASSWORD!r}. Set DEMO_PASSWORD, or run with DEBUG=1 "
                "(as `make run` does)."
            )
        password = settings.DEMO_PASSWORD or DEFAULT_DEMO_PASSWORD
        try:
            result = load_demo(password=password, with_answers=with_answers)
        except ApplicationError as exc:
            raise CommandError(exc.message) from None
        self.stdout.write(
            f"Demo loaded: {result.imported.summary_line()}; {result.assignments_created} new assignments"
            f" in the demo batches; {result.answers_submitted} answers submitted."
        )
        if result.users_created:
            shown = "from DEMO_PASSWORD" if settings.DEMO_PASSWORD else f"'{DEFAULT_DEMO_PASSWORD}'"
            self.stdout.write(f"Demo accounts created: {', '.join(result.users_created)} (password {shown}).")
        else:
            self.stdout.write("Demo accounts admin, rater1, rater2 already exist (passwords unchanged).")
