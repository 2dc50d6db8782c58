"""Onboarding for every rater of a study (members too): versioned consent, instructions
opened and acknowledged, the background questionnaire as rubric questions, the gate in
front of the rating page, the admin's page, and the export by pseudonym only."""

import json

import pytest

from annotate.models import ConsentDecision, ConsentVersion, Onboarding, OnboardingRecord, StudyMembership
from annotate.services.members import add_study_member
from annotate.services.ratings import submit_rating
from datasets.exporting import export_dataset
from recruit.models import Participant
from recruit.services import onboarding
from tests.conftest import GOOD_ANSWERS
from tests.factories import AssignmentFactory, SummaryFactory
from tests.recruit.helpers import CONSENT, INSTRUCTIONS, arrival_url, make_link, set_up_onboarding

pytestmark = pytest.mark.django_db


@pytest.fixture
def member_item(study, rater_a):
    add_study_member(study=study, user=rater_a, role=StudyMembership.Role.RATER)
    return AssignmentFactory(summary=SummaryFactory(source__study=study), rater=rater_a, position=0)


def test_a_member_who_has_not_consented_is_sent_to_onboarding_instead_of_the_item(client, study, rater_a, member_item):
    set_up_onboarding(study)
    client.force_login(rater_a)
    item = f"/rate/{member_item.uuid}/"
    response = client.get(item, follow=True)
    assert response.request["PATH_INFO"] == f"/r/s/{study.slug}/consent/"
    assert CONSENT in response.content.decode()
    version = ConsentVersion.objects.get(study=study)

    step = client.post(
        f"/r/s/{study.slug}/consent/", {"decision": "accept", "version": str(version.uuid), "next": item}, follow=True
    )
    assert step.request["PATH_INFO"] == f"/r/s/{study.slug}/instructions/"
    assert INSTRUCTIONS in step.content.decode()
    assert OnboardingRecord.objects.get(rater=rater_a).instructions_opened_at is not None

    refused = client.post(f"/r/s/{study.slug}/instructions/", {"next": item})
    assert refused.status_code == 400 and "acknowledge" in refused.content.decode()
    assert OnboardingRecord.objects.get(rater=rater_a).instructions_acknowledged_at is None

    step = client.post(f"/r/s/{study.slug}/instructions/", {"acknowledge": "yes", "next": item}, follow=True)
    assert step.request["PATH_INFO"] == f"/r/s/{study.slug}/questionnaire/"
    page = step.content.decode()
    assert 'name="expertise"' in page and 'name="years_of_practice"' in page and 'name="language"' in page

    bad = client.post(f"/r/s/{study.slug}/questionnaire/", {"expertise": "wizard", "years_of_practice": "2"})
    assert bad.status_code == 400 and 'id="q-expertise-error"' in bad.content.decode()
    assert OnboardingRecord.objects.get(rater=rater_a).answered_at is None

    done = client.post(
        f"/r/s/{study.slug}/questionnaire/",
        {"expertise": "practitioner", "years_of_practice": "3", "language": "Welsh", "next": item},
    )
    assert done.status_code == 302
    assert client.get(done["Location"])["Location"] == item
    assert client.get(item).status_code == 200
    record = OnboardingRecord.objects.get(rater=rater_a)
    assert record.answers == {"expertise": "practitioner", "years_of_practice": 3, "language": "Welsh"}
    decision = ConsentDecision.objects.get(rater=rater_a)
    assert (decision.accepted, decision.version.number) == (True, 1)


def test_a_study_without_onboarding_opens_the_item_directly(client, rater_a, member_item):
    client.force_login(rater_a)
    assert client.get(f"/rate/{member_item.uuid}/").status_code == 200


def test_editing_the_consent_makes_a_new_version_that_raters_accept_again(client, study, rater_a, member_item):
    onboarding.save_onboarding(study=study, consent_text=CONSENT, instructions="")
    v1 = ConsentVersion.objects.get()
    onboarding.record_consent(study=study, rater=rater_a, version_uuid=v1.uuid, accepted=True)
    client.force_login(rater_a)
    assert client.get(f"/rate/{member_item.uuid}/").status_code == 200
    onboarding.save_onboarding(study=study, consent_text=CONSENT, instructions="")  # unchanged: no new version
    assert ConsentVersion.objects.count() == 1
    onboarding.save_onboarding(study=study, consent_text=CONSENT + " Amended.", instructions="")
    assert list(ConsentVersion.objects.values_list("number", flat=True)) == [1, 2]
    assert client.get(f"/rate/{member_item.uuid}/", follow=True).request["PATH_INFO"] == f"/r/s/{study.slug}/consent/"
    # A decision on the old version (a page opened before the edit) is refused.
    stale = client.post(f"/r/s/{study.slug}/consent/", {"decision": "accept", "version": str(v1.uuid)})
    assert stale.status_code == 400 and "changed" in stale.content.decode()
    assert ConsentDecision.objects.count() == 1


