"""The reference metrics as a stored evaluator: run from the command or the
admin page without an API key, checked against rouge_score itself, and read back by the
study report instead of being computed again (only today's version; the rest computed)."""

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from rouge_score import rouge_scorer

from analysis.services import compute_study_report
from annotate.models import Study, Summary
from generation.models import EvaluationRun, EvaluationScore, LLMCall
from stats.metrics import REFERENCE_DEFINITION
from tests.generation.scripted_server import Reply

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def demo(settings):
    settings.DEBUG, settings.DEMO_PASSWORD = True, ""
    call_command("load_demo", "--with-answers")
    return Study.objects.get(slug="demo-factpico")


def test_reference_scores_are_stored_without_a_model_and_match_rouge_score(demo, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    call_command("evaluate", "--study", demo.slug, "--evaluator", "reference")
    run = EvaluationRun.objects.get()
    assert run.evaluator == "reference" and run.config["definition"] == REFERENCE_DEFINITION == 2
    assert not LLMCall.objects.exists()
    scorer = rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL"], use_stemmer=True)
    summaries = list(Summary.objects.filter(study=demo).select_related("source"))
    for summary in summaries[:5]:
        stored = {s.name: s.value for s in EvaluationScore.objects.filter(run=run, summary=summary)}
        expected = scorer.score(summary.source.text, summary.text)
        for name in ("rouge1", "rouge2", "rougeL"):
            assert stored[name] == pytest.approx(expected[name].fmeasure, abs=1e-12)
        assert stored["n_words"] == len(summary.text.split())
        assert stored["delta_fk"] == pytest.approx(stored["fk_grade_source"] - stored["fk_grade_summary"])
    assert EvaluationScore.objects.filter(run=run).values("summary").distinct().count() == len(summaries)
    # Run again: nothing to do, nothing new.
    count = EvaluationScore.objects.count()
    call_command("evaluate", "--study", demo.slug, "--evaluator", "reference")
    assert EvaluationScore.objects.count() == count and EvaluationRun.objects.count() == 1


def test_the_report_reads_the_stored_reference_scores_of_todays_version_only(demo):
    call_command("evaluate", "--study", demo.slug, "--evaluator", "reference")
    run = EvaluationRun.objects.get()
    one, two = Summary.objects.filter(study=demo).order_by("key")[:2]
    # A stored value the report could not have computed: it must come from the store.
    EvaluationScore.objects.filter(run=run, summary=one, name="rougeL").update(value=0.123456)
    n = Summary.objects.filter(study=demo).count()
    report = compute_study_report(study=demo, n_resamples=20)
    rows = {row["item"]: row for row in report["metrics"]}
    assert rows[str(one.uuid)]["rougeL"] == 0.123456
    assert report["reference_metrics"] == {"stored": n, "computed": 0}
    assert not any(c.startswith("eval.reference") for c in report["meta_evaluation"]["summary_level"])
    computed_here = rows[str(two.uuid)]["rougeL"]

    # A summary without stored scores is computed, the same as the store would say.
    EvaluationScore.objects.filter(run=run, summary=two).delete()
    report = compute_study_report(study=demo, n_resamples=20)
    assert report["reference_metrics"] == {"stored": n - 1, "computed": 1}
    assert {row["item"]: row for row in report["metrics"]}[str(two.uuid)]["rougeL"] == pytest.approx(computed_here)

    # Scores of another version (another rouge-score, say) are not mixed in.
    EvaluationRun.objects.filter(pk=run.pk).update(version="older-version")
    report = compute_study_report(study=demo, n_resamples=20)
    assert report["reference_metrics"] == {"stored": 0, "computed": n}
    assert {row["item"]: row for row in report["metrics"]}[str(one.uuid)]["rougeL"] != 0.123456


def test_on_the_demo_an_admin_runs_two_evaluators_and_the_report_shows_each_against_each_question(
    serve, demo, client, monkeypatch
):
    """The issue's "done when": two evaluators started from the admin page, their progress
    shown, and the report's meta-evaluation has both, summary and system level, with intervals."""
    from core.background import wait_for_pool
    from generation import tasks

    serve(
        steps={
            "factpico_pico": [lambda r: Reply(f"Rating: {1 + len(r.prompt) % 4}")],
            "factpico_evidence": [Reply("Rating: 2")],
        }
    )
    url = f"/studies/{demo.slug}/evaluators/"
    client.force_login(get_user_model().objects.get(username="admin"))
    page = client.get(url).content.decode()
    assert "Run reference" in page and "no model needed" in page
    for name in ("reference", "factpico_fulltext"):
        response = client.post(url, {"evaluator": name}, follow=True)
        assert f"{name} is running" in response.content.decode()
        wait_for_pool(tasks.POOL, timeout=600)
    n = Summary.objects.filter(study=demo).count()
    page = client.get(url).content.decode()
    assert page.count(f"<td>{n} of {n}</td><td>0</td>") == 2

    report = compute_study_report(study=demo, n_resamples=50)
    summary_level = report["meta_evaluation"]["summary_level"]
    system_level = report["meta_evaluation"]["system_level"]
    for column in ("rougeL", "delta_fk", "eval.factpico_fulltext.population", "eval.factpico_fulltext.outcome"):
        assert column in summary_level and column in system_level
        cell = summary_level[column]["population"]
        assert cell["n"] >= 5  # the summaries people rated
        assert cell["ci_low"] is not None and cell["ci_low"] <= cell["ci_high"]
    assert report["reference_metrics"]["stored"] == n


@pytest.mark.django_db(transaction=False)
def test_the_report_page_plots_each_evaluator_against_each_question(client, monkeypatch):
    """Scatter, density (FactPICO Table 11's standardised distributions) and one panel per
    human question for a stored evaluator's column, on the page and as images."""
    import io
    import xml.etree.ElementTree as ET

    from django.urls import reverse

    from analysis import services
    from datasets.demo import DEMO_STUDY
    from generation.evaluators import FactPicoFullText
    from tests.analysis.reports import open_computed
    from tests.analysis.test_analyze_study import rate_demo

    monkeypatch.setattr(services, "BOOTSTRAP_RESAMPLES", 30)
    call_command("load_demo", stdout=io.StringIO())
    rate_demo()
    study = Study.objects.get(slug=DEMO_STUDY)
    run = EvaluationRun.objects.create(study=study, evaluator=FactPicoFullText.name, version="v", config={})
    for i, summary in enumerate(Summary.objects.filter(study=study).order_by("key")):
        EvaluationScore.objects.create(run=run, summary=summary, name="population", value=float(i % 4 + 1), status="ok")
    client.force_login(get_user_model().objects.get(username="admin"))
    page = open_computed(client, reverse("analysis:report", args=[study.slug]), plots=True).content.decode()
    column = "eval.factpico_fulltext.population"
    for kind in ("scatter", "density", "questions"):
        url = reverse("analysis:plot", args=[study.slug, kind, column, "svg"])
        assert url in page
        response = client.get(url)
        assert response.status_code == 200 and ET.fromstring(response.content).tag.endswith("svg")
        png = client.get(reverse("analysis:plot", args=[study.slug, kind, column, "png"]))
        assert png.content.startswith(b"\x89PNG\r\n\x1a\n")
    assert client.get(reverse("analysis:plot", args=[study.slug, "density", "eval.nothing", "png"])).status_code == 404


def test_a_per_finding_question_counts_for_its_summary_as_the_mean_over_its_findings(demo):
    """FactPICO's evidence-inference column: each summary's score is the mean of its raters'
    scores over the source's findings, set against the metric (checked against scipy)."""
    from scipy import stats

    from annotate.selectors.frames import ratings_frame

    report = compute_study_report(study=demo, n_resamples=20)
    frame = ratings_frame(study=demo)
    part = frame[(frame["question"] == "evidence") & frame["score"].notna()]
    human = part.groupby("item")["score"].mean()
    metric = {row["item"]: row["rougeL"] for row in report["metrics"]}
    items = sorted(human.index)
    cell = report["meta_evaluation"]["summary_level"]["rougeL"]["evidence"]
    expected = stats.kendalltau([metric[i] for i in items], [human[i] for i in items], variant="b")
    assert cell["n"] == len(items) >= 3
    assert cell["kendall_tau_b"] == pytest.approx(expected.statistic)
