import time

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from annotate.management.common import study_named
from core.commands import (
    add_allow_failures,
    check_at_least_one,
    counted,
    end_with_failures,
    usage_error,
    usage_errors,
)
from core.exceptions import ApplicationError
from core.logs import show_library_logs
from generation.models import AnswerJob
from generation.services import start_answer_run
from generation.tasks import answer_question_task

ENGINES = ("local", "pubmed")
REGIMES = ("restricted", "exclude-source", "unrestricted")


class Command(BaseCommand):
    help = (
        "Answer a study's clinical questions from the literature (Clinfo.ai: queries, retrieval, relevance, "
        "article summaries, a cited synthesis and TL;DR), one job per question; running it again resumes "
        "unfinished jobs (docs/questions.md)."
    )

    def add_arguments(self, parser):
        parser.add_argument("--study", required=True)
        parser.add_argument("--engine", choices=ENGINES, default="local")
        parser.add_argument("--regime", choices=REGIMES, default="unrestricted")
        parser.add_argument("--question", action="append", default=[], dest="questions", help="question key")
        parser.add_argument("--limit", type=int, default=None, help="at most N questions")
        parser.add_argument("--timeout", type=float, default=None, help="with a broker: stop waiting after N s")
        add_allow_failures(parser)

    def handle(self, *args, study: str, engine: str, regime: str, questions: list[str], limit, timeout, **options):
        show_library_logs(options["verbosity"])
        check_at_least_one(limit, "--limit")
        with usage_errors():
            study_obj = study_named(study)
        jobs_before = AnswerJob.objects.count()
        try:
            jobs = start_answer_run(
                study=study_obj,
                engine=engine,
                regime=regime,
                question_keys=questions,
                limit=limit,
                enqueue=answer_question_task.delay,
            )
        except ApplicationError as exc:
            # Refused before any job existed (an unknown question, no API key): a usage error.
            if AnswerJob.objects.count() == jobs_before:
                raise usage_error(exc.message) from None
            raise CommandError(exc.message) from None
        ids = [j.pk for j in jobs]
        started = time.monotonic()
        while not settings.CELERY_TASK_ALWAYS_EAGER:
            left = AnswerJob.objects.filter(pk__in=ids, status__in=["pending", "running"]).count()
            if not left or (timeout is not None and time.monotonic() - started > timeout):
                break
            time.sleep(2)
        counts: dict[str, int] = {}
        for job in AnswerJob.objects.filter(pk__in=ids):
            counts[job.status] = counts.get(job.status, 0) + 1
        self.stdout.write(
            f"{counted(len(ids), 'question')}, {engine} engine, {regime}: "
            + ", ".join(f"{n} {status}" for status, n in sorted(counts.items()))
        )
        for job in AnswerJob.objects.filter(pk__in=ids, status="skipped").order_by("question__key"):
            self.stdout.write(f"  {job.question.key}: skipped: {job.skip_reason}")
        failed = AnswerJob.objects.filter(pk__in=ids, status="failed").order_by("question__key")
        for job in failed:
            self.stderr.write(f"{job.question.key}: {job.error}")
        end_with_failures(
            self.stderr,
            len(failed),
            "question",
            allow=options["allow_failures"],
            hint="; run the command again to resume them",
        )
