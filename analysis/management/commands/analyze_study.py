from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from analysis.services import PHASES, write_study_report
from annotate.management.common import study_named
from core.commands import check_at_least_one
from core.exceptions import ApplicationError


class Command(BaseCommand):
    help = (
        "Analyse a study into a folder: agreement per scale question with bootstrap intervals, score "
        "histograms, per-summary means, scores by field, systems compared (mean, SD, IQR and bootstrap interval "
        "per generator and field; every two systems paired on their common sources with a Wilcoxon test, "
        "Holm-corrected), consensus answers after adjudication, failure-mode counts per rater, automatic "
        "metrics, metric-vs-human correlations, as CSV and JSON, and plots as PNG and SVG."
    )

    def add_arguments(self, parser):
        parser.add_argument("slug", help="study slug")
        parser.add_argument("--out", required=True, type=Path, help="output folder (created if missing)")
        parser.add_argument("--phase", choices=PHASES, default="all", help="which answers count (default: all)")
        parser.add_argument(
            "--by",
            action="append",
            dest="group_fields",
            help="field to split scores and compare systems by: generator, source.FIELD (source metadata) or "
            "summary.FIELD (summary metadata), e.g. --by summary.system (repeatable; default: every source field, "
            "and every summary field of text, with 2 to 20 distinct values)",
        )
        parser.add_argument("--resamples", type=int, default=None, help="bootstrap resamples (default 1000)")

    def handle(self, *args, slug: str, out: Path, phase: str, group_fields, resamples: int | None, **options):
        study = study_named(slug)
        check_at_least_one(resamples, "--resamples")
        try:
            written = write_study_report(
                study=study, out=out, phase=phase, group_fields=group_fields, n_resamples=resamples
            )
        except ApplicationError as exc:
            raise CommandError(exc.message) from None
        self.stdout.write(f"Wrote {len(written)} files for {study.slug} ({phase}) to {out}.")
