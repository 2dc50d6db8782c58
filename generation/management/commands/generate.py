import json

from django.core.management.base import BaseCommand, CommandError

from annotate.exceptions import ApplicationError
from annotate.models import Study
from generation.pipelines import PIPELINE_CHOICES
from generation.selectors import run_progress, run_report
from generation.services import start_generation_run


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

    def handle(self, *args, study: str, pipeline: str, sources: list[str], limit: int | None, **options):
        if limit is not None and limit < 1:
            raise CommandError("--limit must be at least 1")
        study_obj = Study.objects.filter(slug=study).first()
        if study_obj is None:
            raise CommandError(f"no study {study!r}")
        try:
            run = start_generation_run(study=study_obj, pipeline=pipeline, source_keys=sources, limit=limit)
        except ApplicationError as exc:
            raise CommandError(exc.message) from None
        progress = run_progress(run)
        if options["json"]:
            self.stdout.write(json.dumps(run_report(run), indent=2))
        else:
            done = ", ".join(f"{n} {status}" for status, n in progress.items() if n)
            self.stdout.write(f"run {run.uuid}: {done or 'no sources'}")
        if progress["failed"]:
            raise CommandError(
                f"{progress['failed']} job(s) failed (the errors are in the admin); run the command again to resume."
            )
