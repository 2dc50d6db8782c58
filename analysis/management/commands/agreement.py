import json

from django.core.management.base import BaseCommand, CommandError

from stats.csvinput import CsvInputError, agreement_from_csv, parse_categories
from stats.formatting import agreement_table


class Command(BaseCommand):
    # Works on a file alone: no database, so no system checks needed.
    requires_system_checks = []

    help = (
        "Inter-rater agreement of a CSV file with columns item,rater,value (+ an optional question "
        "column): percent agreement, Fleiss, Randolph, Gwet's AC1, PABAK, Krippendorff's alpha and "
        "Cohen's kappa per rater pair. Empty value cells are missing ratings."
    )

    def add_arguments(self, parser):
        parser.add_argument("file", help="CSV file with a header row")
        parser.add_argument(
            "--categories",
            help="the FULL scale, comma-separated, e.g. 1,2,3,4,5 (default: the sorted observed values)",
        )
        parser.add_argument("--question-column", help="column naming the question; agreement is computed per question")
        parser.add_argument(
            "--json", action="store_true", dest="as_json", help="print one JSON object instead of a table"
        )

    def handle(self, *args, file: str, categories: str | None, question_column: str | None, as_json: bool, **options):
        try:
            scale = parse_categories(categories) if categories else None
            report = agreement_from_csv(file, categories=scale, question_column=question_column)
        except CsvInputError as exc:
            raise CommandError(str(exc)) from None
        if as_json:
            self.stdout.write(_dumps(report))
        else:
            self.stdout.write(agreement_table(report))


def _dumps(report: dict) -> str:
    # allow_nan=False: the report has None where a value is undefined; a NaN here is a bug.
    return json.dumps(report, allow_nan=False, indent=2)
