import json

from django.core.management.base import BaseCommand, CommandError

from annotate.management.common import study_named
from annotate.selectors.contents import rubric_definition
from annotate.selectors.frames import ratings_frame
from core.commands import Progress, add_allow_failures, check_at_least_one, end_with_failures, usage_errors
from core.exceptions import ApplicationError
from core.logs import show_library_logs
from generation.judging import run_judge
from generation.models import JudgeAnswer
from generation.services import require_api_key


class Command(BaseCommand):
    help = (
        "An LLM answers the study's own rubric for each summary (scale, choice, checkbox and text questions, "
        "with rationales), checked by the rubric like a person's answers; then its Cohen's kappa with each rater "
        "beside the raters' with each other. Judge answers are never mixed into the human agreement. "
        "Running it again with the same settings resumes the run."
    )

    def add_arguments(self, parser):
        parser.add_argument("--study", required=True)
        parser.add_argument("--summary", action="append", default=[], dest="summaries", help="summary key")
        parser.add_argument("--limit", type=int, default=None)
        parser.add_argument("--json", action="store_true")
        add_allow_failures(parser)

    def handle(self, *args, study: str, summaries: list[str], limit, **options):
        from generation.selectors import judge_answer_frame
        from stats.frames import prepare_ratings
        from stats.judges import judge_agreement_on

        show_library_logs(options["verbosity"])
        check_at_least_one(limit, "--limit")
        with usage_errors():
            study_obj = study_named(study)
            require_api_key()
        try:
            run, answers = run_judge(
                study=study_obj,
                summary_keys=summaries,
                limit=limit,
                progress=Progress(self.stderr, "summary", "judged"),
            )
        except ApplicationError as exc:
            raise CommandError(exc.message) from None
        counts = {status: sum(1 for a in answers if a.status == status) for status in JudgeAnswer.Status.values}
        definition = rubric_definition(study_obj.rubric)
        human = prepare_ratings(ratings_frame(study=study_obj), definition.na_codes)
        valid = [a for a in answers if a.status == JudgeAnswer.Status.VALID]
        scores = judge_answer_frame(((a.summary.uuid, a.answers) for a in valid), definition)
        report = {"run": str(run.uuid), "judge": run.rater_name, "counts": counts, "questions": []}
        for q in definition.questions:
            if not q.is_scale:
                continue
            result = judge_agreement_on(human, scores, q.key, [float(v) for v in q.values], run.rater_name)
            report["questions"].append({"question": q.key, "agreement": result.__dict__ if result else None})
        report["comparisons"] = comparison_agreement(study_obj, definition, answers, run.rater_name)
        unusable = counts["invalid"] + counts["failed"]
        if options["json"]:
            self.stdout.write(json.dumps(report, indent=2, default=str))
            end_with_failures(self.stderr, unusable, "judge answer", allow=options["allow_failures"])
            return
        self.stdout.write(
            f"{run.rater_name}: {counts['valid']} valid, {counts['invalid']} refused by the rubric, "
            f"{counts['failed']} without a usable answer"
        )
        for row in report["questions"]:
            a = row["agreement"]
            if a is None:
                self.stdout.write(f"  {row['question']}: no human or judge scores to compare")
                continue
            judge = "n/a" if a["judge_mean_quadratic"] is None else f"{a['judge_mean_quadratic']:.3f}"
            people = "n/a" if a["human_mean_quadratic"] is None else f"{a['human_mean_quadratic']:.3f}"
            self.stdout.write(f"  {row['question']}: judge-rater kappa (quadratic) {judge}; rater-rater {people}")
        for row in report["comparisons"]:
            consistency = row["position_consistency"]
            judge = "n/a" if row["judge_mean_kappa"] is None else f"{row['judge_mean_kappa']:.3f}"
            people = "n/a" if row["human_mean_kappa"] is None else f"{row['human_mean_kappa']:.3f}"
            self.stdout.write(
                f"  {row['question']}: position consistency "
                f"{'n/a' if consistency is None else f'{consistency:.3f}'} ({row['n_flips']} flips, counted as ties); "
                f"judge-rater kappa {judge}; rater-rater {people}"
            )
        for answer in answers:
            if answer.status != JudgeAnswer.Status.VALID:
                self.stderr.write(f"{answer.summary.key}: {answer.get_status_display().lower()}: {answer.error}")
        end_with_failures(
            self.stderr,
            unusable,
            "judge answer",
            allow=options["allow_failures"],
            hint=" (refused by the rubric or without a usable answer); run the command again to ask again",
        )


def comparison_agreement(study, definition, answers, judge_name: str) -> list[dict]:
    """Per preference question: the judge's position consistency beside its kappa with each
    rater on the comparisons (stats.pairwise.judge_preference_agreement)."""
    import pandas as pd

    from annotate.selectors.frames import comparisons_frame
    from stats.pairwise import judge_preference_agreement

    keys = [q.key for q in definition.questions if q.preference]
    judged = [a for a in answers if a.status == JudgeAnswer.Status.VALID and a.orders]
    if not keys or not judged:
        return []
    people = comparisons_frame(study=study)
    rows = []
    for key in keys:
        consistent = [
            (str(a.summary.uuid), a.answers[key]["preferred"], bool(a.orders[0].get("consistent", {}).get(key)))
            for a in judged
            if key in a.answers
        ]
        frame = pd.DataFrame(consistent, columns=["item", "preferred", "consistent"])
        rows.append(
            {"question": key, **judge_preference_agreement(people[people["question"] == key], frame, judge_name)}
        )
    return rows
