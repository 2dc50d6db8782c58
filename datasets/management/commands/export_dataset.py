from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from annotate.management.common import study_named
from core.exceptions import ApplicationError
from datasets.exporting import FORMATS, PHASES, export_dataset


class Command(BaseCommand):
    help = (
        "Export a study as a dataset folder: tables in JSON Lines, CSV and/or Parquet, a dataset card, "
        "LICENSE and SHA256SUMS (docs/export-format.md). Sources not under CC BY, CC0 or public domain "
        "are exported as identifiers only unless --include-restricted."
    )

    def add_arguments(self, parser):
        parser.add_argument("--study", required=True, help="study slug")
        parser.add_argument("--out", required=True, type=Path, help="output folder (new or empty)")
        parser.add_argument("--format", default=",".join(FORMATS), help=f"comma-separated: {', '.join(FORMATS)}")
        parser.add_argument("--phase", choices=PHASES, default="all")
        parser.add_argument("--include-calibration", action="store_true", help="keep calibration (pilot) batches")
        parser.add_argument(
            "--include-restricted",
            action="store_true",
            help="also export the text of sources whose licence does not allow a CC BY release",
        )

    def handle(self, *args, study: str, out: Path, format: str, phase: str, **options):
        found = study_named(study)
        try:
            result = export_dataset(
                study=found,
                out_dir=out,
                formats=[f.strip() for f in format.split(",") if f.strip()],
                phase=phase,
                include_calibration=options["include_calibration"],
                include_restricted=options["include_restricted"],
            )
        except ApplicationError as exc:
            raise CommandError(exc.message) from None
        self.stdout.write(result.summary_line())
