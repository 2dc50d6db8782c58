import json

from django.core.management.base import BaseCommand, CommandError

from annotate.management.common import study_named
from annotate.selectors.contents import rubric_definition
from annotate.selectors.frames import ratings_frame
from generation.calibration import calibrate, hallucination_labels
from generation.selectors import factored_probabilities


class Command(BaseCommand):
    help = (
        "Calibrate GENERATION_FACTORED_THRESHOLD from a study whose factored-verified summaries raters have "
        "judged: the midpoint of the mean P(summary) of the summaries judged faithful and of those judged "
        "hallucinated (Factored Verification, section 2.3)."
    )

    def add_arguments(self, parser):
        parser.add_argument("--study", required=True, help="study slug")
        parser.add_argument(
            "--question",
            default="failure_modes",
            help="the rubric question whose answer says 'hallucinated' (default: LitSumm's failure_modes)",
        )
        parser.add_argument(
            "--hallucinated",
            nargs="+",
            default=["hallucination"],
            help="answer value(s) that mean hallucinated (default: the 'hallucination' tickbox)",
        )
        parser.add_argument("--phase", choices=["initial", "post_discussion", "all"], default="all")
        parser.add_argument("--json", action="store_true")

    def handle(self, *args, study: str, question: str, hallucinated: list[str], phase: str, **options):
        study_obj = study_named(study)
        questions = {q.key: q for q in rubric_definition(study_obj.rubric).questions}
        if question not in questions:
            raise CommandError(f"the study's rubric has no question {question!r}; it has {', '.join(questions)}")
        probabilities = factored_probabilities(study_obj)
        if not probabilities:
            raise CommandError(f"no summary of {study} was checked by Factored Verification (pipeline factored)")
        labels = hallucination_labels(
            ratings_frame(study=study_obj, phase=phase),
            question=question,
            values=hallucinated,
            checkboxes=questions[question].several_options,
        )
        try:
            result = calibrate(probabilities, labels)
        except ValueError:
            raise CommandError(
                "calibration needs factored-verified summaries that raters judged faithful and others they "
                f"judged hallucinated ({question} = {' or '.join(hallucinated)}); this study has not both"
            ) from None
        if options["json"]:
            self.stdout.write(json.dumps(result.as_dict(), indent=2))
            return
        self.stdout.write(
            f"GENERATION_FACTORED_THRESHOLD={result.threshold:.4f}  (mean P {result.mean_p_faithful:.3f} over "
            f"{result.n_faithful} faithful, {result.mean_p_hallucinated:.3f} over {result.n_hallucinated} "
            f"hallucinated; {result.accuracy:.0%} classified right on these same summaries; "
            f"left out: {result.n_ties} tied, {result.n_without_p} without P)"
        )
