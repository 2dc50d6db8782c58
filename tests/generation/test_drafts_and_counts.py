"""A pipeline's draft carries the flags of the checks it failed and is offered for rating
only when the study asks for drafts; a hallucination count is "not checked" (None) when
no claim was checked. The real `openai` client against the scripted server."""

import json

import pytest
from django.urls import reverse

from annotate.models import Summary
from annotate.selectors.contents import filter_summaries
from tests.generation.conftest import honest_model
from tests.generation.scripted_server import Reply
from tests.generation.test_factored_verification import FALSE, TWO_SOURCES, judge_cured
from tests.generation.test_litsumm_pipeline import run_job

pytestmark = pytest.mark.django_db

FEEDBACK = Reply(json.dumps({"feedback": "The cure is overstated.", "supported": "no"}))
# Cut off at max_tokens, and half of its sentences end without a reference (location fails).
CUT_OFF_DRAFT = Reply(
    content=f"{TWO_SOURCES} {FALSE} Drug A is widely used. It is cheap. It is safe. It is well tolerated. It",
    finish_reason="length",
)


def test_a_cut_off_draft_that_fails_the_reference_checks_carries_its_flags(serve, trial_source):
    serve(
        honest_model,
        steps={
            "generate": [CUT_OFF_DRAFT],
            "factored_verify": [judge_cured],
            "self_correction_feedback": [FEEDBACK],
            "self_correction_revise": [Reply(content=TWO_SOURCES)],
        },
    )
    job = run_job(trial_source, "selfcorrect")
    draft = Summary.objects.get(pk=job.summary.parent_id)
    assert draft.metadata["draft_of_revision"] is True
    assert set(draft.flags) == {"draft", "references_failed", "output_truncated", "factored_below_threshold"}
    assert job.summary.flags == [] and job.status == "ok"


def test_drafts_are_offered_for_rating_only_when_asked_for(serve, trial_source):
    serve(
        honest_model,
        steps={
            "generate": [Reply(content=f"{TWO_SOURCES} {FALSE}")],
            "factored_verify": [judge_cured],
            "self_correction_feedback": [FEEDBACK],
            "self_correction_revise": [Reply(content=TWO_SOURCES)],
        },
    )
    job = run_job(trial_source, "selfcorrect")
    draft = Summary.objects.get(pk=job.summary.parent_id)
    study = trial_source.study
    assert draft.flags == ["draft", "factored_below_threshold"]
    assert list(filter_summaries(study=study)) == [job.summary]
    assert list(filter_summaries(study=study, flags_none=["references_failed"])) == [job.summary]
    assert list(filter_summaries(study=study, flags_any=["draft"])) == [draft]
    assert set(filter_summaries(study=study, generator=[job.summary.generator, draft.generator])) == {
        job.summary,
        draft,
    }


def test_hallucinations_are_not_checked_when_no_claim_was_checked(serve, trial_source, client, admin_user):
    """An uncited draft and revision: no claim is judged, so the counts are None, not 0."""
    uncited = "Drug A was compared with placebo in adults. No deaths were reported."
    server = serve(
        honest_model,
        steps={
            "generate": [Reply(content=uncited)],
            "self_correction_feedback": [FEEDBACK],
            "self_correction_revise": [Reply(content=uncited + " Headache was common.")],
        },
    )
    job = run_job(trial_source, "selfcorrect")
    assert "factored_verify" not in server.steps_seen()
    factored = job.result["factored"]
    assert factored["hallucinations_before"] is None and factored["hallucinations_after"] is None
    assert job.summary.metadata["factored"]["hallucinations_after"] is None
    client.force_login(admin_user)
    page = client.get(reverse("admin:generation_generationjob_change", args=[job.pk])).content.decode()
    assert "not checked → not checked" in page
