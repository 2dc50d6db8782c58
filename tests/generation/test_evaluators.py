"""FactPICO's full-text LLM evaluator against the scripted server: the paper's reversed
scale, N/A kept as N/A, malformed answers recorded as failures, scores in the report."""

import pytest
from django.core.management import call_command
from scipy import stats

from analysis.services import compute_study_report
from annotate.models import Study, Summary
from annotate.selectors.frames import ratings_frame
from generation.models import EvaluationRun, EvaluationScore, LLMCall
from tests.generation.scripted_server import Reply

pytestmark = pytest.mark.django_db(transaction=True)


def rating_for(text: str) -> int:
    return 1 + sum(map(ord, text)) % 4  # 1..4: accurate .. missing


@pytest.fixture
def demo(settings):
    settings.DEBUG, settings.DEMO_PASSWORD = True, ""
    call_command("load_demo", "--with-answers")
    return Study.objects.get(slug="demo-factpico")


def test_factpico_fulltext_scores_with_the_papers_reversed_scale(serve, demo, capsys):
    summaries = list(Summary.objects.filter(study=demo).order_by("key"))
    odd, na = summaries[0].text, summaries[1].text

    def pico(request):
        summary = request.prompt.split("Summary: ", 1)[1].strip()
        element = "comparator" if "the comparator" in request.prompt.split("Abstract:")[0] else ""
        if summary == odd and element:
            return Reply("I would rather not say.")  # malformed: no rating
        if summary == na and element:
            return Reply("Rating: 5\nThere is no comparator.")
        return Reply(f"Rationale: compared.\nRating: {rating_for(summary)}")

    def evidence(request):
        return Reply("Rating: 1 - accurate.")

    serve(steps={"factpico_pico": [pico], "factpico_evidence": [evidence]})
    call_command("evaluate", "--study", "demo-factpico", "--evaluator", "factpico_fulltext", "--allow-failures")
    run = EvaluationRun.objects.get()
    scores = {(s.summary.text, s.name): s for s in EvaluationScore.objects.filter(run=run).select_related("summary")}
    some = summaries[2]
    assert scores[(some.text, "population")].value == 5 - rating_for(some.text)  # H.1: 5 - rating
    assert scores[(some.text, "population")].call_id is not None
    assert "Rating:" in scores[(some.text, "population")].rationale
    bad = scores[(odd, "comparator")]
    assert bad.status == "failed" and bad.value is None and "no rating from 1 to 5" in bad.error
    assert scores[(na, "comparator")].status == "na" and scores[(na, "comparator")].value is None
    # Evidence: each finding 5 - 1 = 4, and their mean.
    findings = some.source.findings.count()
    assert findings and scores[(some.text, "evidence")].value == 4.0
    assert sum(1 for (text, name) in scores if text == some.text and name.startswith("evidence:")) == findings
    # Resuming asks only for what failed.
    before = LLMCall.objects.count()
    call_command("evaluate", "--study", "demo-factpico", "--evaluator", "factpico_fulltext", "--allow-failures")
    assert LLMCall.objects.count() == before + 1  # the one malformed comparator, asked again

    # The report correlates the stored scores with every human question.
    report = compute_study_report(study=demo, n_resamples=20)
    column = "eval.factpico_fulltext.population"
    assert column in report["meta_evaluation"]["summary_level"]
    metric = {row["item"]: row.get(column) for row in report["metrics"]}
    frame = ratings_frame(study=demo)
    part = frame[(frame["question"] == "population") & frame["score"].notna()]
    human = part.groupby("item")["score"].mean()
    items = [i for i in human.index if metric.get(i) is not None]
    cell = report["meta_evaluation"]["summary_level"][column]["population"]
    expected = stats.kendalltau([metric[i] for i in items], [human[i] for i in items], variant="b")
    assert cell["n"] == len(items) >= 3
    assert cell["kendall_tau_b"] == pytest.approx(expected.statistic)


def test_an_admin_starts_an_evaluator_from_its_page_and_follows_it(serve, demo, client, monkeypatch):
    from django.contrib.auth import get_user_model

    from core.background import wait_for_pool
    from generation import tasks

    serve(steps={"factpico_pico": [Reply("Rating: 2")], "factpico_evidence": [Reply("Rating: 1")]})
    url = "/studies/demo-factpico/evaluators/"
    client.force_login(get_user_model().objects.get(username="rater1"))
    assert client.get(url).status_code == 404
    assert client.post(url, {"evaluator": "factpico_fulltext"}).status_code == 404
    assert not EvaluationRun.objects.exists()
    client.force_login(get_user_model().objects.get(username="admin"))
    assert "Automatic evaluators" in client.get("/studies/demo-factpico/").content.decode()
    response = client.post(url, {"evaluator": "factpico_fulltext"}, follow=True)
    assert "factpico_fulltext is running" in response.content.decode()
    wait_for_pool(tasks.POOL, timeout=300)  # the evaluation thread is done
    page = client.get(url).content.decode()
    n = Summary.objects.filter(study=demo).count()
    assert f"<td>{n} of {n}</td><td>0</td><td>done</td>" in page
    assert "js/evaluators.js" not in page  # nothing left running: the page stops updating
    assert set(EvaluationScore.objects.values_list("value", flat=True)) == {3.0, 4.0}
    # Without a key: refused with the reason, nothing started.
    monkeypatch.delenv("OPENAI_API_KEY")
    response = client.post(url, {"evaluator": "factpico_fulltext"}, follow=True)
    assert "OPENAI_API_KEY is not set" in response.content.decode()
    assert EvaluationRun.objects.count() == 1


