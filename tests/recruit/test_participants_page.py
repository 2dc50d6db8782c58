"""The participants page of a study (docs/recruitment.md): one row per participant for the
study's admins, a search by panel id that keeps the id out of every address, the monitor's
flags, the actions (retry, exclude, approve, reject, bonus) and every call to Prolific shown
with its outcome; a fixed number of queries whatever the participants."""

import re

import pytest
from django.core.cache import cache
from django.db import connection
from django.test.utils import CaptureQueriesContext

from annotate.models import Assignment, QualificationRetry, RaterExclusion, StudyMembership
from annotate.services.members import add_study_member
from annotate.services.ratings import submit_rating
from recruit.models import BonusPayment, PanelCall, Participant
from recruit.services import links, participation
from tests.conftest import GOOD_ANSWERS
from tests.factories import UserFactory
from tests.recruit.helpers import make_link
from tests.recruit.test_arrival_and_leaving import _gate
from tests.recruit.test_prolific_api import MESSAGE, STUDY_ID, _arrive, prolific  # noqa: F401 (fixture)

pytestmark = pytest.mark.django_db


@pytest.fixture
def boss(study):
    user = UserFactory(username="boss")
    add_study_member(study=study, user=user, role=StudyMembership.Role.ADMIN)
    return user


def _url(study):
    return f"/studies/{study.slug}/participants/"


def _people(link, n, prefix="PID"):
    return [
        participation.arrive(
            link=link, panel="prolific", external_id=f"{prefix}{i}", panel_study_id=STUDY_ID, panel_session_id=f"S{i}"
        )[0]
        for i in range(n)
    ]


def test_study_admins_only(client, study, rater_a, outsider):
    link = make_link(study)
    _people(link, 1)
    add_study_member(study=study, user=rater_a, role=StudyMembership.Role.VIEWER)
    for user in (rater_a, outsider):
        client.force_login(user)
        assert client.get(_url(study)).status_code == 404
        assert client.post(_url(study), {"action": "search", "panel_id": "PID0"}).status_code == 404


def test_one_row_per_participant_with_panel_id_outcome_and_items(client, study, boss):
    link = make_link(study, items=2, k=3)
    first, second = _people(link, 2)
    item = Assignment.objects.filter(rater=first.user).first()
    submit_rating(assignment=item, rater=first.user, answers=GOOD_ANSWERS, version=item.version)
    participation.finish_participation(participant=second, outcome="left")
    client.force_login(boss)
    page = client.get(_url(study)).content.decode()
    rows = re.findall(r'<tr data-participant="([^"]+)">(.*?)</tr>', page, flags=re.S)
    assert [u for u, _ in rows] == [str(second.uuid), str(first.uuid)]  # newest first
    cells = dict(rows)
    assert "PID0" in cells[str(first.uuid)] and first.user.username in cells[str(first.uuid)]
    assert '<td class="items-done">1 of 2</td>' in cells[str(first.uuid)]
    assert "Left the study" in cells[str(second.uuid)]


def test_a_search_by_panel_id_is_a_post_that_finds_one(client, study, boss):
    link = make_link(study, k=3)
    _people(link, 3)
    client.force_login(boss)
    response = client.post(_url(study), {"action": "search", "panel_id": "PID1"})
    page = response.content.decode()
    assert response.status_code == 200
    assert re.findall(r'<td class="panel-id">([^<]+)</td>', page) == ["PID1"]
    assert "PID1" not in response.request["PATH_INFO"] and not response.request.get("QUERY_STRING")
    nobody = client.post(_url(study), {"action": "search", "panel_id": "NOBODY"}).content.decode()
    assert 'id="no-participants"' in nobody


def test_the_monitors_too_fast_and_straight_lining_rules_flag_a_participant(client, study, boss):
    """Three participants rate the same three items (k = 3). The batch's median active time
    is 100 s; one participant takes 10 s each (under 0.25 x 100: too fast) and gives the
    same overall score every time (straight-lining 100 %)."""
    link = make_link(study, items=3, k=3, summaries=3)
    people = _people(link, 3)
    for n, p in enumerate(people):
        for i, item in enumerate(Assignment.objects.filter(rater=p.user).order_by("summary_id")):
            fast = n == 0
            answers = {**GOOD_ANSWERS, "overall": 2 if fast else 1 + (i + n) % 5}
            submit_rating(assignment=item, rater=p.user, answers=answers, version=item.version)
            Assignment.objects.filter(pk=item.pk).update(active_seconds=10 if fast else 100)
    client.force_login(boss)
    page = client.get(_url(study)).content.decode()
    rows = dict(re.findall(r'<tr data-participant="([^"]+)">(.*?)</tr>', page, flags=re.S))
    flagged = rows[str(people[0].uuid)]
    assert "<strong>3 items</strong>" in flagged and "100 % (flagged)" in flagged
    calm = rows[str(people[1].uuid)]
    assert '<td class="too-fast">0</td>' in calm and "(flagged)" not in calm


