from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

# Only the cheap check at import time: `make run` calls this command in gunicorn's master on
# every start, and once the demo is loaded it must cost two queries, not the importer.
from datasets.demo_state import (
    DEFAULT_DEMO_PASSWORD,
    DEMO_ADMIN,
    DEMO_RATERS,
    DEMO_STUDY,
    FACTPICO_STUDY,
    PAIRWISE_STUDY,
    demo_loaded,
)


class Command(BaseCommand):
    help = (
        "Load the demo study and create the demo accounts admin (a superuser), rater1, rater2 "
        "(idempotent; skipped when the demo is already loaded, unless --reload). With DEBUG off, "
        "DEMO_PASSWORD must be set: the default password is public."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--with-answers",
            action="store_true",
            help="also submit seeded answers for the demo raters (all but the last 3 main items of each queue)",
        )
        parser.add_argument(
            "--reload",
            action="store_true",
            help="load again even when the demo is already there (what exists stays; what is missing is made)",
        )

    def handle(self, *args, with_answers: bool = False, reload: bool = False, **options):
        if not settings.DEBUG and not settings.DEMO_PASSWORD:
            raise CommandError(
                "DEMO_PASSWORD is not set: with DEBUG off the demo would create a superuser 'admin' with the "
                f"public password {DEFAULT_DEMO_PASSWORD!r}. Set DEMO_PASSWORD, or run with DEBUG=1 "
                "(as `make run` does)."
            )
        if not reload and demo_loaded((DEMO_STUDY, FACTPICO_STUDY, PAIRWISE_STUDY)):
            self.stdout.write(
                f"Demo already loaded ({DEMO_STUDY}, {FACTPICO_STUDY} and {PAIRWISE_STUDY} with their batches; "
                f"accounts {', '.join((DEMO_ADMIN, *DEMO_RATERS))}): nothing to do (--reload loads it again)."
            )
            return
        from core.exceptions import ApplicationError
        from datasets.demo import load_demo

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
