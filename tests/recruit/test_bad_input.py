"""Bad input on the recruit pages: a 4xx naming the field, nothing changed, never a 500."""

import pytest

from annotate.models import ConsentDecision, ConsentVersion, Onboarding, OnboardingRecord, StudyMembership
from annotate.services.members import add_study_member
from tests.recruit.helpers import set_up_onboarding

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_client(client, study, rater_a):
    add_study_member(study=study, user=rater_a, role=StudyMembership.Role.ADMIN)
    client.force_login(rater_a)
    return client


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({"action": "save", "consent_text": "a\x00b", "instructions": ""}, "consent_text"),
        ({"action": "save", "consent_text": "", "instructions": "x" * 50_001}, "instructions"),
        ({"action": "add_question", "prompt": "", "kind": "text"}, "prompt"),
        ({"action": "add_question", "prompt": "Age?", "kind": "span"}, "kind"),
        (
            {"action": "add_question", "prompt": "Field?", "kind": "choice", "options": "\n".join(map(str, range(21)))},
            "options",
        ),
        ({"action": "remove", "key": "nope"}, "key"),
        ({"action": "launch"}, "action"),
    ],
)
def test_bad_onboarding_input_is_a_400_naming_the_field(admin_client, study, data, field):
    response = admin_client.post(f"/studies/{study.slug}/onboarding/", data)
    assert response.status_code == 400
    assert field in response.content.decode()
    assert not ConsentVersion.objects.exists()
    onboarding = Onboarding.objects.filter(study=study).first()
    assert onboarding is None or (onboarding.instructions == "" and onboarding.questionnaire == [])


@pytest.mark.parametrize(
    ("step", "data", "field"),
    [
        ("consent", {"decision": "maybe"}, "decision"),
        ("consent", {"decision": "accept", "version": "not-a-uuid"}, "version"),
        ("instructions", {"acknowledge": "no"}, "acknowledge"),
        ("questionnaire", {"expertise": "lay", "years_of_practice": "99"}, "years_of_practice"),
        ("questionnaire", {"expertise": "lay", "years_of_practice": "1", "language": "a\x00b"}, "language"),
    ],
)
def test_bad_onboarding_answers_are_a_400_naming_the_field(client, study, rater_a, step, data, field):
    set_up_onboarding(study)
    add_study_member(study=study, user=rater_a, role=StudyMembership.Role.RATER)
    client.force_login(rater_a)
    if step == "questionnaire":  # reach the step first
        from recruit.services import onboarding

        onboarding.record_consent(
            study=study, rater=rater_a, version_uuid=ConsentVersion.objects.get().uuid, accepted=True
        )
        onboarding.open_instructions(study=study, rater=rater_a)
        onboarding.acknowledge_instructions(study=study, rater=rater_a)
    response = client.post(f"/r/s/{study.slug}/{step}/", data)
    assert response.status_code == 400
    assert field in response.content.decode()
    record = OnboardingRecord.objects.filter(rater=rater_a).first()
    assert record is None or record.answers is None
    assert ConsentDecision.objects.filter(accepted=False).count() == 0
