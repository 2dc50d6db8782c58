"""The study report pairs each human question with an LLM evaluator's overall score (the
mean of its element scores), FactPICO Table 4, beside the element rows (Table 10): on the
demo, with FactPICO's full-text evaluator against the scripted LLM server."""

import pytest
from django.core.management import call_command
from scipy import stats

from analysis.services import compute_study_report
from annotate.models import Study
from annotate.selectors.frames import ratings_frame
from generation.models import EvaluationScore
from tests.generation.scripted_server import Reply

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_report_pairs_each_question_with_the_evaluators_overall_score(serve, settings):
    settings.DEBUG, settings.DEMO_PASSWORD = True, ""
    call_command("load_demo", "--with-answers")
    demo = Study.objects.get(slug="demo-factpico")

    def pico(request):  # a rating from 1 to 4 that differs between summaries and elements
        return Reply(f"Rating: {1 + sum(map(ord, request.prompt)) % 4}")

    serve(steps={"factpico_pico": [pico], "factpico_evidence": [Reply("Rating: 2")]})
    call_command("evaluate", "--study", demo.slug, "--evaluator", "factpico_fulltext")
    report = compute_study_report(study=demo, n_resamples=20)
    column = "eval.factpico_fulltext.overall"
    assert column in report["meta_evaluation"]["summary_level"]
    assert "eval.factpico_fulltext.population" in report["meta_evaluation"]["summary_level"]
    # The overall score by hand: each summary's mean over the elements it has a score for.
    by_summary: dict[str, list[float]] = {}
    for score in EvaluationScore.objects.filter(status="ok").exclude(name__startswith="evidence:"):
        by_summary.setdefault(str(score.summary.uuid), []).append(score.value)
    overall = {item: sum(values) / len(values) for item, values in by_summary.items()}
    frame = ratings_frame(study=demo)
    part = frame[(frame["question"] == "population") & frame["score"].notna()]
    human = part.groupby("item")["score"].mean()
    items = [i for i in human.index if i in overall]
    cell = report["meta_evaluation"]["summary_level"][column]["population"]
    expected = stats.kendalltau([overall[i] for i in items], [human[i] for i in items], variant="b")
    assert cell["n"] == len(items) >= 3 and len({overall[i] for i in items}) > 1
    assert cell["kendall_tau_b"] == pytest.approx(expected.statistic)
