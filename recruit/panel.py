"""Services that act on the panel (Prolific) for a study's participants: matching its
submissions, approving and rejecting them, and paying bonuses exactly once
(docs/recruitment.md, "Prolific's API"). The HTTP is recruit/prolific.py's; every exchange
is stored as a PanelCall row, whatever its outcome, so that no failure is silent.

No database transaction is held across an HTTP call: each write before or after one is its
own, so that a slow panel never holds a lock and the record of a failed call survives."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import timedelta

from django.db import IntegrityError, transaction
from django.utils import timezone

from annotate.models import Study
from core.exceptions import ApplicationError, InvalidStateError
from core.text_validation import check_text
from recruit.models import BonusPayment, PanelCall, Participant
from recruit.prolific import (
    MIN_REJECTION_MESSAGE,
    REJECTION_CATEGORIES,
    RETURNED,
    TIMED_OUT,
    PanelError,
    ProlificClient,
)
from recruit.services.participation import finish_participation

MAX_BONUS_CENTS = 100_00  # a bonus above 100 (in the study's currency) is surely a typo
# A claim older than this whose call never reported back (a worker that died mid-call) is
# treated as unconfirmed: reconciled from the panel's record, never paid again blindly.
STALE_CLAIM = timedelta(minutes=5)
REASON = re.compile(r"[\w .,:;!?'()/+-]{1,200}")


def _invalid(field: str, message: str) -> ApplicationError:
    return ApplicationError(f"{field}: {message}", extra={"fields": {field: message}})


class _Logged:
    """Stores the client's exchanges made inside the block as PanelCall rows."""

    def __init__(self, client: ProlificClient, *, study: Study, action: str, participant=None, by=None):
        self.client, self.study, self.action, self.participant, self.by = client, study, action, participant, by

    def __enter__(self):
        self.start = len(self.client.calls)
        return self

    def __exit__(self, *exc) -> None:
        PanelCall.objects.bulk_create(
            [
                PanelCall(
                    study=self.study,
                    participant=self.participant,
                    action=self.action,
                    method=c.method,
                    path=c.path[:300],
                    status_code=c.status,
                    ok=c.ok,
                    message=c.message,
                    made_by=self.by,
                )
                for c in self.client.calls[self.start :]
            ]
        )


def _client(client: ProlificClient | None) -> ProlificClient:
    return client if client is not None else ProlificClient.from_settings()


def _prolific(participants: Iterable[Participant]) -> list[Participant]:
    chosen = list(participants)
    others = [p for p in chosen if p.panel != Participant.Panel.PROLIFIC]
    if others:
        raise _invalid("participants", f"{len(others)} of them did not come from Prolific")
    return chosen


def _submission_id(participant: Participant) -> str:
    """Prolific passes the submission's id as SESSION_ID (its reference: "the ID we pass to
    the survey platform using %SESSION_ID%")."""
    if not participant.panel_session_id:
        raise _invalid("participants", f"{participant.user.get_username()} arrived without Prolific's SESSION_ID")
    return participant.panel_session_id


# --- submissions ---------------------------------------------------------------------------


@dataclass(frozen=True)
class SyncResult:
    submissions: int
    matched: int
    freed: int  # participants whose items went back to the pool (returned or timed out)


def sync_submissions(*, study: Study, by=None, client: ProlificClient | None = None) -> SyncResult:
    """Read the submissions of every Prolific study the participants came from, match them
    to participants (Prolific's participant id and study id), store each one's status, and
    free at once the items of those who returned or timed out on Prolific's side (their
    participation ends as `left` or `timed_out`; answers already submitted are kept)."""
    client = _client(client)
    participants = Participant.objects.filter(study=study, panel=Participant.Panel.PROLIFIC).select_related(
        "link", "user", "study"
    )
    by_key = {(p.panel_study_id, p.external_id): p for p in participants}
    study_ids = sorted({sid for sid, _ in by_key if sid})
    seen = matched = freed = 0
    now = timezone.now()
    for study_id in study_ids:
        with _Logged(client, study=study, action="list_submissions", by=by):
            submissions = client.list_submissions(study_id)
        seen += len(submissions)
        for submission in submissions:
            participant = by_key.get((study_id, submission.participant_id))
            if participant is None:
                continue
            matched += 1
            Participant.objects.filter(pk=participant.pk).update(
                panel_status=submission.status[:32], panel_checked_at=now
            )
            if submission.status in (RETURNED, TIMED_OUT):
                outcome = Participant.Outcome.LEFT if submission.status == RETURNED else Participant.Outcome.TIMED_OUT
                was_active = not participant.outcome
                finish_participation(participant=participant, outcome=outcome)
                freed += was_active
    return SyncResult(submissions=seen, matched=matched, freed=freed)


