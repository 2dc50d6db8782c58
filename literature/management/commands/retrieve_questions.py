from django.core.management.base import BaseCommand, CommandError

from annotate.management.common import study_named
from core.commands import check_at_least_one
from literature.engines import LocalEngine
from literature.models import Question, Retrieval
from literature.selectors import retrieval_scores_of
from literature.services import retrieve_for_question
from stats.retrieval import study_scores


class Command(BaseCommand):
    help = (
        "Retrieve articles for each question of a study with the local BM25 engine (the question's text as the "
        "query) and print retrieval recall against the questions' references (docs/questions.md)."
    )

    def add_arguments(self, parser):
        parser.add_argument("--study", required=True)
        parser.add_argument(
            "--regime", choices=Retrieval.Regime.values, action="append", help="repeatable; default: all three"
        )
        parser.add_argument("--limit", type=int, default=20, help="articles kept per question (default 20)")

    def handle(self, *args, study: str, regime: list[str] | None, limit: int, **options):
        study_obj = study_named(study)
        check_at_least_one(limit, "--limit")
        questions = list(Question.objects.filter(study=study_obj).order_by("key"))
        if not questions:
            raise CommandError(f"study {study!r} has no questions: import_questions first")
        engine = LocalEngine(study_obj)
        for name in regime or Retrieval.Regime.values:
            for question in questions:
                retrieve_for_question(question=question, engine=engine, regime=name, limit=limit)
            summary = study_scores([row.scores for row in retrieval_scores_of(study_obj, engine="local", regime=name)])
            recall = summary["retrieved_recall"]
            included = summary["source_included"]
            self.stdout.write(
                f"{name}: {len(questions)} questions, top {limit} of {len(engine)} sources; "
                f"recall of references retrieved {_fmt(recall)}; source included {_fmt(included)}"
            )


def _fmt(figure) -> str:
    if figure.mean is None:
        return "n/a (no question has references)"
    sd = f" (SD {figure.sd:.3f})" if figure.sd is not None else ""
    return f"{figure.mean:.3f}{sd} over {figure.n} questions"