def test_a_retry_and_an_exclusion_from_the_page(client, study, boss):
    _gate(study)
    link = make_link(study, items=1, k=3)
    (me,) = _people(link, 1)
    for item in Assignment.objects.filter(rater=me.user, batch__kind="qualification"):
        submit_rating(assignment=item, rater=me.user, answers={**GOOD_ANSWERS, "overall": 1}, version=item.version)
    client.force_login(boss)
    assert "Allow a retry" in client.get(_url(study)).content.decode()
    response = client.post(_url(study), {"action": "retry", "participant": str(me.uuid)}, follow=True)
    assert "may try the qualification again" in response.content.decode()
    assert QualificationRetry.objects.get().granted_by == boss
    refused = client.post(_url(study), {"action": "exclude", "participant": str(me.uuid), "reason": ""}, follow=True)
    assert "reason" in refused.content.decode() and not RaterExclusion.objects.exists()
    client.post(_url(study), {"action": "exclude", "participant": str(me.uuid), "reason": "bot"})
    assert RaterExclusion.objects.get().batch == link.batch


def test_approve_reject_and_bonus_from_the_page_with_every_call_shown(client, study, boss, prolific):  # noqa: F811
    link = make_link(study, items=1, k=3)
    a, b = (_arrive(link, pid, prolific) for pid in ("PA", "PB"))
    client.force_login(boss)
    client.post(_url(study), {"action": "approve", "participants": [str(a.uuid)]})
    assert prolific.state.submissions["SUB-PA"]["status"] == "APPROVED"
    short = client.post(
        _url(study),
        {"action": "reject", "participants": [str(b.uuid)], "category": "LOW_EFFORT", "message": "no"},
        follow=True,
    )
    assert (
        "100 characters" in short.content.decode() and prolific.calls_to("transition")[-1].body["action"] == "APPROVE"
    )
    client.post(
        _url(study), {"action": "reject", "participants": [str(b.uuid)], "category": "LOW_EFFORT", "message": MESSAGE}
    )
    assert prolific.state.submissions["SUB-PB"]["status"] == "REJECTED"
    for _ in range(2):  # a double click pays once
        client.post(
            _url(study), {"action": "bonus", "participant": str(a.uuid), "amount": "1.25", "reason": "thorough"}
        )
    assert prolific.paid_cents("PA") == [125]
    assert BonusPayment.objects.get().status == "paid"
    page = client.get(_url(study)).content.decode()
    assert "1.25 “thorough”: Paid" in page
    calls = re.findall(r'<tr class="call-(ok|failed)">', page)
    assert calls and set(calls) == {"ok"} and len(calls) == PanelCall.objects.count()


def test_a_failed_call_is_shown_not_silent(client, study, boss, prolific, settings):  # noqa: F811
    link = make_link(study, items=1)
    a = _arrive(link, "PA", prolific)
    settings.PROLIFIC_API_TOKEN = "wrong"
    client.force_login(boss)
    response = client.post(_url(study), {"action": "approve", "participants": [str(a.uuid)]}, follow=True)
    page = response.content.decode()
    assert "refused the API token (401)" in page
    assert '<tr class="call-failed">' in page and "401: Invalid token." in page


def _submit_first(participants):
    for p in participants:
        item = Assignment.objects.filter(rater=p.user).first()
        submit_rating(assignment=item, rater=p.user, answers=GOOD_ANSWERS, version=item.version)


def test_the_page_costs_the_same_queries_for_two_or_ten_participants(client, study, boss, django_assert_num_queries):
    link = make_link(study, items=1, k=10, summaries=2)
    _submit_first(_people(link, 2))
    client.force_login(boss)
    client.get(_url(study))  # warm the session and content types
    cache.clear()  # both loads compute the monitor's figures (annotate.selectors.monitor caches them)
    with CaptureQueriesContext(connection) as two:
        assert client.get(_url(study)).status_code == 200
    _submit_first(_people(link, 8, prefix="MORE")[:5])
    participation.finish_participation(participant=Participant.objects.get(external_id="MORE7"), outcome="left")
    cache.clear()
    with django_assert_num_queries(len(two.captured_queries)):
        page = client.get(_url(study)).content.decode()
    assert page.count("<tr data-participant=") == 10


def test_panel_ids_reach_no_log_line(client, study, boss, caplog):
    """An arrival, a turned-away arrival and a search by panel id log paths only."""
    caplog.set_level("DEBUG")
    link = make_link(study, participants=1)
    client.get(f"/r/{links.link_token(link)}/?PROLIFIC_PID=SECRETPID1&STUDY_ID=S&SESSION_ID=X")
    client.logout()
    client.get(f"/r/{links.link_token(link)}/?PROLIFIC_PID=SECRETPID2&STUDY_ID=S&SESSION_ID=Y")
    client.force_login(boss)
    client.post(_url(study), {"action": "search", "panel_id": "SECRETPID1"})
    client.post(_url(study), {"action": "retry", "participant": "not-a-uuid", "panel_id": "SECRETPID1"})
    assert caplog.records  # the turned-away arrival (403) and the bad action (400) were logged
    assert "SECRETPID" not in caplog.text
