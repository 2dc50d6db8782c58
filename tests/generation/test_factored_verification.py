"""Factored Verification: each cited claim against only its cited sources,
probabilities from logprobs, product, threshold, critique → revision → re-verification."""

import math

import pytest

from generation.models import LLMCall
from tests.generation.conftest import claim_answer, honest_model
from tests.generation.scripted_server import Reply
from tests.generation.test_litsumm_pipeline import run_job

pytestmark = pytest.mark.django_db

TWO_SOURCES = (
    "Drug A was compared with placebo in 120 adults with hypertension [PMC100]. "
    "A second trial enrolled 80 older adults [PMC200]. "
    "Smith et al. reported no deaths in either trial [PMC200]."
)
FALSE = "Drug A cured hypertension in every patient [PMC100]."


def judge_cured(request):
    if "cured" in request.section("Claim"):
        return claim_answer("no", p_yes=0.05, critique="The source reports a 12 mmHg fall, not a cure.")
    return claim_answer("yes", p_yes=0.9)


def test_each_claim_is_checked_against_only_the_sources_it_cites(serve, trial_source):
    server = serve(honest_model, steps={"generate": [Reply(content=TWO_SOURCES)]})
    job = run_job(trial_source, "factored")
    verifications = [r for r in server.requests if r.step == "factored_verify"]
    assert len(verifications) == 3
    second = verifications[1]
    assert second.section("Claim") == "A second trial enrolled 80 older adults [PMC200]."
    sources = second.section("Cited source(s)")
    assert "[PMC200]" in sources and "[PMC100]" not in sources
    assert sources.count("\n") == 2  # all three PMC200 sentences, nothing else
    assert "[PMC200]" not in verifications[0].section("Cited source(s)")
    assert second.body["logprobs"] is True
    claims = list(job.summary.claims.order_by("index"))
    assert [c.probability for c in claims] == pytest.approx([0.9, 0.9, 0.9])
    assert job.result["factored"]["p_summary"] == pytest.approx(0.9**3)
    assert job.status == "ok"


def verdict_first_then_a_no(request):
    """The verdict comes first; the critique after it holds a confident "No"."""
    tokens = [
        ('{"supported": "', -0.01, []),
        ("yes", math.log(0.7), [("yes", math.log(0.7)), ("no", math.log(0.2))]),
        ('", "critique": "', -0.01, []),
        ("No", math.log(0.9), [("No", math.log(0.9)), ("Yes", math.log(0.05))]),
        (' contradiction was found."}', -0.01, []),
    ]
    return Reply(content="".join(t for t, _, _ in tokens), logprobs=tokens)


def test_the_claim_probability_comes_from_the_supported_fields_token(serve, trial_source):
    serve(honest_model, steps={"generate": [Reply(content=TWO_SOURCES)], "factored_verify": [verdict_first_then_a_no]})
    job = run_job(trial_source, "factored")
    claims = list(job.summary.claims.order_by("index"))
    assert [c.verdict for c in claims] == ["supported"] * 3
    # yes 0.7 against no 0.2, whatever the critique says afterwards.
    assert [c.probability for c in claims] == pytest.approx([0.7 / 0.9] * 3)
    assert job.result["factored"]["p_summary"] == pytest.approx((0.7 / 0.9) ** 3)


def test_unsupported_claims_are_critiqued_revised_and_reverified(serve, trial_source):
    server = serve(
        honest_model,
        steps={
            "generate": [Reply(content=f"{TWO_SOURCES} {FALSE}")],
            "factored_verify": [judge_cured],
            "factored_revise": [Reply(content=TWO_SOURCES)],
        },
    )
    job = run_job(trial_source, "factored")
    steps = server.steps_seen()
    assert steps == ["generate"] + ["factored_verify"] * 4 + ["factored_revise"] + ["factored_verify"] * 3
    revise = server.requests[5].prompt
    assert "not a cure" in revise and FALSE in revise
    assert all("cured" not in r.section("Claim") for r in server.requests[6:])
    assert job.result["factored"]["hallucinations_before"] == 1
    assert job.result["factored"]["hallucinations_after"] == 0
    assert job.result["factored"]["p_summary_before"] == pytest.approx(0.9**3 * 0.05)
    assert job.summary.text == TWO_SOURCES
    assert job.status == "ok"
    # The draft before revision is a rateable summary of the study, the revision's parent,
    # with the verdicts it had (Factored Verification, Table 2: rate before and after).
    draft = job.summary.parent
    assert draft is not None and draft.text == f"{TWO_SOURCES} {FALSE}"
    assert draft.study_id == job.summary.study_id and draft.source_id == job.summary.source_id
    assert draft.metadata["draft_of_revision"] is True and draft.generator.endswith("/draft")
    assert [c.verdict for c in draft.claims.order_by("index")].count("not_supported") == 1
    assert list(draft.revisions.all()) == [job.summary]


