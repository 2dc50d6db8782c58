"""Compute studies' reports into the report cache now, in this process, so that the report
page's first visit serves them instead of queueing them.

    manage.py compute_reports demo-litsumm demo-factpico [--phase all]

`make run` starts it in a process of its own once the demo is loaded
(config/gunicorn.conf.py, config.demo_reports): gunicorn's master and workers never
import the statistics. It goes through the same cache as the page
(services.request_study_report: keyed by a fingerprint of the inputs, so a report of
answers that changed since is never served): a report already computed is left alone, one
being computed by a live worker too; a pending one is claimed with the same conditional
update a worker uses, so a web worker and this process never both compute it. Study by study
its numbers and every plot's SVG (the page whole), then every study's PNGs (the downloads).
"""

from __future__ import annotations

import time

from django.core.management.base import BaseCommand, CommandError

from analysis import services
from analysis.models import AnalysisResult
from annotate.models import Study


class Command(BaseCommand):
    help = "Compute studies' reports (numbers, then plots) into the cache the report page reads."

    def add_arguments(self, parser):
        parser.add_argument("slugs", nargs="+", help="the studies, in the order to compute them")
        parser.add_argument("--phase", default="all", choices=services.PHASES)

    def handle(self, *args, slugs: list[str], phase: str, **options):
        studies = []
        for slug in slugs:
            study = Study.objects.filter(slug=slug).first()
            if study is None:
                raise CommandError(f"No study {slug!r}.")
            studies.append(study)
        # Every row first (pending), so that a visit meanwhile finds it queued here rather
        # than queueing it in its own worker.
        results = [services.request_study_report(study=s, phase=phase, enqueue=lambda _id: None) for s in studies]
        # Study by study its numbers and the SVGs the page shows; then the PNGs (downloads).
        for study, result in zip(studies, results, strict=True):
            started, cpu = time.monotonic(), time.process_time()
            if result.status == AnalysisResult.Status.PENDING:
                done = services.run_study_report(result_id=result.pk)
                state = done.status if done is not None else "taken by a worker"
            else:
                state = f"{result.status} already"
            numbers = (time.monotonic() - started, time.process_time() - cpu)
            drawn = services.draw_missing_plots(result_id=result.pk, formats=("svg",))
            self.stdout.write(
                f"{study.slug}: numbers {state} ({numbers[0]:.1f} s, {numbers[1]:.1f} CPU s), {drawn} SVGs "
                f"(then {time.monotonic() - started:.1f} s, {time.process_time() - cpu:.1f} CPU s)"
            )
        for study, result in zip(studies, results, strict=True):
            started, cpu = time.monotonic(), time.process_time()
            drawn = services.draw_missing_plots(result_id=result.pk)
            wall, used = time.monotonic() - started, time.process_time() - cpu
            self.stdout.write(f"{study.slug}: {drawn} PNGs ({wall:.1f} s, {used:.1f} CPU s)")