def test_a_member_who_declines_gets_no_items_and_can_reconsider(client, study, rater_a, member_item):
    onboarding.save_onboarding(study=study, consent_text=CONSENT, instructions="")
    version = ConsentVersion.objects.get()
    client.force_login(rater_a)
    response = client.post(
        f"/r/s/{study.slug}/consent/", {"decision": "decline", "version": str(version.uuid)}, follow=True
    )
    assert 'id="declined"' in response.content.decode()
    member_item.refresh_from_db()
    assert member_item.state == "withdrawn"
    assert client.get(f"/rate/{member_item.uuid}/", follow=True).request["PATH_INFO"] == f"/r/s/{study.slug}/consent/"


def test_onboarding_steps_of_a_study_are_a_404_for_a_non_member(client, study, outsider):
    set_up_onboarding(study)
    client.force_login(outsider)
    for step in ("next", "consent", "instructions", "questionnaire"):
        assert client.get(f"/r/s/{study.slug}/{step}/").status_code == 404


def test_the_admin_builds_the_onboarding_on_a_page_without_json(client, study, admin_user, rater_a):
    add_study_member(study=study, user=rater_a, role=StudyMembership.Role.ADMIN)
    client.force_login(rater_a)
    url = f"/studies/{study.slug}/onboarding/"
    assert client.get(url).status_code == 200
    client.post(url, {"action": "save", "consent_text": "I agree.", "instructions": "Read carefully."})
    client.post(
        url, {"action": "add_question", "prompt": "Your field?", "kind": "choice", "options": "Medicine\nLaw\n"}
    )
    client.post(url, {"action": "add_question", "prompt": "Confidence", "kind": "scale", "options": "low\nmid\nhigh"})
    bad = client.post(url, {"action": "add_question", "prompt": "Only one", "kind": "choice", "options": "Yes"})
    assert bad.status_code == 400 and "options" in bad.content.decode()
    onboarding = Onboarding.objects.get(study=study)
    assert onboarding.instructions == "Read carefully."
    assert [q["key"] for q in onboarding.questionnaire] == ["your_field", "confidence"]
    assert onboarding.questionnaire[1]["options"] == [
        {"value": 1, "label": "low"},
        {"value": 2, "label": "mid"},
        {"value": 3, "label": "high"},
    ]
    client.post(url, {"action": "remove", "key": "your_field"})
    assert [q["key"] for q in Onboarding.objects.get(study=study).questionnaire] == ["confidence"]
    assert ConsentVersion.objects.get(study=study).text == "I agree."


def test_the_onboarding_and_recruitment_pages_are_for_study_admins_only(client, study, rater_a, outsider):
    add_study_member(study=study, user=rater_a, role=StudyMembership.Role.RATER)
    for user in (rater_a, outsider):
        client.force_login(user)
        for page in ("onboarding", "recruitment"):
            assert client.get(f"/studies/{study.slug}/{page}/").status_code == 404
            assert client.post(f"/studies/{study.slug}/{page}/", {"action": "suggested"}).status_code == 404
    assert not Onboarding.objects.exists()