def approve(*, participants: Iterable[Participant], by=None, client: ProlificClient | None = None) -> int:
    """Approve the participants' submissions: one transition, or Prolific's bulk approval
    per Prolific study for several. Returns how many were approved."""
    chosen = _prolific(participants)
    if not chosen:
        raise _invalid("participants", "choose at least one participant")
    client = _client(client)
    study = chosen[0].study
    if len(chosen) == 1:
        (participant,) = chosen
        with _Logged(client, study=study, action="approve", participant=participant, by=by):
            submission = client.approve(_submission_id(participant))
        _set_status(chosen, submission.status or "APPROVED")
        return 1
    by_study: dict[str, list[Participant]] = {}
    for participant in chosen:
        by_study.setdefault(participant.panel_study_id, []).append(participant)
    for study_id, group in by_study.items():
        with _Logged(client, study=study, action="bulk_approve", by=by):
            client.bulk_approve(study_id, [_submission_id(p) for p in group])
        _set_status(group, "APPROVED")
    return len(chosen)


def reject(
    *,
    participants: Iterable[Participant],
    category: str,
    message: str,
    by=None,
    client: ProlificClient | None = None,
) -> int:
    """Reject the participants' submissions with one of Prolific's rejection categories
    and a message to the participant (Prolific needs at least 100 characters). Prolific has
    no bulk rejection: one transition each; the first failure stops and is reported, those
    done before it stay done (each is logged)."""
    chosen = _prolific(participants)
    if not chosen:
        raise _invalid("participants", "choose at least one participant")
    if category not in dict(REJECTION_CATEGORIES):
        raise _invalid("category", "choose one of Prolific's rejection categories")
    check_text(message, "message")
    message = message.strip()
    if len(message) < MIN_REJECTION_MESSAGE:
        raise _invalid("message", f"Prolific needs a message of at least {MIN_REJECTION_MESSAGE} characters")
    client = _client(client)
    for participant in chosen:
        with _Logged(client, study=participant.study, action="reject", participant=participant, by=by):
            submission = client.reject(_submission_id(participant), category=category, message=message)
        _set_status([participant], submission.status or "REJECTED")
    return len(chosen)


def _set_status(participants: list[Participant], status: str) -> None:
    Participant.objects.filter(pk__in=[p.pk for p in participants]).update(
        panel_status=status[:32], panel_checked_at=timezone.now()
    )


# --- bonuses -------------------------------------------------------------------------------


def record_bonus(*, participant: Participant, amount_cents: int, reason: str, by=None) -> BonusPayment:
    """The intent to pay a bonus, stored before any call: one per participant and reason
    (a second click, or a second worker, finds the first). Raises if the same reason was
    recorded with another amount."""
    if participant.panel != Participant.Panel.PROLIFIC:
        raise _invalid("participant", "bonuses are paid through Prolific: this participant came from another panel")
    if not isinstance(amount_cents, int) or isinstance(amount_cents, bool) or not 1 <= amount_cents <= MAX_BONUS_CENTS:
        raise _invalid("amount", f"from 0.01 to {MAX_BONUS_CENTS // 100}.00")
    check_text(reason, "reason")
    reason = reason.strip()
    if not REASON.fullmatch(reason):
        raise _invalid("reason", "1 to 200 letters, digits, spaces and simple punctuation")
    try:
        with transaction.atomic():
            return BonusPayment.objects.create(
                participant=participant, amount_cents=amount_cents, reason=reason, created_by=by
            )
    except IntegrityError:
        existing = BonusPayment.objects.get(participant=participant, reason=reason)
        if existing.amount_cents != amount_cents:
            raise _invalid("reason", "a bonus with this reason was recorded with another amount") from None
        return existing


@dataclass(frozen=True)
class PayResult:
    bonus: BonusPayment
    paid_now: bool  # this call made the payment
    message: str


