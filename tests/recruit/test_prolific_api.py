"""Prolific's API from the platform (recruit/prolific.py, recruit/panel.py), against a
scripted Prolific server written from its published reference (tests/recruit/prolific_server.py):
submissions matched to participants, returned and timed-out places freed at once, approvals
and rejections, every call logged, each error answer shown; and bonuses paid exactly once
under a timeout, a dropped connection, a retry, and two concurrent requests."""

import threading

import pytest
from django.db import connection

from annotate.models import Assignment
from core.exceptions import ApplicationError
from recruit import panel
from recruit.models import BonusPayment, PanelCall, Participant
from recruit.prolific import PanelError, PanelNotConfigured, ProlificClient
from recruit.services import participation
from tests.recruit.helpers import make_link
from tests.recruit.prolific_server import TOKEN, ProlificServer, act

STUDY_ID = "PSTUDY0001"
MESSAGE = "Your answers were given faster than anyone could read the texts: " + "x" * 60


@pytest.fixture
def prolific(settings):
    with ProlificServer() as server:
        settings.PROLIFIC_API_TOKEN = TOKEN
        settings.PROLIFIC_API_URL = server.base_url
        yield server


def _arrive(link, pid, server, status="AWAITING REVIEW"):
    participant, _ = participation.arrive(
        link=link, panel="prolific", external_id=pid, panel_study_id=STUDY_ID, panel_session_id=f"SUB-{pid}"
    )
    server.add_submission(submission_id=f"SUB-{pid}", participant_id=pid, study_id=STUDY_ID, status=status)
    return participant


def _client(server, **kwargs):
    return ProlificClient(token=TOKEN, base_url=server.base_url, **kwargs)


# --- submissions -----------------------------------------------------------------------------


@pytest.mark.django_db
def test_submissions_are_listed_page_by_page_and_matched_to_participants(study, prolific):
    link = make_link(study, items=1, k=3)
    people = [_arrive(link, f"PID{i}", prolific) for i in range(3)]
    prolific.add_submission(submission_id="SUB-X", participant_id="NOBODY", study_id=STUDY_ID)
    result = panel.sync_submissions(study=study)
    assert (result.submissions, result.matched, result.freed) == (4, 3, 0)
    assert len(prolific.calls_to("list")) == 2  # two submissions a page
    for p in people:
        p.refresh_from_db()
        assert p.panel_status == "AWAITING REVIEW" and p.panel_checked_at is not None
    calls = PanelCall.objects.filter(study=study, action="list_submissions")
    assert calls.count() == 2 and all(c.ok and c.status_code == 200 for c in calls)
    assert all("?" not in c.path and "PID" not in c.path for c in calls)


@pytest.mark.django_db
def test_returned_and_timed_out_submissions_free_their_items_at_once(study, prolific):
    link = make_link(study, items=2, k=1, summaries=4)
    gone = _arrive(link, "RETURNER", prolific, status="RETURNED")
    late = _arrive(link, "SLEEPER", prolific, status="TIMED-OUT")
    with pytest.raises(participation.ArrivalRefused):  # every item has its one rater
        participation.arrive(link=link, panel="prolific", external_id="NEXT")
    result = panel.sync_submissions(study=study)
    assert result.freed == 2
    gone.refresh_from_db()
    late.refresh_from_db()
    assert (gone.outcome, late.outcome) == ("left", "timed_out")
    assert not Assignment.objects.filter(rater__in=[gone.user, late.user]).exclude(state="withdrawn").exists()
    newcomer, _ = participation.arrive(link=link, panel="prolific", external_id="NEXT")
    assert Assignment.objects.filter(rater=newcomer.user).exclude(state="withdrawn").count() == 2


@pytest.mark.django_db
def test_approve_one_and_in_bulk(study, prolific):
    link = make_link(study, items=1, k=3)
    a, b, c = (_arrive(link, f"PID{i}", prolific) for i in range(3))
    assert panel.approve(participants=[a]) == 1
    assert prolific.calls_to("transition")[0].body == {"action": "APPROVE"}
    assert panel.approve(participants=[b, c]) == 2
    (bulk,) = prolific.calls_to("bulk_approve")
    assert bulk.body == {"study_id": STUDY_ID, "submission_ids": ["SUB-PID1", "SUB-PID2"]}
    assert {s["status"] for s in prolific.state.submissions.values()} == {"APPROVED"}
    assert set(Participant.objects.values_list("panel_status", flat=True)) == {"APPROVED"}