def test_factored_verification_as_a_stored_evaluator_of_cited_answers(serve, settings):
    """The demo's template answers (not written by the pipeline) verified claim by claim
    against the articles they cite; a summary citing nothing is N/A, not a score."""
    from literature.demo import QUESTION_STUDY
    from tests.generation.conftest import claim_answer

    settings.DEBUG, settings.DEMO_PASSWORD = True, ""
    call_command("load_question_demo", "--with-answers")
    server = serve(
        steps={
            "factored_verify": [
                lambda r: (
                    claim_answer("no", p_yes=0.2) if "TL;DR" in r.section("Claim") else claim_answer("yes", p_yes=0.9)
                )
            ]
        }
    )
    cited = Summary.objects.filter(study__slug=QUESTION_STUDY, text__contains="[1]").order_by("key").first()
    call_command("evaluate", "--study", QUESTION_STUDY, "--evaluator", "factored_verification", "--summary", cited.key)
    run = EvaluationRun.objects.get(evaluator="factored_verification")
    scores = {s.name: s for s in EvaluationScore.objects.filter(run=run, summary=cited)}
    # Every cited sentence of this answer was checked, each once; the judge rejects the TL;DR only.
    k = len(server.requests)
    assert k >= 2 and sum("TL;DR" in r.section("Claim") for r in server.requests) == 1
    assert scores["unsupported"].value == 1.0
    assert scores["supported_share"].value == pytest.approx((k - 1) / k)
    assert scores["p_summary"].value == pytest.approx(0.2 * 0.9 ** (k - 1))
    call_command("evaluate", "--study", QUESTION_STUDY, "--evaluator", "factored_verification")
    uncited = Summary.objects.filter(study__slug=QUESTION_STUDY).exclude(text__contains="[").first()
    if uncited is not None:
        assert {s.status for s in EvaluationScore.objects.filter(run=run, summary=uncited)} == {"na"}
    report = compute_study_report(study=Study.objects.get(slug=QUESTION_STUDY), n_resamples=10)
    assert "eval.factored_verification.p_summary" in report["meta_evaluation"]["summary_level"]
    assert "eval.factored_verification.unsupported" in report["correlation"]["metric_columns"]


def test_factpico_extraction_rates_from_the_extracted_pico_and_results_only(serve, demo):
    """H.4 extracts quotes from abstract and summary, H.3 rates each element from the two
    extractions (never the full texts), H.6 rates each finding against the summary's
    extracted results; the abstract is extracted once per source; an empty extraction
    makes failures, not scores."""
    summaries = list(Summary.objects.filter(study=demo).select_related("source").order_by("key"))
    empty = summaries[1]

    def extract(request):
        passage = request.prompt.split("Pull direct quotes from the passage:", 1)[1].strip()
        if passage == empty.text:
            return Reply("   ")
        if any(passage == s.source.text for s in summaries):
            return Reply(f"ABSTRACT-PICO {len(passage)}")
        return Reply(f"SUMMARY-PICO {len(passage)}")

    def parts(request):
        """The prompt's "Abstract: …" and "Summary: …" (same line as the label)."""
        abstract, summary = request.prompt.rsplit("\n\nAbstract: ", 1)[1].split("\n\nSummary: ", 1)
        return abstract.strip(), summary.strip()

    def pico_only(request):
        abstract, summary = parts(request)
        assert abstract.startswith("ABSTRACT-PICO") and summary.startswith("SUMMARY-PICO")
        return Reply("Rating: 2\nSomewhat vague.")

    def evidence(request):
        assert parts(request)[1].startswith("SUMMARY-PICO")
        return Reply("Rating: 1")

    def results(request):
        return Reply("SUMMARY-PICO results")

    server = serve(
        steps={
            "factpico_extract_pico": [extract],
            "factpico_pico_only": [pico_only],
            "factpico_extract_evidence": [results],
            "factpico_evidence_extracted": [evidence],
        }
    )
    keys = [s.key for s in summaries[:3]]
    call_command(
        "evaluate",
        "--study",
        demo.slug,
        "--evaluator",
        "factpico_extraction",
        *sum([["--summary", k] for k in keys], []),
        "--allow-failures",
    )
    run = EvaluationRun.objects.get(evaluator="factpico_extraction")
    scores = {(s.summary.key, s.name): s for s in EvaluationScore.objects.filter(run=run).select_related("summary")}
    good = summaries[0]
    assert scores[(good.key, "population")].value == 3.0  # 5 - 2
    assert scores[(good.key, "evidence")].value == 4.0  # 5 - 1, the mean over findings
    failed = scores[(empty.key, "outcome")]
    assert failed.status == "failed" and failed.value is None and "came back empty" in failed.error
    assert server.steps_seen().count("factpico_pico_only") == 4 * 2  # the two summaries with an extraction
    # Each source's abstract extracted once in the run.
    sources = {s.source.text for s in summaries[:3]}
    abstract_calls = [
        r for r in server.requests if r.step == "factpico_extract_pico" and any(t in r.prompt for t in sources)
    ]
    abstract_calls = [r for r in abstract_calls if r.prompt.split("passage:", 1)[1].strip() in sources]
    assert len(abstract_calls) == len(sources)
