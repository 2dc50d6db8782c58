from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

# Only the cheap check at import time: `make run` calls this command in gunicorn's master on
# every start; loading the demo imports numpy, scipy, bm25s and PyStemmer (the BM25 index),
# which every worker would inherit, so they are imported only when the demo is missing.
from datasets.demo_state import DEFAULT_DEMO_PASSWORD, DEMO_ADMIN, DEMO_RATERS, QUESTION_STUDY, demo_loaded


class Command(BaseCommand):
    help = (
        f"Load the question demo study {QUESTION_STUDY!r} (offline: Evidence Inference questions, local BM25 "
        "retrieval, template answers) and the demo accounts (idempotent; skipped when already loaded, unless "
        "--reload; docs/questions.md)."
    )

    def add_arguments(self, parser):
        parser.add_argument("--with-answers", action="store_true", help="also submit seeded ratings")
        parser.add_argument(
            "--reload",
            action="store_true",
            help="load again even when the demo is already there (what exists stays; what is missing is made)",
        )

    def handle(self, *args, with_answers: bool = False, reload: bool = False, **options):
        if not settings.DEBUG and not settings.DEMO_PASSWORD:
            raise CommandError(
                "DEMO_PASSWORD is not set: with DEBUG off the demo would create a superuser 'admin' with the "
                f"public password {DEFAULT_DEMO_PASSWORD!r}. Set DEMO_PASSWORD, or run with DEBUG=1."
            )
        if not reload and demo_loaded((QUESTION_STUDY,)):
            self.stdout.write(
                f"Question demo already loaded ({QUESTION_STUDY} with its batch; accounts "
                f"{', '.join((DEMO_ADMIN, *DEMO_RATERS))}): nothing to do (--reload loads it again)."
            )
            return
        from core.exceptions import ApplicationError
        from literature.demo import RETRIEVED, load_question_demo

        try:
            result = load_question_demo(
                password=settings.DEMO_PASSWORD or DEFAULT_DEMO_PASSWORD, with_answers=with_answers
            )
        except ApplicationError as exc:
            raise CommandError(exc.message) from None
        self.stdout.write(
            f"Question demo loaded: {result.questions} questions, {result.answers_created} new answers, "
            f"{result.assignments_created} new assignments, {result.answers_submitted} ratings submitted; "
            f"each question's reference retrieved in the top {RETRIEVED} for {result.recall:.0%} of questions."
        )
