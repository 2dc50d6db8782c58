import json

from django.core.management.base import BaseCommand, CommandError

from annotate.management.common import study_named
from annotate.models import ExpectedAnswer
from annotate.rubrics import AnswerValidationError
from annotate.services.adjudication import record_expected_answer
from core.exceptions import ApplicationError
from core.text_validation import InvalidTextError, loads


class Command(BaseCommand):
    help = "Record the expected answers of a gold item, attention check or training item."

    def add_arguments(self, parser):
        parser.add_argument("--study", required=True)
        parser.add_argument("--summary", required=True, help="summary key")
        parser.add_argument("--purpose", choices=ExpectedAnswer.Purpose.values, default="gold")
        parser.add_argument("--answers", required=True, help='JSON, e.g. {"overall": 2}')
        parser.add_argument("--explanation", default="")

    def handle(self, *args, **o):
        study = study_named(o["study"])
        summary = study.summaries.filter(key=o["summary"]).first()
        if summary is None:
            raise CommandError(f"no summary {o['summary']!r} in {study.slug}")
        try:
            answers = loads(o["answers"], field="--answers")
        except json.JSONDecodeError as exc:
            raise CommandError(f"--answers is not valid JSON: {exc.msg}") from None
        except InvalidTextError as exc:
            raise CommandError(exc.message) from None
        try:
            expected = record_expected_answer(
                study=study, summary=summary, purpose=o["purpose"], answers=answers, explanation=o["explanation"]
            )
        except AnswerValidationError as exc:
            raise CommandError("; ".join(f"{k}: {v}" for k, v in exc.errors.items())) from None
        except ApplicationError as exc:
            raise CommandError(exc.message) from None
        self.stdout.write(f"{expected.get_purpose_display()} recorded for {summary.key}.")