def test_a_summary_below_the_threshold_is_flagged(serve, trial_source, monkeypatch):
    monkeypatch.setenv("GENERATION_FACTORED_THRESHOLD", "0.8")
    serve(honest_model, steps={"generate": [Reply(content=TWO_SOURCES)]})  # 0.9 ** 3 = 0.729
    job = run_job(trial_source, "factored")
    assert job.status == "flagged"
    assert job.summary.flags == ["factored_below_threshold"]


def test_without_logprobs_the_probability_is_zero_or_one(serve, trial_source):
    server = serve(honest_model, steps={"generate": [Reply(content=TWO_SOURCES)]}, logprobs=False)
    job = run_job(trial_source, "factored")
    assert set(job.summary.claims.values_list("probability", flat=True)) == {1.0}
    # The first request asked for logprobs, was refused, and the gateway stopped asking.
    verifications = [r for r in server.requests if r.step == "factored_verify"]
    assert verifications[0].body.get("logprobs") is True
    assert all("logprobs" not in r.body for r in verifications[1:])


def test_a_chemistry_bracket_is_not_a_missing_reference(serve, trial_source):
    text = "Drug A lowered serum [Ca2+] in 120 adults [PMC100]. A second trial enrolled 80 older adults [PMC200]."
    server = serve(honest_model, steps={"generate": [Reply(content=text)]})
    job = run_job(trial_source, "factored")
    claims = list(job.summary.claims.order_by("index"))
    assert [c.refs for c in claims] == [["PMC100"], ["PMC200"]]
    assert [c.verdict for c in claims] == ["supported", "supported"]
    assert server.steps_seen() == ["generate", "factored_verify", "factored_verify"]


def test_an_invented_reference_is_unsupported_without_asking(serve, trial_source):
    text = "Drug A was compared with placebo [PMC100]. It cured everyone [PMC555]."
    serve(honest_model, steps={"generate": [Reply(content=text)], "factored_revise": [Reply(content=TWO_SOURCES)]})
    job = run_job(trial_source, "factored")
    first = job.result["steps"][1]
    assert first["step"] == "factored:verify"
    assert first["verdicts"][1]["verdict"] == "not_supported"
    assert "PMC555" in first["verdicts"][1]["explanation"]
    assert LLMCall.objects.filter(job=job, step="factored:verify").count() == 1


def test_litsumm_then_factored_runs_both_and_keeps_the_factored_verdicts(serve, trial_source):
    server = serve(honest_model)
    job = run_job(trial_source, "litsumm+factored")
    assert server.steps_seen() == ["generate", "self_consistency"] + ["factored_verify"] * 3
    assert job.summary.generator == f"scripted-model/litsumm+factored@{job.pipeline_version}"
    assert all(c.probability == pytest.approx(0.9) for c in job.summary.claims.all())
    assert job.status == "ok"


def test_a_claim_citing_a_source_key_is_checked_against_that_source(serve, study):
    """Sentences with no ref of their own are cited by the source's key, which looks
    like no PMCID; a claim citing it is still a cited claim and is verified."""
    from tests.generation.conftest import TRIAL, make_source

    source = make_source(study, "drug-a-trial", [(text, "") for text, _ in TRIAL], title="Drug A")
    server = serve(honest_model, steps={"generate": [Reply(content="Drug A lowered pressure [drug-a-trial].")]})
    job = run_job(source, "factored")
    verifications = [r for r in server.requests if r.step == "factored_verify"]
    assert len(verifications) == 1
    assert "[drug-a-trial]" in verifications[0].section("Cited source(s)")
    assert job.summary.claims.get().refs == ["drug-a-trial"]