@pytest.mark.django_db
def test_a_rejection_needs_a_category_and_prolifics_long_message(study, prolific):
    link = make_link(study, items=1, k=3)
    a, b = _arrive(link, "PID0", prolific), _arrive(link, "PID1", prolific)
    with pytest.raises(ApplicationError, match="category"):
        panel.reject(participants=[a], category="BORING", message=MESSAGE)
    with pytest.raises(ApplicationError, match="100 characters"):
        panel.reject(participants=[a], category="TOO_QUICKLY", message="too fast")
    assert prolific.requests == []  # refused before any call
    assert panel.reject(participants=[a, b], category="TOO_QUICKLY", message=MESSAGE) == 2
    bodies = [r.body for r in prolific.calls_to("transition")]
    assert bodies == [{"action": "REJECT", "rejection_category": "TOO_QUICKLY", "message": MESSAGE}] * 2
    assert prolific.state.submissions["SUB-PID0"]["status"] == "REJECTED"


# --- errors ----------------------------------------------------------------------------------


@pytest.mark.django_db
def test_a_wrong_token_is_a_401_shown_and_logged(study, prolific, settings):
    link = make_link(study, items=1)
    a = _arrive(link, "PID0", prolific)
    settings.PROLIFIC_API_TOKEN = "not-the-token"
    with pytest.raises(PanelError, match="401") as caught:
        panel.approve(participants=[a])
    assert not caught.value.ambiguous
    call = PanelCall.objects.get()
    assert (call.action, call.status_code, call.ok, call.participant) == ("approve", 401, False, a)


@pytest.mark.django_db
def test_no_token_means_no_call(study, prolific, settings):
    link = make_link(study, items=1)
    a = _arrive(link, "PID0", prolific)
    settings.PROLIFIC_API_TOKEN = ""
    with pytest.raises(PanelNotConfigured):
        panel.approve(participants=[a])
    assert prolific.requests == []


@pytest.mark.django_db
def test_an_unknown_submission_is_a_404(study, prolific):
    link = make_link(study, items=1)
    a, _ = participation.arrive(
        link=link, panel="prolific", external_id="GHOST", panel_study_id=STUDY_ID, panel_session_id="SUB-NONE"
    )
    with pytest.raises(PanelError, match="404"):
        panel.approve(participants=[a])
    assert PanelCall.objects.get().status_code == 404


@pytest.mark.django_db
def test_a_429_is_retried_after_its_retry_after(study, prolific):
    link = make_link(study, items=1)
    a = _arrive(link, "PID0", prolific)
    prolific.script("transition", act(429, {"error": {"detail": "Slow down"}}, headers={"Retry-After": "7"}), None)
    waited = []
    assert panel.approve(participants=[a], client=_client(prolific, sleep=waited.append)) == 1
    assert waited == [7.0]
    assert len(prolific.calls_to("transition")) == 2
    assert list(PanelCall.objects.order_by("pk").values_list("status_code", "ok")) == [(429, False), (200, True)]


@pytest.mark.django_db
def test_a_5xx_is_reported_as_possibly_carried_out(study, prolific):
    link = make_link(study, items=1)
    a = _arrive(link, "PID0", prolific)
    prolific.script("transition", act(503, {"error": {"detail": "down"}}))
    with pytest.raises(PanelError, match="503") as caught:
        panel.approve(participants=[a])
    assert caught.value.ambiguous
    assert PanelCall.objects.get().status_code == 503


@pytest.mark.django_db
def test_a_connection_dropped_after_the_request_is_reported(study, prolific):
    link = make_link(study, items=1)
    prolific.add_submission(submission_id="SUB-A", participant_id="A", study_id=STUDY_ID)
    participation.arrive(
        link=link, panel="prolific", external_id="A", panel_study_id=STUDY_ID, panel_session_id="SUB-A"
    )
    prolific.script("list", act(200, process=True, drop=True))
    with pytest.raises(PanelError, match="lost") as caught:
        panel.sync_submissions(study=study)
    assert caught.value.ambiguous
    call = PanelCall.objects.get()
    assert (call.status_code, call.ok) == (None, False)


# --- bonuses: exactly once -------------------------------------------------------------------


@pytest.fixture
def bonus(study, prolific):
    link = make_link(study, items=1)
    participant = _arrive(link, "PAYME", prolific, status="APPROVED")
    return panel.record_bonus(participant=participant, amount_cents=150, reason="careful work")


@pytest.mark.django_db
def test_a_bonus_is_set_up_then_paid_once(bonus, prolific):
    result = panel.pay_bonus(bonus=bonus)
    assert result.paid_now and result.bonus.status == "paid" and result.bonus.paid_at is not None
    (setup,) = prolific.calls_to("bonus_setup")
    assert setup.body == {"study_id": STUDY_ID, "csv_bonuses": "PAYME,1.50\n"}
    again = panel.pay_bonus(bonus=bonus)  # a double click
    assert not again.paid_now
    assert prolific.state.pays == {result.bonus.panel_bonus_id: 1}
    assert prolific.paid_cents("PAYME") == [150]


