"""Arriving and leaving (docs/recruitment.md): a participant the link cannot take is told
so at arrival, before any step, with the screen-out code; qualification answers never count
as study work; "Leave" ends the participation with its own outcome and code; the time
budget holds on every write."""

from datetime import timedelta

import pytest
from django.utils import timezone

from annotate.models import Assignment, Revision, StudyMembership
from annotate.services.adjudication import record_expected_answer
from annotate.services.assignments import withdraw_assignment
from annotate.services.batches import create_batch
from annotate.services.members import add_study_member
from annotate.services.qualification import set_qualification_rule
from annotate.services.ratings import submit_rating
from recruit.models import Participant
from recruit.services import participation
from tests.conftest import GOOD_ANSWERS
from tests.factories import SummaryFactory, UserFactory
from tests.recruit.helpers import COMPLETE, SCREENOUT, arrival_url, make_link, set_up_onboarding

pytestmark = pytest.mark.django_db


def _gate(study, *, items=2):
    """A qualification gate: `items` gold items scored on "overall" (exact), one attempt."""
    pilot = UserFactory()
    add_study_member(study=study, user=pilot, role=StudyMembership.Role.RATER)
    gold = [SummaryFactory(source__study=study, key=f"gold-{i}") for i in range(items)]
    for summary in gold:
        record_expected_answer(study=study, summary=summary, purpose="gold", answers={"overall": 4})
    create_batch(
        study=study, name="Screening", kind="qualification", raters=[pilot], design="k_raters", seed=1, gold=gold
    )
    set_qualification_rule(study=study, threshold=1.0, questions=["overall"], tolerances={}, attempts_allowed=1)


def _submit(assignment, user):
    submit_rating(assignment=assignment, rater=user, answers=GOOD_ANSWERS, version=assignment.version)


# --- item 1: decided at arrival ---------------------------------------------------------------


def test_a_full_pool_is_told_at_arrival_before_consent_with_the_screenout_code(client, study):
    """Every item has its k raters: the newcomer is not asked to consent, read instructions
    or qualify for work they cannot get; they leave at once with the screen-out code."""
    set_up_onboarding(study)
    _gate(study)
    link = make_link(study, items=2, k=1, summaries=2)
    participation.arrive(link=link, panel="prolific", external_id="FIRST")  # takes both items
    response = client.get(arrival_url(link, pid="SECOND"), follow=True)
    page = response.content.decode()
    assert response.status_code == 403
    assert response.request["PATH_INFO"].startswith("/r/") and "/consent/" not in response.request["PATH_INFO"]
    assert f'id="completion-code">{SCREENOUT}<' in page
    assert f'content="5;url=http://127.0.0.1:9/complete?cc={SCREENOUT}"' in page
    assert not Participant.objects.filter(external_id="SECOND").exists()


def test_a_link_without_a_screenout_code_shows_its_full_message(client, study):
    link = make_link(study, participants=1)
    link.screenout_code = ""
    link.full_message = "We have enough raters for now, thank you!"
    link.save()
    participation.arrive(link=link, panel="prolific", external_id="FIRST")
    response = client.get(arrival_url(link, pid="SECOND"))
    page = response.content.decode()
    assert response.status_code == 403
    assert "We have enough raters for now, thank you!" in page
    assert "completion-code" not in page and "http-equiv" not in page


def test_qualification_answers_never_count_as_study_work(client, study):
    """A participant who passed the qualification but whose link items went elsewhere did no
    study work: the screen-out code, not the completion code."""
    _gate(study)
    link = make_link(study, items=1, k=2)
    client.get(arrival_url(link, pid="QUALIFIED"))
    me = Participant.objects.get()
    for item in Assignment.objects.filter(rater=me.user, batch__kind="qualification"):
        _submit(item, me.user)
    for item in Assignment.objects.filter(rater=me.user, batch=link.batch):
        withdraw_assignment(assignment=item)
    response = client.get(f"/r/s/{study.slug}/next/", follow=True)
    me.refresh_from_db()
    assert me.outcome == "screened_out"
    assert f'id="completion-code">{SCREENOUT}<' in response.content.decode()


def test_a_timed_out_participant_with_only_qualification_answers_gets_the_screenout_code(client, study):
    _gate(study)
    link = make_link(study, items=1, minutes=20)
    client.get(arrival_url(link, pid="SLOW"))
    me = Participant.objects.get()
    for item in Assignment.objects.filter(rater=me.user, batch__kind="qualification"):
        _submit(item, me.user)
    Participant.objects.filter(pk=me.pk).update(created_at=timezone.now() - timedelta(minutes=21))
    response = client.get(f"/r/s/{study.slug}/next/", follow=True)
    me.refresh_from_db()
    assert me.outcome == "timed_out"
    assert f'id="completion-code">{SCREENOUT}<' in response.content.decode()


