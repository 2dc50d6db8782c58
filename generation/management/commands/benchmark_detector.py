import json
from pathlib import Path

from django.core.management.base import BaseCommand

from core.commands import Progress, add_allow_failures, counted, end_with_failures, usage_error
from core.exceptions import ApplicationError
from core.logs import show_library_logs
from generation.detectors import DETECTORS, benchmark, read_halueval, split_records
from generation.llm import Gateway
from generation.services import require_api_key


class Command(BaseCommand):
    help = (
        "Benchmark hallucination detectors on a HaluEval summarisation file (JSON Lines with document, "
        "right_summary, hallucinated_summary): threshold fitted on a seeded calibration split, accuracy with a "
        "95% Wilson interval on the rest (docs/generation.md)."
    )

    def add_arguments(self, parser):
        parser.add_argument("file", type=Path)
        parser.add_argument("--detector", action="append", choices=DETECTORS, help="repeatable; default: all of them")
        parser.add_argument("--calibration", type=int, default=None, help="records for the threshold (default 20%%)")
        parser.add_argument("--seed", type=int, default=0)
        parser.add_argument("--limit", type=int, default=None, help="use only the first N records")
        parser.add_argument("--json", action="store_true")
        parser.add_argument(
            "--claims",
            choices=("sentences", "decomposed"),
            default="sentences",
            help="the factored detector's claims: the summary's sentences, or an LLM's decomposition (A.1.1)",
        )
        add_allow_failures(parser)

    def handle(self, *args, file: Path, detector, calibration, seed: int, limit, **options):
        show_library_logs(options["verbosity"])
        try:
            require_api_key()
        except ApplicationError as exc:
            raise usage_error(exc.message) from None
        try:
            with file.open(encoding="utf-8-sig") as handle:  # a byte-order mark is dropped
                records = read_halueval(handle)
        except FileNotFoundError:
            raise usage_error(f"{file}: no such file") from None
        except (ApplicationError, UnicodeDecodeError) as exc:
            raise usage_error(f"{file}: {getattr(exc, 'message', exc)}") from None
        if limit is not None:
            if limit < 2:
                raise usage_error("--limit must be at least 2")
            records = records[:limit]
        n_calibration = calibration if calibration is not None else max(1, round(len(records) * 0.2))
        try:
            split_records(records, calibration=n_calibration, seed=seed)  # the same for every detector
        except ApplicationError as exc:
            raise usage_error(exc.message) from None
        results, unusable = [], []
        gateway = Gateway()
        for name in detector or DETECTORS:
            try:
                result = benchmark(
                    records=records,
                    detector_name=name,
                    calibration=n_calibration,
                    seed=seed,
                    gateway=gateway,
                    claims=options["claims"],
                    progress=Progress(self.stderr, "pair", f"scored by {name}"),
                )
            except ApplicationError as exc:  # this detector could not be calibrated: say why, try the next
                unusable.append(name)
                self.stderr.write(f"{name}: {exc.message}")
                continue
            results.append(result)
            if not options["json"]:
                self.stdout.write(
                    f"{name}: accuracy {result.accuracy:.3f} (95% CI {result.ci_low:.3f}-{result.ci_high:.3f}) on "
                    f"{result.n_test_pairs} test pairs ({result.test_records} records); threshold "
                    f"{result.threshold:.3f} from {result.calibration_records} records (calibration accuracy "
                    f"{result.calibration_accuracy:.3f}); {counted(result.failures, 'pair')} failed"
                )
            for example in result.failure_examples:
                self.stderr.write(f"{name}: {example}")
        if options["json"]:
            self.stdout.write(json.dumps([r.as_dict() for r in results], indent=2))
        end_with_failures(
            self.stderr,
            len(unusable),
            "detector",
            allow=options["allow_failures"],
            hint=f" to give a result: {', '.join(unusable)} (the reasons are above)",
        )
        end_with_failures(
            self.stderr,
            sum(r.failures for r in results),
            "pair",
            allow=options["allow_failures"],
            hint=" (no usable answer; each detector's count is above)",
        )
