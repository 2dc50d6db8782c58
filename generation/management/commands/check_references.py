import json
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from generation.reference_checks import check_references, context_refs


class Command(BaseCommand):
    help = (
        "Run LitSumm's five reference checks on a summary. CONTEXT.txt holds the context sentences, "
        "each ending with its bracketed reference. Exits 1 when a check fails."
    )

    def add_arguments(self, parser):
        parser.add_argument("summary", type=Path, help="SUMMARY.txt")
        parser.add_argument("context", type=Path, help="CONTEXT.txt")
        parser.add_argument("--json", action="store_true", dest="as_json", help="print the full report as JSON")

    def handle(self, *args, summary: Path, context: Path, as_json: bool = False, **options):
        try:
            summary_text = summary.read_text(encoding="utf-8")
            context_text = context.read_text(encoding="utf-8")
        except OSError as exc:
            raise CommandError(f"cannot read {exc.filename}: {exc.strerror}") from None
        report = check_references(summary_text, context_refs(context_text))
        if as_json:
            self.stdout.write(json.dumps(report.as_dict(), indent=2))
        else:
            failed = ", ".join(report.failed) or "none"
            self.stdout.write(
                f"{report.sentences} sentences, {report.references} references; "
                f"{'passed' if report.passed else 'failed'} (failed checks: {failed})"
            )
        if not report.passed:
            raise CommandError("reference checks failed: " + ", ".join(report.failed))