# --- item 2: Leave ------------------------------------------------------------------------


def test_leave_ends_the_participation_with_its_own_outcome_and_code(client, study):
    link = make_link(study, items=3)
    link.left_code = "LEFT42"
    link.save()
    client.get(arrival_url(link, pid="LEAVER"))
    me = Participant.objects.get()
    _submit(Assignment.objects.filter(rater=me.user).first(), me.user)
    item_page = client.get(f"/r/s/{study.slug}/next/", follow=True).content.decode()
    assert 'href="/r/leave/"' in item_page  # the header's Leave
    confirm = client.get("/r/leave/")
    assert confirm.status_code == 200 and "LEFT42" in confirm.content.decode()
    response = client.post("/r/leave/", follow=True)
    me.refresh_from_db()
    assert me.outcome == "left" and me.finished_at is not None
    page = response.content.decode()
    assert 'id="completion-code">LEFT42<' in page
    assert 'content="5;url=http://127.0.0.1:9/complete?cc=LEFT42"' in page
    # Still signed in as the participant, on the end page; open items went back, answers kept.
    assert response.request["PATH_INFO"] == "/r/done/"
    live = Assignment.objects.filter(rater=me.user).exclude(state="withdrawn")
    assert list(live.values_list("state", flat=True)) == ["submitted"]


def test_leave_without_a_code_of_its_own_gives_the_screenout_code(client, study):
    link = make_link(study)
    client.get(arrival_url(link, pid="LEAVER"))
    response = client.post("/r/leave/", follow=True)
    assert f'id="completion-code">{SCREENOUT}<' in response.content.decode()
    assert Participant.objects.get().outcome == "left"


def test_leave_is_no_page_for_anyone_but_a_participant(client, rater_a):
    assert client.get("/r/leave/").status_code == 302  # to the login page
    client.force_login(rater_a)
    assert client.get("/r/leave/").status_code == 404
    assert client.post("/r/leave/").status_code == 404


# --- item 3: the time budget on every write --------------------------------------------------


def _late(link, client, pid="LATE"):
    client.get(arrival_url(link, pid=pid))
    me = Participant.objects.get(external_id=pid)
    Participant.objects.filter(pk=me.pk).update(
        created_at=timezone.now() - timedelta(minutes=link.time_budget_minutes + 1)
    )
    return me, Assignment.objects.filter(rater=me.user, batch=link.batch).first()


def test_an_answer_posted_after_the_time_budget_is_refused_with_a_page_and_the_code(client, study):
    link = make_link(study, items=2, minutes=20)
    me, item = _late(link, client)
    response = client.post(f"/rate/{item.uuid}/", {"action": "submit", "version": item.version, "overall": "4"})
    page = response.content.decode()
    assert response.status_code == 403
    assert "ran out" in page and '<header class="site">' in page  # the site's layout
    assert f'id="completion-code">{SCREENOUT}<' in page  # nothing submitted in time
    assert not Revision.objects.filter(assignment__rater=me.user).exists()
    me.refresh_from_db()
    assert me.outcome == "timed_out"


def test_a_late_answer_after_work_in_time_ends_with_the_completion_code(client, study):
    link = make_link(study, items=2, minutes=20)
    me, item = _late(link, client)
    _submit(item, me.user)  # in time (written before the clock was moved)
    other = Assignment.objects.filter(rater=me.user, batch=link.batch).exclude(pk=item.pk).get()
    response = client.post(f"/rate/{other.uuid}/", {"action": "submit", "version": other.version, "overall": "4"})
    assert response.status_code == 403
    assert f'id="completion-code">{COMPLETE}<' in response.content.decode()
    other.refresh_from_db()
    assert other.state == "withdrawn"


def test_a_late_api_write_is_refused_in_the_error_shape_and_stores_nothing(client, study):
    link = make_link(study, items=2, minutes=20)
    me, item = _late(link, client)
    for call in ("rating", "submit"):
        response = client.post(
            f"/api/assignments/{item.uuid}/{call}/",
            {"version": item.version, "answers": GOOD_ANSWERS},
            content_type="application/json",
        )
        assert response.status_code == 403
        body = response.json()["error"]
        assert (body["code"], body["next"]) == ("participation_over", "/r/done/")
    assert not Revision.objects.filter(assignment__rater=me.user).exists()
