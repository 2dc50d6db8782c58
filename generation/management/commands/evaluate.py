from django.core.management.base import BaseCommand, CommandError

from annotate.management.common import study_named
from core.commands import Progress, check_at_least_one, counted
from core.exceptions import ApplicationError
from core.logs import show_library_logs
from generation.evaluators import EVALUATORS, needs_llm, run_evaluation
from generation.models import EvaluationScore
from generation.services import require_api_key


class Command(BaseCommand):
    help = (
        "Run an automatic evaluator over a study's summaries and store its scores beside the human ratings "
        "(the study report correlates them with every human question). The same settings resume the run; "
        "other settings make a new one (docs/evaluators.md)."
    )

    def add_arguments(self, parser):
        parser.add_argument("--study", required=True)
        parser.add_argument("--evaluator", required=True, choices=sorted(EVALUATORS))
        parser.add_argument("--summary", action="append", default=[], dest="summaries", help="summary key")
        parser.add_argument("--limit", type=int, default=None)
        parser.add_argument(
            "--claims",
            choices=("sentences", "decomposed"),
            default=None,
            help="factored_verification: the claims checked are the sentences (default, or "
            "GENERATION_FACTORED_CLAIMS) or those an LLM decomposes each cited sentence into",
        )

    def handle(self, *args, study: str, evaluator: str, summaries: list[str], limit, claims, **options):
        show_library_logs(options["verbosity"])
        study_obj = study_named(study)
        check_at_least_one(limit, "--limit")
        try:
            if needs_llm(evaluator):
                require_api_key()
            run = run_evaluation(
                study=study_obj,
                evaluator_name=evaluator,
                summary_keys=summaries,
                limit=limit,
                claims=claims,
                progress=Progress(self.stderr, "summary", "scored", total=0),
            )
        except ApplicationError as exc:
            raise CommandError(exc.message) from None
        counts: dict[tuple[str, str], int] = {}
        for name, status in run.scores.values_list("name", "status"):
            key = (name.split(":")[0], status)
            counts[key] = counts.get(key, 0) + 1
        names = sorted({name for name, _ in counts})
        parts = [
            f"{name}: "
            + ", ".join(
                f"{counts[(name, s)]} {label.lower()}"
                for s, label in EvaluationScore.Status.choices
                if (name, s) in counts
            )
            for name in names
        ]
        self.stdout.write(f"{run}: " + "; ".join(parts))
        failed = run.scores.filter(status=EvaluationScore.Status.FAILED).select_related("summary")
        for score in failed[:5]:
            self.stderr.write(f"{score.summary.key} {score.name}: {score.error}")
        if failed.count() > 5:
            self.stderr.write(f"… and {counted(failed.count() - 5, 'other failed score')} (the admin lists them all)")