def pay_bonus(*, bonus: BonusPayment, by=None, client: ProlificClient | None = None) -> PayResult:
    """Pay a recorded bonus exactly once (Prolific's pay endpoint pays again on every
    request):

    1. set it up on Prolific (a bulk bonus payment) if it was not yet; the id is stored with
       a compare-and-set, so two workers leave at most an unpaid, harmless set-up behind;
    2. claim the payment: `created -> paying` in one UPDATE that checks the row count, so a
       double click, a retry or a second worker finds it claimed and pays nothing;
    3. call pay: an answer marks it paid; a refusal (4xx, 429, no connection) gives it back
       as `created`, safe to pay later; a timeout, a dropped connection or a 5xx makes it
       `unconfirmed`;
    4. an unconfirmed (or long-claimed) payment is reconciled before anything else: the
       submission's bonuses as Prolific lists them say whether it was paid; until they do,
       it is never paid again from here."""
    client = _client(client)
    participant = Participant.objects.select_related("study", "user").get(pk=bonus.participant_id)
    bonus.refresh_from_db()
    if bonus.status == BonusPayment.Status.PAID:
        return PayResult(bonus, False, "This bonus was paid already.")
    stale = bonus.status == BonusPayment.Status.PAYING and bonus.updated_at < timezone.now() - STALE_CLAIM
    if bonus.status == BonusPayment.Status.UNCONFIRMED or stale:
        return reconcile_bonus(bonus=bonus, by=by, client=client)
    if bonus.status == BonusPayment.Status.PAYING:
        return PayResult(bonus, False, "This bonus is being paid by another request.")
    if not participant.panel_study_id:
        raise _invalid("participant", "arrived without Prolific's STUDY_ID: no bonus can be set up for them")
    log = {"study": participant.study, "participant": participant, "by": by}
    if bonus.status == BonusPayment.Status.INTENDED:
        try:
            with _Logged(client, action="bonus_setup", **log):
                bonus_id = client.create_bonus(
                    participant.panel_study_id, [(participant.external_id, bonus.amount_cents)]
                )
        except PanelError as exc:
            _note(bonus, exc.message)
            raise
        BonusPayment.objects.filter(pk=bonus.pk, status=BonusPayment.Status.INTENDED).update(
            status=BonusPayment.Status.CREATED, panel_bonus_id=bonus_id, updated_at=timezone.now()
        )
        bonus.refresh_from_db()
    claimed = BonusPayment.objects.filter(pk=bonus.pk, status=BonusPayment.Status.CREATED).update(
        status=BonusPayment.Status.PAYING, updated_at=timezone.now()
    )
    if not claimed:
        bonus.refresh_from_db()
        return PayResult(bonus, False, f"This bonus is {bonus.get_status_display().lower()}: nothing was paid now.")
    try:
        with _Logged(client, action="bonus_pay", **log):
            client.pay_bonus(bonus.panel_bonus_id)
    except PanelError as exc:
        status = BonusPayment.Status.UNCONFIRMED if exc.ambiguous else BonusPayment.Status.CREATED
        BonusPayment.objects.filter(pk=bonus.pk, status=BonusPayment.Status.PAYING).update(
            status=status, last_error=exc.message, updated_at=timezone.now()
        )
        bonus.refresh_from_db()
        raise
    now = timezone.now()
    BonusPayment.objects.filter(pk=bonus.pk, status=BonusPayment.Status.PAYING).update(
        status=BonusPayment.Status.PAID, paid_at=now, last_error="", updated_at=now
    )
    bonus.refresh_from_db()
    return PayResult(bonus, True, "Bonus paid.")


def reconcile_bonus(*, bonus: BonusPayment, by=None, client: ProlificClient | None = None) -> PayResult:
    """Whether an unconfirmed payment went through, from Prolific's own record: the
    participant's submission lists the bonuses paid on it (in cents). The bonus counts as
    paid when the submission shows more bonuses of its amount than this participant's other
    paid bonuses of that amount. Otherwise it stays unconfirmed (Prolific pays within
    minutes of the request): check again later; it is never paid again from here unless an
    admin, having checked on Prolific, releases it (release_unconfirmed_bonus)."""
    client = _client(client)
    participant = Participant.objects.select_related("study", "user").get(pk=bonus.participant_id)
    with _Logged(client, study=participant.study, action="bonus_check", participant=participant, by=by):
        submission = client.get_submission(_submission_id(participant))
    others = BonusPayment.objects.filter(
        participant=participant, status=BonusPayment.Status.PAID, amount_cents=bonus.amount_cents
    ).exclude(pk=bonus.pk)
    if submission.bonus_payments.count(bonus.amount_cents) > others.count():
        now = timezone.now()
        BonusPayment.objects.filter(
            pk=bonus.pk, status__in=(BonusPayment.Status.UNCONFIRMED, BonusPayment.Status.PAYING)
        ).update(status=BonusPayment.Status.PAID, paid_at=now, last_error="", updated_at=now)
        bonus.refresh_from_db()
        return PayResult(bonus, False, "Prolific shows this bonus as paid: it is not paid again.")
    BonusPayment.objects.filter(pk=bonus.pk, status=BonusPayment.Status.PAYING).update(
        status=BonusPayment.Status.UNCONFIRMED, updated_at=timezone.now()
    )
    _note(bonus, "Prolific does not show this bonus yet; it pays within minutes: check again later.")
    bonus.refresh_from_db()
    return PayResult(bonus, False, bonus.last_error)


def release_unconfirmed_bonus(*, bonus: BonusPayment) -> BonusPayment:
    """An admin checked on Prolific's site that an unconfirmed payment was not made: it can
    be paid again (the same set-up)."""
    released = BonusPayment.objects.filter(pk=bonus.pk, status=BonusPayment.Status.UNCONFIRMED).update(
        status=BonusPayment.Status.CREATED, updated_at=timezone.now()
    )
    if not released:
        raise InvalidStateError("Only an unconfirmed payment can be released.")
    bonus.refresh_from_db()
    return bonus


def _note(bonus: BonusPayment, message: str) -> None:
    BonusPayment.objects.filter(pk=bonus.pk).update(last_error=message, updated_at=timezone.now())
