"""Factored Verification as the paper gives it, each an option of the
factored_verification evaluator with its own version: the few-shot claim check of
appendix A.1.2 (zero-shot kept, the default), and the decomposition of the whole summary
of A.1.1 (per cited sentence kept). The real `openai` client against the scripted server."""

import json

import pytest
from django.core.management import call_command

from annotate.services.summaries import create_summary
from generation.evaluators import FactoredVerification
from generation.llm import Gateway
from generation.models import EvaluationRun, EvaluationScore
from generation.prompting import get_prompt
from tests.generation.conftest import claim_answer
from tests.generation.scripted_server import Reply

pytestmark = pytest.mark.django_db

SUMMARY = "Drug A lowered systolic pressure [PMC100]. A second trial enrolled 80 older adults [PMC200]."


def evaluate(study, *options):
    call_command("evaluate", "--study", study.slug, "--evaluator", "factored_verification", *options)


def few_shot_answer(request):
    """The few-shot check's bare verdict, with the yes token's logprobs."""
    return Reply(
        json.dumps({"supported": "yes"}),
        logprobs=[('{"', -0.01, []), ("supported", -0.01, []), ('":"', -0.01, []),
                  ("yes", -0.2231, [("yes", -0.2231), ("no", -1.6094)]), ('"}', -0.01, [])],
    )  # fmt: skip


def test_the_few_shot_check_is_the_papers_prompt_and_a_run_of_its_own(serve, trial_source):
    create_summary(study=trial_source.study, source=trial_source, key="s1", text=SUMMARY, generator="hand")
    server = serve(
        steps={"factored_verify": [claim_answer("yes", p_yes=0.9)], "factored_verify_few_shot": [few_shot_answer]}
    )
    evaluate(trial_source.study)
    evaluate(trial_source.study, "--check", "few-shot")
    few_shot = [r for r in server.requests if r.step == "factored_verify_few_shot"]
    assert len(few_shot) == 2
    prompt = few_shot[0].prompt
    assert "It can sometimes be the case that a claim is very subtly wrong." in prompt
    assert prompt.count("Supported: Yes") == 2 and prompt.count("Supported: No") == 2  # four worked examples
    assert "Example 5:\n\nDocument: Drug A was compared with placebo" in prompt
    runs = {r.config.get("check", "zero_shot"): r for r in EvaluationRun.objects.all()}
    assert set(runs) == {"zero_shot", "few_shot"} and runs["zero_shot"].version != runs["few_shot"].version
    assert get_prompt("factored_verify_few_shot").version in runs["few_shot"].config["prompts"].values()
    # P(yes) from the logprobs: e^-0.2231 / (e^-0.2231 + e^-1.6094) = 0.8 / (0.8 + 0.2), per claim.
    p = EvaluationScore.objects.get(run=runs["few_shot"], name="p_summary")
    assert p.value == pytest.approx(0.8 * 0.8, abs=1e-3)


def test_the_zero_shot_check_keeps_the_version_it_had(serve):
    serve(steps={})
    evaluator = FactoredVerification(Gateway())
    assert "check" not in evaluator.config() and "decompose" not in evaluator.config()
    assert "decompose" not in FactoredVerification(Gateway(), claims="decomposed", decompose="sentences").config()


def test_the_whole_summary_is_decomposed_as_in_the_paper(serve, trial_source):
    create_summary(study=trial_source.study, source=trial_source, key="s1", text=SUMMARY, generator="hand")
    claims = ["Drug A lowered systolic pressure.", "A second trial enrolled 80 older adults [PMC200]."]
    server = serve(
        steps={
            "factored_decompose": [Reply(json.dumps({"claims": claims}))],
            "factored_verify": [claim_answer("yes", p_yes=0.9)],
        }
    )
    evaluate(trial_source.study, "--claims", "decomposed")
    decomposed = [r.section("Text") for r in server.requests if r.step == "factored_decompose"]
    assert decomposed == [SUMMARY]  # one call, over the whole summary
    checked = {r.section("Claim"): r.section("Cited source(s)") for r in server.requests if r.step == "factored_verify"}
    assert set(checked) == set(claims)
    # A claim without a citation of its own is checked against every reference the summary cites,
    # one that names its reference against that reference only.
    assert "[PMC100]" in checked[claims[0]] and "[PMC200]" in checked[claims[0]]
    assert "[PMC100]" not in checked[claims[1]] and "[PMC200]" in checked[claims[1]]
    run = EvaluationRun.objects.get()
    assert run.config["claims"] == "decomposed" and run.config["decompose"] == "summary"
    assert EvaluationScore.objects.get(name="p_summary").value == pytest.approx(0.81)
