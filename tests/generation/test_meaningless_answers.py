"""An answer with the shape asked for and no meaning is unusable, with its reason: the
prompt's own placeholder, a copy of its example, a claim without content words, a
synthesis that cites nothing. It is never verified, scored or stored as ok; and an
evaluator that could verify nothing says whether there was nothing to check (N/A) or no
usable answer (failed). The real `openai` client against the scripted server."""

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from annotate.models import Summary
from generation.detectors import Detector, Pair
from generation.llm import Gateway
from generation.meaning import content_words, meaning_problem, placeholder_problem
from generation.models import AnswerJob, EvaluationScore, GenerationJob, LLMCall
from tests.generation.conftest import claim_answer
from tests.generation.scripted_server import Reply
from tests.generation.test_junk_answers import UNCITED, add_everything, good, the_prompts_example

pytestmark = pytest.mark.django_db(transaction=True)


def run(*args) -> str:
    out = StringIO()
    try:
        call_command(*args, stdout=out, stderr=out)
    except CommandError as exc:  # failures exit non-zero; what is stored is checked below
        out.write(str(exc))
    return out.getvalue()


def model(**junk):
    """A well-behaved model, except for the steps given (step -> reply function)."""
    return lambda request: junk[request.step](request) if request.step in junk else Reply(good(request))


def test_meaning_checks_by_hand():
    assert placeholder_problem("...") == "the answer was only a placeholder ('...')"
    assert placeholder_problem(" … ") and placeholder_problem("") == "the answer was empty"
    assert placeholder_problem("... reduced mortality [PMC1234567].", prompt_id="generate").startswith(
        "the answer copied the prompt's own example"
    )
    assert meaning_problem("PMC1087853") == "the answer had no content words ('PMC1087853')"
    assert meaning_problem("10 dB") == "the answer had no content words ('10 dB')"
    assert meaning_problem("[PMC100].") and meaning_problem("Yes.")
    assert content_words("Drug A lowered pressure by 10 mmHg [PMC100].") == ["Drug", "lowered", "pressure"]
    assert meaning_problem("Headache was common [PMC100].") == ""


@pytest.mark.parametrize(
    ("synthesis", "reason"),
    [
        (the_prompts_example, "the synthesis was only a placeholder ('...')"),
        (lambda r: Reply(json.dumps({"synthesis": "synthesis", "tldr": "tldr"})), "copied the prompt's own example"),
        (lambda r: Reply(json.dumps({"synthesis": "10 dB [1].", "tldr": "Yes [1]."})), "no content words"),
        (lambda r: Reply(json.dumps({"synthesis": UNCITED, "tldr": "Yes."})), "the synthesis cites no article"),
    ],
    ids=["placeholder", "example", "no_content", "uncited"],
)
def test_a_meaningless_synthesis_is_never_stored_as_an_answer(serve, study, synthesis, reason):
    add_everything(study)
    serve(model(question_synthesis=synthesis))
    run("answer_questions", "--study", study.slug)
    job = AnswerJob.objects.get()
    assert job.status == "failed" and reason in job.error
    assert not Summary.objects.filter(key__startswith="q1").exists()
    calls = LLMCall.objects.filter(step__startswith="synthesis:")
    assert calls.count() == 2 and set(calls.values_list("usable", flat=True)) == {False}
    assert all(reason in c.problem for c in calls)


@pytest.mark.parametrize("draft", ["...", "... reduced mortality [PMC1234567]."])
def test_a_placeholder_summary_fails_its_job(serve, study, draft):
    add_everything(study)
    serve(model(generate=lambda r: Reply(draft)))
    run("generate", "--study", study.slug, "--pipeline", "litsumm")
    job = GenerationJob.objects.get()
    assert job.status == "failed"
    assert "only a placeholder" in job.error or "copied the prompt's own example" in job.error
    assert not Summary.objects.filter(generator__contains="litsumm").exists()


@pytest.mark.parametrize(
    "claims", [["...", "..."], ["PMC1087853", "10 dB"], ["claims"]], ids=["placeholder", "no_content", "example"]
)
def test_decomposed_claims_without_meaning_are_never_verified(serve, study, claims):
    add_everything(study)
    server = serve(
        steps={
            "factored_decompose": [Reply(json.dumps({"claims": claims}))],
            "factored_verify": [claim_answer("yes", p_yes=0.9)],
        }
    )
    run("evaluate", "--study", study.slug, "--evaluator", "factored_verification", "--claims", "decomposed")
    checked = [r.section("Claim") for r in server.requests if r.step == "factored_verify"]
    assert not set(checked) & set(claims)
    assert checked and all(content_words(c) for c in checked)  # the text was checked whole instead
    decompositions = LLMCall.objects.filter(prompt_id="factored_decompose")
    assert decompositions.exists() and set(decompositions.values_list("usable", flat=True)) == {False}
    assert all("no claim with content" in c.problem for c in decompositions)


def test_a_cited_sentence_without_content_words_is_not_verified(serve, study):
    add_everything(study)
    Summary.objects.filter(key="s1").update(text="Drug A lowered systolic pressure [PMC100]. 10 dB [PMC100].")
    server = serve(steps={"factored_verify": [claim_answer("yes", p_yes=0.8)]})
    run("evaluate", "--study", study.slug, "--evaluator", "factored_verification")
    assert [r.section("Claim") for r in server.requests] == ["Drug A lowered systolic pressure [PMC100]."]
    p = EvaluationScore.objects.get(name="p_summary")
    assert p.status == "ok" and p.value == pytest.approx(0.8)  # the empty sentence adds no vacuous yes


def test_a_detector_never_scores_a_summary_without_claims(serve):
    serve(steps={"factored_verify": [claim_answer("yes", p_yes=0.9)]})
    pair = Pair(record=1, document="The council approved a park.", summary="10 dB. PMC1087853.", faithful=False)
    with pytest.raises(ValueError, match="the summary had no claim to check"):
        Detector("factored", gateway=Gateway()).score(pair)
    assert not LLMCall.objects.exists()


# --- nothing to check (N/A) against no usable answer (failed) ---------------------------


@pytest.mark.parametrize(
    "verdict",
    [lambda r: Reply("I am not sure."), the_prompts_example],
    ids=["no_verdict", "the_prompts_example"],
)
def test_factored_verification_without_a_usable_verdict_is_failed_not_na(serve, study, verdict):
    add_everything(study)
    serve(steps={"factored_verify": [verdict]})
    run("evaluate", "--study", study.slug, "--evaluator", "factored_verification")
    scores = EvaluationScore.objects.all()
    assert scores.count() == 3 and {s.status for s in scores} == {"failed"}
    assert all(s.error.startswith("no usable verdict for 2 of 2 claim(s): ") for s in scores)
    assert all("no sentence cites" not in s.rationale for s in scores)


def test_factored_verification_of_an_uncited_summary_is_na_with_the_true_reason(serve, study):
    add_everything(study)
    Summary.objects.filter(key="s1").update(text=UNCITED)
    server = serve(steps={"factored_verify": [claim_answer("yes")]})
    run("evaluate", "--study", study.slug, "--evaluator", "factored_verification")
    assert server.requests == []
    scores = EvaluationScore.objects.all()
    assert {s.status for s in scores} == {EvaluationScore.Status.NOT_APPLICABLE}
    assert {s.rationale for s in scores} == {"no sentence cites a reference of the source"}
