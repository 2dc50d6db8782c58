"""Attention checks chosen on the link form: each participant's items have one of the
study's attention checks after about every N items (never first, each check once), the
link's pool and its k are untouched, and the monitor's gold accuracy reads them."""

import pytest

from annotate.models import Assignment, StudyMembership
from annotate.services.adjudication import record_expected_answer
from annotate.services.members import add_study_member
from recruit.models import RecruitmentLink
from recruit.services import participation
from tests.factories import SummaryFactory, UserFactory
from tests.recruit.helpers import make_link

pytestmark = pytest.mark.django_db


def _checks(study, n=3):
    checks = [SummaryFactory(source__study=study, key=f"check-{i}") for i in range(n)]
    for summary in checks:
        record_expected_answer(study=study, summary=summary, purpose="attention", answers={"overall": 5})
    return {s.pk for s in checks}


def test_a_participants_items_carry_attention_checks_every_n_items(study):
    checks = _checks(study)
    link = make_link(study, items=4, k=2, summaries=6)
    link.batch.attention_every = 2
    link.batch.save()
    participant, _ = participation.arrive(link=link, panel="prolific", external_id="P1")
    order = list(
        Assignment.objects.filter(rater=participant.user).order_by("position").values_list("summary_id", flat=True)
    )
    pool = set(link.batch.design["pool"])
    real = [s for s in order if s in pool]
    mixed_in = [s for s in order if s in checks]
    assert len(real) == 4 and len(mixed_in) == 2 and len(set(mixed_in)) == 2
    assert order[0] in pool and len(order) == 6
    assert not checks & pool  # the pool never hands out a check as an item to rate k times


def test_the_link_form_sets_attention_checks_and_refuses_them_without_any(client, study):
    admin = UserFactory()
    add_study_member(study=study, user=admin, role=StudyMembership.Role.ADMIN)
    for _ in range(3):
        SummaryFactory(source__study=study)
    client.force_login(admin)
    form = {
        "name": "wave",
        "raters_per_item": 2,
        "items_per_participant": 2,
        "max_participants": 10,
        "time_budget_minutes": 30,
        "lease_minutes": 20,
        "completion_url": "https://app.prolific.com/submissions/complete",
        "completion_code": "DONE1",
        "screenout_code": "OUT1",
        "attention_every": 2,
    }
    url = f"/studies/{study.slug}/recruitment/"
    refused = client.post(url, form)
    assert refused.status_code == 400 and "no attention checks" in refused.content.decode()
    _checks(study, n=1)
    assert client.post(url, form).status_code == 302
    link = RecruitmentLink.objects.get()
    assert link.batch.attention_every == 2
    assert "an attention check after about every 2 items" in client.get(url).content.decode()
