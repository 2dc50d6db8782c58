from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from core.exceptions import ApplicationError
from datasets.demo import DEFAULT_DEMO_PASSWORD
from literature.demo import QUESTION_STUDY, RETRIEVED, load_question_demo


class Command(BaseCommand):
    help = (
        f"Load the question demo study {QUESTION_STUDY!r} (offline: Evidence Inference questions, local BM25 "
        "retrieval, template answers) and the demo accounts (idempotent; docs/questions.md)."
    )

    def add_arguments(self, parser):
        parser.add_argument("--with-answers", action="store_true", help="also submit seeded ratings")

    def handle(self, *args, with_answers: bool = False, **options):
        if not settings.DEBUG and not settings.DEMO_PASSWORD:
            raise CommandError(
                "DEMO_PASSWORD is not set: with DEBUG off the demo would create a superuser 'admin' with the "
                f"public password {DEFAULT_DEMO_PASSWORD!r}. Set DEMO_PASSWORD, or run with DEBUG=1."
            )
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
