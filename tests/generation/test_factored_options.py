"""Factored Verification's options from the paper: claims decomposed by an LLM (appendix
A.1.1) in benchmark_detector and the factored_verification evaluator; the self-correction
baseline (§4.1, A.4, A.5) as a detector and as a pipeline; separate judge and critique
models (Table 3). The real `openai` client against the scripted server."""

import json

import pytest
from django.core.management import call_command

from annotate.models import Summary
from generation.claims import read_claims
from generation.detectors import Detector, Pair
from generation.llm import Gateway
from generation.models import EvaluationRun
from generation.pipelines import pipeline_spec
from tests.generation.conftest import claim_answer, honest_model
from tests.generation.scripted_server import Reply
from tests.generation.test_factored_verification import FALSE, TWO_SOURCES, judge_cured
from tests.generation.test_litsumm_pipeline import run_job

pytestmark = pytest.mark.django_db

DOC = "The council approved a new park on Monday. It will open in May and cost two million pounds."
MIXED = "The council approved a park and INVENTED the mayor paid for it."


def split_on_and(request):
    """The decomposer: a text's parts around " and " are its claims."""
    return Reply(json.dumps({"claims": [p.strip(" .") + "." for p in request.section("Text").split(" and ")]}))


def verify_invented(request):
    return claim_answer("no", p_yes=0.1) if "INVENTED" in request.section("Claim") else claim_answer("yes", p_yes=0.95)


def test_the_papers_decomposition_layout_is_read_too():
    assert read_claims('{"claims": ["A.", "B."]}') == (["A.", "B."], True)
    assert read_claims("The claims are:\n- The park opens in May.\n- It costs two million.") == (
        ["The park opens in May.", "It costs two million."],
        False,
    )
    assert read_claims('{"claims": []}') == ([], True) and read_claims("No idea.") == ([], False)


def test_decomposed_claims_are_each_verified_and_multiplied(serve):
    server = serve(steps={"factored_decompose": [split_on_and], "factored_verify": [verify_invented]})
    pair = Pair(record=1, document=DOC, summary=MIXED, faithful=False)
    decomposed = Detector("factored", gateway=Gateway(), claims="decomposed").score(pair)
    claims = [r.section("Claim") for r in server.requests if r.step == "factored_verify"]
    assert claims == ["The council approved a park.", "INVENTED the mayor paid for it."]
    assert decomposed == pytest.approx(0.95 * 0.1)  # P(claim 1) x P(claim 2), by hand
    # As sentences, the same summary is one claim: one verification, P = 0.1.
    assert Detector("factored", gateway=Gateway()).score(pair) == pytest.approx(0.1)


def test_an_unusable_decomposition_makes_the_pair_a_failure(serve, tmp_path, capsys):
    serve(steps={"factored_decompose": [Reply("I cannot list them.")], "factored_verify": [verify_invented]})
    pair = Pair(record=1, document=DOC, summary=MIXED, faithful=False)
    with pytest.raises(ValueError, match="no list of claims"):
        Detector("factored", gateway=Gateway(), claims="decomposed").score(pair)


def halueval(tmp_path, n=6):
    rows = [
        {
            "document": f"Story {i}. {DOC}",
            "right_summary": f"Story {i}: the council approved a park and it opens in May.",
            "hallucinated_summary": f"Story {i}: the council approved a park and INVENTED it opens in June.",
        }
        for i in range(n)
    ]
    path = tmp_path / "halueval.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    return path


def test_benchmark_detector_with_decomposed_claims(serve, tmp_path, capsys):
    server = serve(steps={"factored_decompose": [split_on_and], "factored_verify": [verify_invented]})
    call_command(
        "benchmark_detector", str(halueval(tmp_path)), "--detector", "factored", "--claims", "decomposed", "--json"
    )
    (result,) = json.loads(capsys.readouterr().out)
    assert result["failures"] == 0 and result["accuracy"] == 1.0
    decompositions = [r for r in server.requests if r.step == "factored_decompose"]
    assert len(decompositions) == 12  # one per pair: 6 records, two summaries each
    assert len([r for r in server.requests if r.step == "factored_verify"]) == 24  # two claims each


def test_the_self_correction_detector(serve, tmp_path, capsys):
    def harsh(request):
        bad = "INVENTED" in request.section("Summary")
        return Reply(
            json.dumps(
                {
                    "feedback": "The June date is not in the document." if bad else "All supported.",
                    "supported": "no" if bad else "yes",
                }
            )  # fmt: skip
        )

    server = serve(steps={"self_correction_feedback": [harsh]})
    call_command("benchmark_detector", str(halueval(tmp_path)), "--detector", "self_correction", "--json")
    (result,) = json.loads(capsys.readouterr().out)
    assert result["detector"] == "self_correction" and result["accuracy"] == 1.0 and result["failures"] == 0
    prompt = server.requests[0].prompt
    assert DOC in prompt and "VERY harsh" in prompt


# --- the pipelines --------------------------------------------------------------------------


