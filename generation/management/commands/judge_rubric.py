import json

from django.core.management.base import BaseCommand, CommandError

from annotate.exceptions import ApplicationError
from annotate.models import Study
from annotate.selectors.contents import rubric_definition
from annotate.selectors.frames import ratings_frame
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

    def handle(self, *args, study: str, summaries: list[str], limit, **options):
        from analysis.judges import judge_agreement

        study_obj = Study.objects.filter(slug=study).first()
        if study_obj is None:
            raise CommandError(f"no study {study!r}")
        if limit is not None and limit < 1:
            raise CommandError("--limit must be at least 1")
        try:
            require_api_key()
            run, answers = run_judge(study=study_obj, summary_keys=summaries, limit=limit)
        except ApplicationError as exc:
            raise CommandError(exc.message) from None
        counts = {status: sum(1 for a in answers if a.status == status) for status in JudgeAnswer.Status.values}
        definition = rubric_definition(study_obj.rubric)
        human = ratings_frame(study=study_obj)
        valid = [a for a in answers if a.status == JudgeAnswer.Status.VALID]
        report = {"run": str(run.uuid), "judge": run.rater_name, "counts": counts, "questions": []}
        for q in definition.questions:
            if not q.plain_scale:
                continue
            part = human[(human["question"] == q.key) & human["score"].notna()] if len(human) else human
            people = part.rename(columns={"score": "value"})[["item", "rater", "value"]] if len(part) else None
            scores = [
                {"item": str(a.summary.uuid), "value": float(a.answers[q.key])}
                for a in valid
                if isinstance(a.answers.get(q.key), int | float) and not isinstance(a.answers.get(q.key), bool)
            ]
            if people is None or not scores:
                report["questions"].append({"question": q.key, "agreement": None})
                continue
            import pandas as pd

            result = judge_agreement(people, pd.DataFrame(scores), [float(v) for v in q.values], run.rater_name)
            report["questions"].append({"question": q.key, "agreement": result.__dict__})
        if options["json"]:
            self.stdout.write(json.dumps(report, indent=2, default=str))
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
        for answer in answers:
            if answer.status != JudgeAnswer.Status.VALID:
                self.stderr.write(f"{answer.summary.key}: {answer.get_status_display().lower()}: {answer.error}")
