import argparse
import json
import time
from contextlib import nullcontext

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from annotate.management.common import study_named
from core.commands import (
    add_allow_failures,
    check_at_least_one,
    counted,
    end_with_failures,
    reporting_progress,
    usage_error,
    usage_errors,
)
from core.exceptions import ApplicationError
from core.logs import show_library_logs
from generation.models import GenerationJob, GenerationRun
from generation.pipelines import PIPELINE_CHOICES
from generation.selectors import run_progress, run_report
from generation.services import requeue_abandoned_jobs, start_generation_run
from generation.tasks import generate_summary_task

FINISHED = ("ok", "flagged", "skipped", "failed")


class Command(BaseCommand):
    help = (
        "Write, check and store LLM summaries of a study's sources, one job per source and pipeline version. "
        "Runs as Celery work (in-process without a broker); running it again resumes unfinished jobs."
    )

    def add_arguments(self, parser):
        parser.add_argument("--study", required=True, help="study slug")
        parser.add_argument("--pipeline", required=True, choices=PIPELINE_CHOICES)
        parser.add_argument("--source", action="append", default=[], dest="sources", help="source key (repeatable)")
        parser.add_argument("--limit", type=int, default=None, help="at most N sources")
        parser.add_argument("--json", action="store_true", help="print the run's summaries as JSON")
        parser.add_argument(
            "--no-wait",
            action="store_true",
            help="with a broker: return once the jobs are queued instead of waiting for the workers",
        )
        parser.add_argument(
            "--timeout", type=float, default=None, help="with a broker: stop waiting after this many seconds"
        )
        parser.add_argument("--poll", type=float, default=2.0, help=argparse.SUPPRESS)
        add_allow_failures(parser)

    def handle(self, *args, study: str, pipeline: str, sources: list[str], limit: int | None, **options):
        show_library_logs(options["verbosity"])
        check_at_least_one(limit, "--limit")
        with usage_errors():
            study_obj = study_named(study)
        started = time.monotonic()

        def so_far():
            # Without a broker the jobs run in this process's threads: say how far they got.
            done = GenerationJob.objects.filter(
                runs__study=study_obj, runs__created_at__gte=started_at, status__in=FINISHED
            ).count()
            return f"{done} of {counted(expected, 'source')} done after {time.monotonic() - started:.0f} s …"

        from django.utils import timezone

        started_at = timezone.now()
        expected = len(sources) or limit or study_obj.sources.count()
        runs_before = GenerationRun.objects.count()
        try:
            with reporting_progress(so_far, self.stderr) if settings.CELERY_TASK_ALWAYS_EAGER else nullcontext():
                run = start_generation_run(
                    study=study_obj,
                    pipeline=pipeline,
                    source_keys=sources,
                    limit=limit,
                    enqueue=generate_summary_task.delay,
                )
        except ApplicationError as exc:
            if GenerationRun.objects.count() == runs_before:  # refused before anything ran
                raise usage_error(exc.message) from None
            raise CommandError(exc.message) from None
        if not settings.CELERY_TASK_ALWAYS_EAGER and not options["no_wait"]:
            self.wait(run, poll=options["poll"], timeout=options["timeout"])
        progress = run_progress(run)
        if options["json"]:
            self.stdout.write(json.dumps(run_report(run), indent=2))
        else:
            done = ", ".join(f"{n} {status}" for status, n in progress.items() if n)
            self.stdout.write(f"run {run.uuid}: {done or 'no sources'}")
            # Why, for each source that was skipped or failed (the whole trace is in the admin).
            for job in run.jobs.filter(status__in=["skipped", "failed"]).select_related("source"):
                reason = job.skip_reason if job.status == "skipped" else job.error
                self.stdout.write(f"  {job.source.key}: {job.status}: {reason}")
        end_with_failures(
            self.stderr,
            progress["failed"],
            "job",
            allow=options["allow_failures"],
            hint="; run the command again to resume (the trace of each is in the admin, under Generation jobs)",
        )

    def wait(self, run, *, poll: float, timeout: float | None) -> None:
        """With a broker the jobs run in Celery workers: wait until none is pending or
        running, saying every half minute what is left (a run without a worker waits)."""
        started = said = looked = time.monotonic()
        while True:
            if time.monotonic() - looked > 30:
                requeued = requeue_abandoned_jobs(run=run, enqueue=generate_summary_task.delay)
                if requeued:
                    lost = counted(len(requeued), "job")
                    self.stderr.write(f"{lost} had lost their worker; queued again")
                looked = time.monotonic()
            progress = run_progress(run)
            left = progress["pending"] + progress["running"]
            if not left:
                return
            if timeout is not None and time.monotonic() - started > timeout:
                raise CommandError(
                    f"gave up waiting after {timeout:g} s: {counted(progress['pending'], 'job')} pending and "
                    f"{progress['running']} running stay queued; run the command again to see them finish."
                )
            if time.monotonic() - said > 30:
                self.stderr.write(
                    f"waiting for Celery workers: {progress['pending']} pending, {progress['running']} running "
                    "(start one with `celery -A config worker`; Ctrl+C stops waiting, the jobs stay queued)"
                )
                said = time.monotonic()
            time.sleep(poll)
