"""The one onboarding check in front of a rater's items: the assignment selector reads
whether a step of the study's onboarding is pending in the assignment's own query and raises
OnboardingRequired; the step selector reads the same rule for one study. The rows are made
with annotate's own models, so the check stands without the recruit app's pages."""

import pytest
from django.utils import timezone

from annotate.models import ConsentDecision, ConsentVersion, Onboarding, OnboardingRecord
from annotate.selectors.onboarding import (
    CONSENT,
    DECLINED,
    INSTRUCTIONS,
    QUESTIONNAIRE,
    OnboardingRequired,
    onboarding_step,
)
from annotate.selectors.queue import get_assignment_for_rater
from tests.factories import AssignmentFactory, StudyFactory, SummaryFactory

pytestmark = pytest.mark.django_db

QUESTION = {"key": "years", "prompt": "Years of practice?", "type": "free_text", "required": False}


def consent(study, text="I agree.", number=1):
    return ConsentVersion.objects.create(study=study, number=number, text=text)


def decide(study, rater, version, accepted=True):
    return ConsentDecision.objects.create(study=study, rater=rater, version=version, accepted=accepted)


def test_a_study_that_asks_nothing_lets_the_rater_in(assignment_a, rater_a):
    assert onboarding_step(study=assignment_a.study, rater=rater_a) is None
    assert get_assignment_for_rater(rater_a, assignment_a.uuid) == assignment_a


def test_each_step_in_turn_until_the_rater_is_through(assignment_a, rater_a):
    study = assignment_a.study
    version = consent(study)
    Onboarding.objects.create(study=study, instructions="Read the source first.", questionnaire=[QUESTION])
    record = OnboardingRecord(study=study, rater=rater_a)

    def through(step):
        nonlocal record
        if step == CONSENT:
            decide(study, rater_a, version)
        elif step == INSTRUCTIONS:
            record.instructions_opened_at = record.instructions_acknowledged_at = timezone.now()
            record.save()
        else:
            record.answers, record.answered_at = {"years": "3"}, timezone.now()
            record.save()

    for step in (CONSENT, INSTRUCTIONS, QUESTIONNAIRE):
        assert onboarding_step(study=study, rater=rater_a) == step
        with pytest.raises(OnboardingRequired) as refused:
            get_assignment_for_rater(rater_a, assignment_a.uuid)
        assert refused.value.http_status == 403 and refused.value.code == "onboarding_required"
        assert refused.value.extra == {"next": f"/r/s/{study.slug}/next/"}
        through(step)
    assert onboarding_step(study=study, rater=rater_a) is None
    assert get_assignment_for_rater(rater_a, assignment_a.uuid) == assignment_a


def test_a_declined_consent_keeps_the_items_closed_until_the_rater_accepts(assignment_a, rater_a):
    study = assignment_a.study
    version = consent(study)
    decide(study, rater_a, version, accepted=False)
    assert onboarding_step(study=study, rater=rater_a) == DECLINED
    with pytest.raises(OnboardingRequired):
        get_assignment_for_rater(rater_a, assignment_a.uuid)
    decide(study, rater_a, version, accepted=True)  # the latest decision counts
    assert get_assignment_for_rater(rater_a, assignment_a.uuid) == assignment_a
    decide(study, rater_a, version, accepted=False)
    assert onboarding_step(study=study, rater=rater_a) == DECLINED


def test_a_new_consent_version_asks_again_and_an_empty_one_asks_nothing(assignment_a, rater_a):
    study = assignment_a.study
    decide(study, rater_a, consent(study))
    assert get_assignment_for_rater(rater_a, assignment_a.uuid) == assignment_a
    consent(study, text="I agree to the new terms.", number=2)
    assert onboarding_step(study=study, rater=rater_a) == CONSENT
    consent(study, text="", number=3)  # the admin stopped asking
    assert onboarding_step(study=study, rater=rater_a) is None
    assert get_assignment_for_rater(rater_a, assignment_a.uuid) == assignment_a


def test_empty_instructions_and_questionnaire_are_not_asked(assignment_a, rater_a):
    Onboarding.objects.create(study=assignment_a.study, instructions="", questionnaire=[])
    assert onboarding_step(study=assignment_a.study, rater=rater_a) is None
    assert get_assignment_for_rater(rater_a, assignment_a.uuid) == assignment_a


def test_one_raters_onboarding_and_another_studys_do_not_count(assignment_a, rater_a, rater_b):
    study = assignment_a.study
    version = consent(study)
    decide(study, rater_b, version)
    other = StudyFactory()
    decide(other, rater_a, consent(other))
    with pytest.raises(OnboardingRequired):
        get_assignment_for_rater(rater_a, assignment_a.uuid)
    theirs = AssignmentFactory(summary=SummaryFactory(source__study=study), rater=rater_b, position=0)
    assert get_assignment_for_rater(rater_b, theirs.uuid) == theirs


def test_the_check_costs_no_query_of_its_own(assignment_a, rater_a, django_assert_num_queries):
    get_assignment_for_rater(rater_a, assignment_a.uuid)
    with django_assert_num_queries(2) as plain:  # the assignment, its findings
        get_assignment_for_rater(rater_a, assignment_a.uuid)
    study = assignment_a.study
    decide(study, rater_a, consent(study))
    Onboarding.objects.create(study=study, instructions="Read.", questionnaire=[QUESTION])
    OnboardingRecord.objects.create(
        study=study,
        rater=rater_a,
        instructions_opened_at=timezone.now(),
        instructions_acknowledged_at=timezone.now(),
        answers={"years": "3"},
        answered_at=timezone.now(),
    )
    with django_assert_num_queries(len(plain.captured_queries)):
        get_assignment_for_rater(rater_a, assignment_a.uuid)
    with django_assert_num_queries(1):
        assert onboarding_step(study=study, rater=rater_a) is None
