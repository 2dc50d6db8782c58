import json

from django.core.management.base import BaseCommand, CommandError

from stats.csvinput import CsvInputError, correlate_from_csv
from stats.formatting import correlate_table


class Command(BaseCommand):
    # Works on a file alone: no database, so no system checks needed.
    requires_system_checks = []

    help = (
        "How well automatic metrics track a human score, from a CSV with one row per item: Spearman's "
        "rho and Kendall's tau-b (with Holm-corrected p-values) and pairwise accuracy with tie "
        "calibration (acc_eq). Rows missing either score are dropped and counted."
    )

    def add_arguments(self, parser):
        parser.add_argument("file", help="CSV file with a header row")
        parser.add_argument("--human", required=True, help="column with the human score")
        parser.add_argument(
            "--metric", required=True, action="append", dest="metrics", help="metric column (repeat for several)"
        )
        parser.add_argument("--group", help="column grouping items for acc_eq, e.g. the source document")
        parser.add_argument(
            "--json", action="store_true", dest="as_json", help="print one JSON object instead of a table"
        )

    def handle(self, *args, file: str, human: str, metrics: list[str], group: str | None, as_json: bool, **options):
        try:
            report = correlate_from_csv(file, human=human, metrics=metrics, group=group)
        except CsvInputError as exc:
            raise CommandError(str(exc)) from None
        if as_json:
            self.stdout.write(_dumps(report))
        else:
            self.stdout.write(correlate_table(report, human=human))


def _dumps(report: dict) -> str:
    return json.dumps(report, allow_nan=False, indent=2)