@pytest.mark.django_db
def test_recording_the_same_bonus_twice_keeps_one_intent(bonus):
    again = panel.record_bonus(participant=bonus.participant, amount_cents=150, reason="careful work")
    assert again.pk == bonus.pk and BonusPayment.objects.count() == 1
    with pytest.raises(ApplicationError, match="another amount"):
        panel.record_bonus(participant=bonus.participant, amount_cents=200, reason="careful work")


@pytest.mark.django_db
def test_a_timed_out_payment_is_reconciled_and_never_paid_twice(bonus, prolific):
    """Prolific pays, but answers after the client's timeout: unconfirmed; the retry reads the
    submission's bonuses, finds it paid, and sends no second payment."""
    prolific.script("pay", act(202, process=True, delay=1.5), None)
    with pytest.raises(PanelError) as caught:
        panel.pay_bonus(bonus=bonus, client=_client(prolific, timeout=0.3))
    assert caught.value.ambiguous
    bonus.refresh_from_db()
    assert bonus.status == "unconfirmed"
    retried = panel.pay_bonus(bonus=bonus)
    assert (retried.bonus.status, retried.paid_now) == ("paid", False)
    assert len(prolific.calls_to("pay")) == 1 and prolific.paid_cents("PAYME") == [150]
    assert PanelCall.objects.filter(action="bonus_check", ok=True).count() == 1


@pytest.mark.django_db
def test_a_payment_whose_connection_drops_after_it_was_received_is_paid_once(bonus, prolific):
    prolific.script("pay", act(202, process=True, drop=True), None)
    with pytest.raises(PanelError, match="lost"):
        panel.pay_bonus(bonus=bonus)
    assert panel.pay_bonus(bonus=bonus).bonus.status == "paid"
    assert panel.pay_bonus(bonus=bonus).bonus.status == "paid"
    assert len(prolific.calls_to("pay")) == 1 and prolific.paid_cents("PAYME") == [150]


@pytest.mark.django_db
def test_an_unconfirmed_payment_not_made_stays_unpaid_until_an_admin_releases_it(bonus, prolific):
    """A 500 that did nothing: the check finds no bonus, so the retry pays nothing (it cannot
    know); after an admin checked on Prolific and released it, it is paid once."""
    prolific.script("pay", act(500, {"error": {"detail": "boom"}}), None)
    with pytest.raises(PanelError, match="500"):
        panel.pay_bonus(bonus=bonus)
    retried = panel.pay_bonus(bonus=bonus)
    assert retried.bonus.status == "unconfirmed" and "not show" in retried.message
    assert len(prolific.calls_to("pay")) == 1 and prolific.paid_cents("PAYME") == []
    panel.release_unconfirmed_bonus(bonus=bonus)
    assert panel.pay_bonus(bonus=bonus).bonus.status == "paid"
    assert prolific.paid_cents("PAYME") == [150]


@pytest.mark.django_db
@pytest.mark.parametrize("status", [400, 401, 429])
def test_a_refused_payment_can_be_paid_later(bonus, prolific, status):
    prolific.script("pay", act(status, {"error": {"detail": "no"}}), None)
    with pytest.raises(PanelError) as caught:
        panel.pay_bonus(bonus=bonus)
    assert not caught.value.ambiguous
    bonus.refresh_from_db()
    assert bonus.status == "created" and bonus.last_error
    assert panel.pay_bonus(bonus=bonus).paid_now
    assert prolific.paid_cents("PAYME") == [150]


@pytest.mark.django_db(transaction=True)
def test_two_concurrent_requests_pay_a_bonus_once(study, prolific):
    """Two workers (threads, each with its own database connection) pay the same bonus at
    the same moment; Prolific answers slowly so both are in flight together."""
    link = make_link(study, items=1)
    participant = _arrive(link, "TWICE", prolific, status="APPROVED")
    bonus = panel.record_bonus(participant=participant, amount_cents=275, reason="double click")
    prolific.script("pay", act(202, process=True, delay=0.5), None)
    barrier = threading.Barrier(2)
    results, errors = [], []

    def worker():
        try:
            row = BonusPayment.objects.get(pk=bonus.pk)
            barrier.wait(timeout=60)
            results.append(panel.pay_bonus(bonus=row))
        except Exception as exc:  # reported below, with the thread's exception
            errors.append(exc)
            raise
        finally:
            connection.close()

    threads = [threading.Thread(target=worker) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert errors == []
    assert sorted(r.paid_now for r in results) == [False, True]
    assert len(prolific.calls_to("pay")) == 1
    assert prolific.paid_cents("TWICE") == [275]
    assert BonusPayment.objects.get(pk=bonus.pk).status == "paid"