def test_the_export_has_consent_and_questionnaire_by_pseudonym_only(client, study, rater_a, member_item, tmp_path):
    set_up_onboarding(study)
    version = ConsentVersion.objects.get()
    onboarding.record_consent(study=study, rater=rater_a, version_uuid=version.uuid, accepted=True)
    onboarding.open_instructions(study=study, rater=rater_a)
    onboarding.open_instructions(study=study, rater=rater_a)
    onboarding.acknowledge_instructions(study=study, rater=rater_a)
    onboarding.submit_questionnaire(
        study=study, rater=rater_a, answers={"expertise": "lay", "years_of_practice": 1, "language": "Basque"}
    )
    submit_rating(assignment=member_item, rater=rater_a, answers=GOOD_ANSWERS, version=member_item.version)
    link = make_link(study)
    client.get(arrival_url(link, pid="5f8a1b2c3d4e5f6a7b8c9d0e", study_id="PROLIFICSTUDY9", session="SESS77"))
    participant = Participant.objects.get()
    onboarding.record_consent(study=study, rater=participant.user, version_uuid=version.uuid, accepted=False)

    export_dataset(study=study, out_dir=tmp_path / "out", formats=["jsonl"])
    text = (tmp_path / "out" / "jsonl" / "onboarding.jsonl").read_text()
    rows = {r["rater"]: r for r in map(json.loads, text.splitlines())}
    assert set(rows) == {"rater-01", "onboarded-01"}
    assert rows["rater-01"]["questionnaire"] == {
        "expertise": "lay",
        "years_of_practice": 1,
        "language": "Basque",
    }
    assert [c["accepted"] for c in rows["rater-01"]["consent"]] == [True]
    assert rows["rater-01"]["instructions_acknowledged_at"] is not None
    assert (rows["onboarded-01"]["panel"], rows["onboarded-01"]["outcome"]) == ("prolific", "declined")
    assert [(c["version"], c["accepted"]) for c in rows["onboarded-01"]["consent"]] == [(1, False)]
    everything = "".join(
        p.read_text() for p in (tmp_path / "out").rglob("*") if p.is_file() and p.suffix in (".jsonl", ".md", ".json")
    )
    for secret in ("5f8a1b2c3d4e5f6a7b8c9d0e", "PROLIFICSTUDY9", "SESS77", participant.user.username, "rater_a"):
        assert secret not in everything


def test_the_api_refuses_a_member_before_the_onboarding_with_a_token_or_a_session(study, rater_a, member_item):
    """The rating page redirects to the step; a direct API call (a script with the rater's
    token, or the session) is a 403 naming the step, for reads and writes, and stores nothing.
    Once through the onboarding, the same calls work."""
    from rest_framework.test import APIClient

    from annotate.models import Revision
    from annotate.services.accounts import create_token
    from tests.conftest import api_client_for

    set_up_onboarding(study)
    token = APIClient()
    token.credentials(HTTP_AUTHORIZATION=f"Token {create_token(user=rater_a).secret}")
    item = f"/api/assignments/{member_item.uuid}/"
    body = {"answers": GOOD_ANSWERS, "rationales": {}, "version": member_item.version}
    for client in (token, api_client_for(rater_a)):
        calls = [
            client.get(item),
            client.get(item + "rating/"),
            client.put(item + "rating/", body, format="json"),
            client.post(item + "submit/", body, format="json"),
            client.post(item + "skip/", {"reason": "no", "version": member_item.version}, format="json"),
            client.post(item + "reopen/", {"version": member_item.version}, format="json"),
            client.post(item + "flags/", {"kind": "other", "note": "?"}, format="json"),
        ]
        for response in calls:
            assert response.status_code == 403, (response.request["PATH_INFO"], response.content)
            error = response.json()["error"]
            assert error["code"] == "onboarding_required" and error["next"] == f"/r/s/{study.slug}/next/"
    assert not Revision.objects.filter(assignment=member_item).exists()
    member_item.refresh_from_db()
    assert member_item.state == "pending"

    version = ConsentVersion.objects.get(study=study)
    onboarding.record_consent(study=study, rater=rater_a, version_uuid=version.uuid, accepted=True)
    assert token.post(item + "submit/", body, format="json").status_code == 403  # instructions still to read
    onboarding.open_instructions(study=study, rater=rater_a)
    onboarding.acknowledge_instructions(study=study, rater=rater_a)
    onboarding.submit_questionnaire(
        study=study, rater=rater_a, answers={"expertise": "practitioner", "years_of_practice": 3, "language": "Welsh"}
    )
    submitted = token.post(item + "submit/", body, format="json")
    assert submitted.status_code == 200, submitted.content
    assert Revision.objects.filter(assignment=member_item).count() == 1


def test_an_items_flag_and_feedback_pages_lead_to_the_onboarding_step_too(client, study, rater_a, member_item):
    set_up_onboarding(study)
    client.force_login(rater_a)
    for page in ("flag/", "feedback/"):
        response = client.get(f"/rate/{member_item.uuid}/{page}")
        assert response.status_code == 302 and response["Location"].startswith(f"/r/s/{study.slug}/next/"), page
    refused = client.post(f"/rate/{member_item.uuid}/flag/", {"kind": "other", "note": "before consent"})
    assert refused.status_code == 302
    from annotate.models import ItemFlag

    assert not ItemFlag.objects.exists()
