"""Items of a participant who leaves go back to the pool after the lease, and the time
budget ends a session; a participant who comes back gets work again if there is room."""

from datetime import timedelta

import pytest
from django.utils import timezone

from annotate.models import Assignment
from annotate.services.ratings import submit_rating
from recruit.models import Participant
from recruit.services import participation
from tests.conftest import GOOD_ANSWERS
from tests.recruit.helpers import arrival_url, make_link

pytestmark = pytest.mark.django_db


def _live(link):
    return Assignment.objects.filter(batch=link.batch).exclude(state="withdrawn")


def test_an_absent_participants_items_go_back_after_the_lease(study):
    """2 summaries, k = 1, 2 items each: the first participant takes both; the second gets
    nothing until the first has been away longer than the 30-minute lease."""
    link = make_link(study, items=2, k=1, summaries=2, lease=30)
    first, _ = participation.arrive(link=link, panel="prolific", external_id="P1")
    submit_rating(
        assignment=(done := Assignment.objects.filter(rater=first.user).first()),
        rater=first.user,
        answers=GOOD_ANSWERS,
        version=done.version,
    )
    # No item is free: the second is turned away at arrival, and no account is made.
    with pytest.raises(participation.ArrivalRefused):
        participation.arrive(link=link, panel="prolific", external_id="P2")

    Participant.objects.filter(pk=first.pk).update(last_seen_at=timezone.now() - timedelta(minutes=29))
    with pytest.raises(participation.ArrivalRefused):
        participation.arrive(link=link, panel="prolific", external_id="P2")
    assert not Participant.objects.filter(external_id="P2").exists()

    Participant.objects.filter(pk=first.pk).update(last_seen_at=timezone.now() - timedelta(minutes=31))
    second, _ = participation.arrive(link=link, panel="prolific", external_id="P2")
    # The open item moved; the submitted one stays the first participant's.
    assert list(_live(link).filter(rater=second.user).values_list("summary_id", flat=True)) == [
        Assignment.objects.exclude(pk=done.pk).get(rater=first.user).summary_id
    ]
    assert _live(link).filter(rater=first.user).get().pk == done.pk
    first.refresh_from_db()
    assert first.released_at is not None


def test_a_participant_past_the_time_budget_is_finished(client, study):
    link = make_link(study, items=2, minutes=20)
    client.get(arrival_url(link))
    participant = Participant.objects.get()
    item = Assignment.objects.filter(rater=participant.user).first()
    submit_rating(assignment=item, rater=participant.user, answers=GOOD_ANSWERS, version=item.version)
    Participant.objects.filter(pk=participant.pk).update(created_at=timezone.now() - timedelta(minutes=21))
    response = client.get(f"/r/s/{study.slug}/next/", follow=True)
    assert response.request["PATH_INFO"] == "/r/done/"
    participant.refresh_from_db()
    assert participant.outcome == "timed_out"
    # One item submitted in time: their work counts, so the code is the completion code.
    code = participant.link.completion_code
    assert participation.completion(participant)[0] == participation.outcome_code(participant) == code
    assert _live(link).filter(rater=participant.user).count() == 1


def test_a_released_participant_coming_back_in_their_session_gets_work_again(client, study):
    """6 summaries, k = 1: P1's two go back, P2 takes two, and two are left that P1 never
    had (a withdrawn item is not given back to the same participant)."""
    link = make_link(study, items=2, k=1, summaries=6, lease=30)
    client.get(arrival_url(link, pid="P1"))
    first = Participant.objects.get()
    Participant.objects.filter(pk=first.pk).update(last_seen_at=timezone.now() - timedelta(minutes=31))
    participation.arrive(link=link, panel="prolific", external_id="P2")  # releases P1's items; P2 takes two
    assert not _live(link).filter(rater=first.user).exists()
    response = client.get(f"/r/s/{study.slug}/next/")
    assert response.status_code == 302 and response["Location"].startswith("/rate/")
    assert _live(link).filter(rater=first.user).count() == 2
    first.refresh_from_db()
    assert first.outcome == "" and first.released_at is None


def test_a_participant_for_whom_no_item_is_left_gets_the_screenout_code(client, study):
    from tests.recruit.helpers import SCREENOUT

    link = make_link(study, items=2, k=1, summaries=2)
    participation.arrive(link=link, panel="prolific", external_id="P1")  # takes both items
    response = client.get(arrival_url(link, pid="P2"), follow=True)
    assert response.status_code == 403
    assert f'id="completion-code">{SCREENOUT}<' in response.content.decode()
    assert not Participant.objects.filter(external_id="P2").exists()


def test_a_participants_requests_renew_the_lease_without_a_write_each(client, study):
    """Each request of a participant renews the lease (`last_seen_at`), but writes it only
    when it is at least TOUCH_EVERY (30 s) old: a participant saving drafts every few
    seconds does not add a write per request, and is never away longer than 30 s on record."""
    link = make_link(study, items=1)
    client.get(arrival_url(link, pid="TOUCH1"))
    me = Participant.objects.get()
    item = Assignment.objects.get(rater=me.user)

    recent = timezone.now() - timedelta(seconds=10)
    Participant.objects.filter(pk=me.pk).update(last_seen_at=recent)
    client.get(f"/rate/{item.uuid}/")
    me.refresh_from_db()
    assert me.last_seen_at == recent

    stale = timezone.now() - timedelta(seconds=31)
    Participant.objects.filter(pk=me.pk).update(last_seen_at=stale)
    client.get(f"/rate/{item.uuid}/")
    me.refresh_from_db()
    assert me.last_seen_at > stale + timedelta(seconds=30)
