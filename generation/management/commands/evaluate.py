from django.core.management.base import BaseCommand, CommandError

from annotate.management.common import study_named
from core.commands import (
    Progress,
    add_allow_failures,
    check_at_least_one,
    counted,
    end_with_failures,
    usage_error,
    usage_errors,
)
from core.exceptions import ApplicationError
from core.logs import show_library_logs
from generation.evaluators import EVALUATORS, needs_llm, run_evaluation
from generation.llm import LLMError
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
            "GENERATION_FACTORED_CLAIMS) or those an LLM decomposes the summary into (see --decompose)",
        )
        parser.add_argument(
            "--check",
            choices=("zero-shot", "few-shot"),
            default=None,
            help="factored_verification: the claim check, zero-shot with reasoning and quotes (default, or "
            "GENERATION_FACTORED_CHECK) or the paper's few-shot prompt (appendix A.1.2)",
        )
        parser.add_argument(
            "--decompose",
            choices=("summary", "sentences"),
            default=None,
            help="factored_verification --claims decomposed: decompose the whole summary (default, as the "
            "paper's A.1.1, or GENERATION_FACTORED_DECOMPOSE) or each cited sentence",
        )
        add_allow_failures(parser)

    def handle(self, *args, study: str, evaluator: str, summaries: list[str], limit, claims, **options):
        show_library_logs(options["verbosity"])
        check_at_least_one(limit, "--limit")
        with usage_errors():
            study_obj = study_named(study)
            if needs_llm(evaluator):
                require_api_key()
        try:
            run = run_evaluation(
                study=study_obj,
                evaluator_name=evaluator,
                summary_keys=summaries,
                limit=limit,
                claims=claims,
                check=options["check"],
                decompose=options["decompose"],
                progress=Progress(self.stderr, "summary", "scored", total=0),
            )
        except LLMError as exc:
            raise CommandError(exc.message) from None
        except ApplicationError as exc:  # an option the evaluator refuses, before any summary
            raise usage_error(exc.message) from None
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
        end_with_failures(
            self.stderr,
            failed.values("summary").distinct().count(),
            "summary",
            allow=options["allow_failures"],
            plural="summaries",
            hint=" (a score without a usable answer); run the command again to ask for them again",
        )