def test_a_separate_critique_model_writes_the_critiques_and_the_judge_counts(serve, trial_source, monkeypatch):
    monkeypatch.setenv("GENERATION_MODEL_FACTORED_JUDGE", "judge-model")
    monkeypatch.setenv("GENERATION_MODEL_FACTORED_CRITIQUE", "critic-model")

    def verify(request):
        if request.body["model"] == "critic-model" and "cured" in request.section("Claim"):
            return claim_answer("no", p_yes=0.05, critique="CRITIC: the source reports a fall, not a cure.")
        return judge_cured(request)

    server = serve(
        honest_model,
        steps={
            "generate": [Reply(content=f"{TWO_SOURCES} {FALSE}")],
            "factored_verify": [verify],
            "factored_revise": [Reply(content=TWO_SOURCES)],
        },
    )
    job = run_job(trial_source, "factored")
    by_model = [(r.step, r.body["model"]) for r in server.requests]
    assert by_model[0][0] == "generate"
    # The judge verifies the draft (4 claims), the critic too, the judge the revision (3).
    assert [m for s, m in by_model if s == "factored_verify"] == ["judge-model"] * 4 + ["critic-model"] * 4 + [
        "judge-model"
    ] * 3
    revise = next(r for r in server.requests if r.step == "factored_revise").prompt
    assert "CRITIC: the source reports a fall" in revise  # the critique model's words
    assert job.result["factored"]["judge_model"] == "judge-model"
    assert job.result["factored"]["critique_model"] == "critic-model"
    assert job.result["factored"]["hallucinations_before"] == 1 and job.result["factored"]["hallucinations_after"] == 0
    # The models are part of the pipeline version.
    version = pipeline_spec("factored").version
    monkeypatch.setenv("GENERATION_MODEL_FACTORED_CRITIQUE", "another-critic")
    assert pipeline_spec("factored").version != version
    assert pipeline_spec("factored").config["stages"]["factored"]["critique_model"] == "another-critic"


def test_the_self_correction_pipeline_revises_from_its_own_feedback(serve, trial_source):
    server = serve(
        honest_model,
        steps={
            "generate": [Reply(content=f"{TWO_SOURCES} {FALSE}")],
            "factored_verify": [judge_cured],
            "self_correction_feedback": [
                Reply(json.dumps({"feedback": "SELF: the cure is overstated.", "supported": "no"}))
            ],
            "self_correction_revise": [Reply(content=TWO_SOURCES)],
        },
    )
    job = run_job(trial_source, "selfcorrect")
    steps = server.steps_seen()
    assert steps == (
        ["generate"] + ["factored_verify"] * 4 + ["self_correction_feedback", "self_correction_revise"]
        + ["factored_verify"] * 3
    )  # fmt: skip
    revise = next(r for r in server.requests if r.step == "self_correction_revise").prompt
    assert "SELF: the cure is overstated." in revise and FALSE in revise
    assert job.summary.text == TWO_SOURCES and job.summary.generator.split("/")[1].startswith("selfcorrect@")
    assert job.result["factored"]["hallucinations_before"] == 1
    assert job.result["factored"]["hallucinations_after"] == 0
    # The draft is kept as the revision's parent, as Factored Verification's is.
    draft = Summary.objects.get(pk=job.summary.parent_id)
    assert draft.text == f"{TWO_SOURCES} {FALSE}"
    assert job.status == "ok"


# --- the evaluator --------------------------------------------------------------------------


def test_the_evaluator_with_decomposed_claims_is_a_run_of_its_own(serve, trial_source):
    from annotate.services.summaries import create_summary

    text = "Drug A was compared with placebo and INVENTED it cured everyone [PMC100]. An uncited sentence."
    create_summary(study=trial_source.study, source=trial_source, key="s1", text=text, generator="hand")
    server = serve(steps={"factored_decompose": [split_on_and], "factored_verify": [verify_invented]})
    call_command("evaluate", "--study", trial_source.study.slug, "--evaluator", "factored_verification")
    call_command(
        "evaluate",
        "--study",
        trial_source.study.slug,
        "--evaluator",
        "factored_verification",
        "--claims",
        "decomposed",
        "--decompose",
        "sentences",
    )
    runs = {r.config.get("claims", "sentences"): r for r in EvaluationRun.objects.all()}
    assert set(runs) == {"sentences", "decomposed"} and runs["sentences"].version != runs["decomposed"].version
    scores = {(r, s.name): s.value for r, run in runs.items() for s in run.scores.all()}
    # Sentences: one cited sentence, unsupported. Decomposed: two claims, one unsupported.
    assert scores[("sentences", "unsupported")] == 1 and scores[("sentences", "supported_share")] == 0
    assert scores[("decomposed", "unsupported")] == 1 and scores[("decomposed", "supported_share")] == 0.5
    assert scores[("decomposed", "p_summary")] == pytest.approx(0.95 * 0.1)
    # Only the cited sentence is decomposed.
    assert [r.section("Text") for r in server.requests if r.step == "factored_decompose"] == [
        "Drug A was compared with placebo and INVENTED it cured everyone [PMC100]."
    ]
