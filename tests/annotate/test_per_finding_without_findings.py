"""A required per-finding question about a source without findings.

The rule (docs/rubric-format.md): a per-finding question is asked once per finding of
the source, so about a source without findings it is not asked. The rating page does not
show it and a submission needs no answer to it (an answer naming a finding is still an
error), through the page and the API alike. A source with findings still needs every
finding answered.
"""

import json
from types import SimpleNamespace

import pytest

from annotate.models import Assignment, Rating, Revision
from annotate.services.rubrics import load_builtin_rubric
from tests.annotate.factpico import SOURCE_TEXT, complete_answers, make_factpico_assignment
from tests.conftest import api_client_for
from tests.factories import AssignmentFactory, SourceFactory, StudyFactory, SummaryFactory


def factpico_assignment_without_findings(rater) -> Assignment:
    study = StudyFactory(rubric=load_builtin_rubric(key="factpico"))
    source = SourceFactory(study=study, text=SOURCE_TEXT)
    summary = SummaryFactory(source=source, text="Grown-ups with asthma took drug A or a dummy pill. Attacks fell.")
    return AssignmentFactory(summary=summary, rater=rater, position=0)


def answers_without_evidence(assignment):
    """A complete FactPICO submission apart from the per-finding question."""
    answers, rationales = complete_answers(assignment, finding=SimpleNamespace(uuid="unused"))
    del answers["evidence"], rationales["evidence"]
    return answers, rationales


def form_post(answers: dict, rationales: dict, *, version: int) -> dict:
    """The rating page's POST for these answers (the field names of annotate/forms.py)."""
    data = {"action": "submit", "version": str(version)}
    for key, value in answers.items():
        if key in ("added_info", "contradictions"):
            data[f"{key}__json"] = json.dumps(value)
        elif isinstance(value, dict):  # per finding
            for finding, score in value.items():
                data[f"{key}__{finding}"] = str(score)
        else:
            data[key] = str(value)
    for key, text in rationales.items():
        if isinstance(text, dict):
            for finding, t in text.items():
                data[f"{key}__{finding}__rationale"] = t
        else:
            data[f"{key}__rationale"] = text
    return data


@pytest.mark.django_db
def test_the_rating_page_does_not_ask_a_per_finding_question_about_a_source_without_findings(client, rater_a):
    assignment = factpico_assignment_without_findings(rater_a)
    client.force_login(rater_a)
    html = client.get(f"/rate/{assignment.uuid}/").content.decode()
    assert 'id="question-population"' in html  # the other questions are there
    assert 'id="question-evidence"' not in html and "VI. Evidence inference" not in html

    with_findings, _ = make_factpico_assignment(rater_a)
    html = client.get(f"/rate/{with_findings.uuid}/").content.decode()
    assert 'id="question-evidence"' in html and "VI. Evidence inference" in html


@pytest.mark.django_db
def test_a_form_submit_without_findings_needs_no_per_finding_answer(client, rater_a):
    assignment = factpico_assignment_without_findings(rater_a)
    answers, rationales = answers_without_evidence(assignment)
    client.force_login(rater_a)
    response = client.post(f"/rate/{assignment.uuid}/", form_post(answers, rationales, version=1))
    assert response.status_code == 302, response.content.decode()[:2000]
    assignment.refresh_from_db()
    assert assignment.state == Assignment.State.SUBMITTED
    revision = Revision.objects.get(assignment=assignment)
    assert revision.status == Revision.Status.SUBMITTED
    assert not Rating.objects.filter(revision=revision, question="evidence").exists()
    assert Rating.objects.filter(revision=revision, question="population", score=4).exists()


@pytest.mark.django_db
@pytest.mark.parametrize("evidence", [None, {}], ids=["left-out", "empty"])
def test_an_api_submit_without_findings_needs_no_per_finding_answer(rater_a, evidence):
    assignment = factpico_assignment_without_findings(rater_a)
    answers, rationales = answers_without_evidence(assignment)
    if evidence is not None:
        answers["evidence"], rationales["evidence"] = evidence, evidence
    response = api_client_for(rater_a).post(
        f"/api/assignments/{assignment.uuid}/submit/",
        {"version": 1, "answers": answers, "rationales": rationales},
        format="json",
    )
    assert response.status_code == 200, response.json()
    assert "evidence" not in response.json()["answers"]
    assignment.refresh_from_db()
    assert assignment.state == Assignment.State.SUBMITTED


@pytest.mark.django_db
def test_an_answer_to_a_finding_the_source_does_not_have_is_still_refused(rater_a):
    assignment = factpico_assignment_without_findings(rater_a)
    answers, rationales = answers_without_evidence(assignment)
    answers["evidence"] = {"not-a-finding": 4}
    response = api_client_for(rater_a).post(
        f"/api/assignments/{assignment.uuid}/submit/",
        {"version": 1, "answers": answers, "rationales": rationales},
        format="json",
    )
    assert response.status_code == 400
    assert "unknown finding(s): not-a-finding" in response.json()["error"]["fields"]["evidence"]
    assert not Revision.objects.exists()


@pytest.mark.django_db
def test_a_source_with_findings_still_needs_every_finding_answered_on_the_page_and_the_api(client, rater_a):
    assignment, finding = make_factpico_assignment(rater_a)
    answers, rationales = complete_answers(assignment, finding)
    del answers["evidence"], rationales["evidence"]

    client.force_login(rater_a)
    page = client.post(f"/rate/{assignment.uuid}/", form_post(answers, rationales, version=1))
    assert page.status_code == 400
    assert "Result 1: an answer is required" in page.content.decode()

    api = api_client_for(rater_a).post(
        f"/api/assignments/{assignment.uuid}/submit/",
        {"version": 1, "answers": answers, "rationales": rationales},
        format="json",
    )
    assert api.status_code == 400
    assert api.json()["error"]["fields"]["evidence"] == "Result 1: an answer is required"
    assert not Revision.objects.filter(status=Revision.Status.SUBMITTED).exists()
    assignment.refresh_from_db()
    assert assignment.state != Assignment.State.SUBMITTED

    # ...and with the finding answered, both paths accept it.
    answers["evidence"] = {str(finding.uuid): 3}
    rationales["evidence"] = {str(finding.uuid): "Direction right, size missing."}
    page = client.post(f"/rate/{assignment.uuid}/", form_post(answers, rationales, version=assignment.version))
    assert page.status_code == 302, page.content.decode()[:2000]
    assert Rating.objects.get(question="evidence").finding == finding
