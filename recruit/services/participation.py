"""Participants arriving through a link (with their work assigned), and leaving."""

from __future__ import annotations

import hashlib
import secrets
from datetime import timedelta
from typing import Any
from urllib.parse import quote

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction
from django.db.models import Count, Max, Q
from django.utils import timezone
from django.utils.translation import gettext_noop

from annotate import designs
from annotate.models import Assignment, Batch, StudyMembership
from annotate.services.assignments import withdraw_assignment
from annotate.services.members import add_study_member
from annotate.services.qualification import enrol_in_qualification
from core.exceptions import ApplicationError
from recruit.models import (
    ArrivalCount,
    Participant,
    RecruitmentLink,
)
from recruit.services.checks import PANEL_ID, invalid_field
from recruit.services.links import attention_checks

OPEN_STATES = (Assignment.State.PENDING, Assignment.State.IN_PROGRESS)


class ArrivalRefused(ApplicationError):
    """The link cannot take this participant (closed, full, no item left): decided before
    any step, so nobody consents or qualifies for work they cannot get. `link` is set when
    the participant should leave with the link's screen-out code (or its "full" message)."""

    code = "refused"
    http_status = 403

    def __init__(self, message: str, extra: dict[str, Any] | None = None, *, link: RecruitmentLink | None = None):
        super().__init__(message, extra)
        self.link = link


class TooManyArrivals(ArrivalRefused):
    code = "throttled"
    http_status = 429


def _live_counts(batch: Batch) -> dict[int, int]:
    """Live (not withdrawn) assignments per summary of the batch. The batch's items outside
    the pool (attention checks) are counted too and ignored by the callers: the pool's ids
    are not sent as a parameter list, whose size would grow every arrival's work under the
    lock with the study."""
    return dict(
        Assignment.objects.filter(batch=batch)
        .exclude(state=Assignment.State.WITHDRAWN)
        .values_list("summary_id")
        .annotate(n=Count("pk"))
        .values_list("summary_id", "n")
    )


def _free_items(batch: Batch, live: dict[int, int]) -> int:
    """Summaries of the batch's pool with fewer than k live raters (a newcomer has none of
    them yet)."""
    return sum(1 for s in set(batch.design.get("pool") or []) if live.get(s, 0) < batch.raters_per_item)


def _count_arrival(address: str) -> None:
    """Count one new account from `address`; refuse past the limit in the window."""
    if not address:
        return
    limit = settings.RECRUIT_ARRIVALS_PER_ADDRESS
    window = timedelta(minutes=settings.RECRUIT_ARRIVAL_WINDOW_MINUTES)
    now = timezone.now()
    row, _ = ArrivalCount.objects.select_for_update().get_or_create(address=address, defaults={"window_start": now})
    if row.window_start < now - window:
        row.window_start, row.count = now, 0
    if row.count >= limit:
        raise TooManyArrivals(gettext_noop("Too many new participants from your network: please try again later."))
    row.count += 1
    row.save()


# The parameters each panel passes: (participant id, study id, session id).
PANEL_FIELDS = {
    Participant.Panel.PROLIFIC: ("PROLIFIC_PID", "STUDY_ID", "SESSION_ID"),
    Participant.Panel.GENERIC: ("participant", "study", "session"),
}


def check_panel_ids(params) -> tuple[str, str, str, str]:
    """(panel, participant id, study id, session id) from the link's query string (or the
    arrival form's fields): Prolific's PROLIFIC_PID, STUDY_ID and SESSION_ID, or a generic
    `participant`."""
    if params.get("PROLIFIC_PID") is not None:
        panel = Participant.Panel.PROLIFIC
    elif params.get("participant") is not None:
        panel = Participant.Panel.GENERIC
    else:
        raise invalid_field("PROLIFIC_PID", "the link needs the panel's participant id (PROLIFIC_PID or participant)")
    values = []
    for i, field in enumerate(PANEL_FIELDS[panel]):
        value = params.get(field, "")
        if (i == 0 or value) and not PANEL_ID.fullmatch(value):
            raise invalid_field(field, "1 to 64 letters, digits or _.:@-")
        values.append(value)
    return panel, *values


def withdraw_open(assignments) -> int:
    """Withdraw the open (pending or started) assignments among these; how many."""
    n = 0
    for assignment in assignments.filter(state__in=OPEN_STATES):
        withdraw_assignment(assignment=assignment)
        n += 1
    return n


def release_absent(*, link: RecruitmentLink, now=None) -> int:
    """Give back the open items of the link's participants who have been away longer
    than the lease (or past their time budget): withdrawn, their answers kept. Returns
    the number of participants released. Called inside arrive()'s lock."""
    now = now or timezone.now()
    gone = Participant.objects.filter(link=link, outcome="", released_at__isnull=True).filter(
        Q(last_seen_at__lt=now - timedelta(minutes=link.lease_minutes))
        | Q(created_at__lt=now - timedelta(minutes=link.time_budget_minutes))
    )
    released = 0
    for participant in gone:
        withdraw_open(Assignment.objects.filter(batch=link.batch, rater=participant.user))
        Participant.objects.filter(pk=participant.pk).update(released_at=now)
        released += 1
    return released


def _tie_break(participant_id: int, summary_id: int, seed: int) -> bytes:
    return hashlib.sha256(f"{seed}:{participant_id}:{summary_id}".encode()).digest()


def assign_work(*, participant: Participant, live: dict[int, int] | None = None) -> list[Assignment]:
    """Hand the participant items of the link's pool, fewest live ratings first (ties in
    an order of the participant's own), never more than k live raters on an item, up to
    `items_per_participant` items in all (withdrawn ones not counted again).

    The caller holds the batch's row lock (arrive()), so concurrent arrivals count live
    ratings one after the other and k holds; `live` is the batch's _live_counts when the
    caller read them under that lock."""
    link = participant.link
    batch = link.batch
    pool = list(batch.design.get("pool") or [])
    in_pool = set(pool)
    mine = Assignment.objects.filter(batch=batch, rater=participant.user).exclude(state=Assignment.State.WITHDRAWN)
    kept = sum(1 for s in mine.values_list("summary_id", flat=True) if s in in_pool)  # not checks
    wanted = link.items_per_participant - kept
    if wanted <= 0:
        return []
    if live is None:
        live = _live_counts(batch)
    had = set(
        Assignment.objects.filter(study=participant.study, rater=participant.user).values_list("summary_id", flat=True)
    )
    open_items = [s for s in pool if live.get(s, 0) < batch.raters_per_item and s not in had]
    open_items.sort(key=lambda s: (live.get(s, 0), _tie_break(participant.pk, s, batch.seed)))
    chosen = open_items[:wanted]
    checks = [c for c in attention_checks(participant.study) if c not in had] if batch.attention_every else []
    if chosen and checks:
        # About one check after every N items, at a place the participant cannot predict
        # (annotate.designs, as in a batch's queues); each check at most once.
        mixed = designs.insert_attention_checks(
            chosen, [("check", c) for c in checks], every=batch.attention_every, seed=f"{batch.seed}:{participant.pk}"
        )
        seen: set[int] = set()
        chosen = []
        for entry in mixed:
            summary_id = entry[1] if isinstance(entry, tuple) else entry
            if summary_id not in seen:
                seen.add(summary_id)
                chosen.append(summary_id)
    last = Assignment.objects.filter(study=participant.study, rater=participant.user).aggregate(m=Max("position"))["m"]
    start = 0 if last is None else last + 1
    return Assignment.objects.bulk_create(
        [
            Assignment(study=participant.study, batch=batch, summary_id=s, rater=participant.user, position=start + i)
            for i, s in enumerate(chosen)
        ]
    )


def _refuse_if_closed_or_full(link: RecruitmentLink) -> None:
    """Refuse a newcomer when the link is closed or at its participant limit."""
    if not link.enabled:
        raise ArrivalRefused(gettext_noop("This study is closed to new participants."), link=link)
    if Participant.objects.filter(link=link).count() >= link.max_participants:
        raise ArrivalRefused(gettext_noop("This study has all the participants it needs."), link=link)


def _live_counts_with_a_free_item(link: RecruitmentLink) -> dict[int, int]:
    """The batch's live counts (_live_counts), or a refusal when no item of the pool has a
    free place. Under the batch's lock, after release_absent gave back what it could."""
    live = _live_counts(link.batch)
    if not _free_items(link.batch, live):
        raise ArrivalRefused(gettext_noop("Every item of this study has all the raters it needs."), link=link)
    return live


def _new_account(link: RecruitmentLink, address: str):
    """A newcomer's account, their membership and their qualification items: nothing here
    counts against k or the participant limit, so it is made before the batch's lock."""
    _count_arrival(address)
    user = get_user_model().objects.create_user(username=f"participant-{secrets.token_hex(8)}", password=None)
    add_study_member(study=link.study, user=user, role=StudyMembership.Role.RATER)
    # Behind a qualification gate the study's qualification items come first; the link's
    # items stay hidden until the participant passes (visible_to_rater).
    enrol_in_qualification(study=link.study, rater=user)
    return user


def arrive(
    *,
    link: RecruitmentLink,
    panel: str,
    external_id: str,
    panel_study_id: str = "",
    panel_session_id: str = "",
    address: str = "",
) -> tuple[Participant, bool]:
    """A participant arrives through the link: their account is made (first visit) or
    found (a return), and work is handed out. Returns (participant, created).

    A newcomer's account is made first, then the batch row is locked (select_for_update;
    SQLite's writers queue on the database lock, settings' IMMEDIATE transactions) and the
    link's counts are checked again, all in one transaction: arrivals on one link are
    counted one at a time, so the participant limit and k per item hold under concurrency,
    while the lock is held only for the counting and the handing out; a refused newcomer
    leaves no account."""
    with transaction.atomic():
        returning = Participant.objects.filter(link=link, external_id=external_id).exists()
        user, live = None, None
        if not returning:
            # Decided before any step (consent, instructions, qualification): someone who
            # cannot get an item leaves at once with the screen-out code.
            _refuse_if_closed_or_full(link)
            user = _new_account(link, address)
        Batch.objects.select_for_update().filter(pk=link.batch_id).update(updated_at=timezone.now())
        link = RecruitmentLink.objects.select_related("study", "batch").get(pk=link.pk)
        now = timezone.now()
        release_absent(link=link, now=now)
        participant = (
            Participant.objects.select_related("user", "link__batch", "study")
            .filter(link=link, external_id=external_id)
            .first()
        )
        if (user is None) == (participant is None):
            # Made by another arrival with the same ids after this one looked (or gone since).
            raise ArrivalRefused(gettext_noop("This participant arrived twice at once: please reload the page."))
        if user is not None:
            _refuse_if_closed_or_full(link)  # again: others may have taken the last places
            live = _live_counts_with_a_free_item(link)
            participant = Participant.objects.create(
                user=user,
                link=link,
                study=link.study,
                panel=panel,
                external_id=external_id,
                panel_study_id=panel_study_id,
                panel_session_id=panel_session_id,
                address=address,
                last_seen_at=now,
            )
        else:
            Participant.objects.filter(pk=participant.pk).update(last_seen_at=now, released_at=None)
            participant.refresh_from_db()
        if participant.outcome == "" and not time_is_up(participant, now=now):
            if user is None:
                enrol_in_qualification(study=link.study, rater=participant.user)
            assign_work(participant=participant, live=live)
        return participant, user is not None


def time_is_up(participant: Participant, *, now=None) -> bool:
    now = now or timezone.now()
    return participant.created_at + timedelta(minutes=participant.link.time_budget_minutes) <= now


# How stale `last_seen_at` may get before a request writes it again: half the shortest
# lease (1 minute), so a participant who is here never loses their items, while their draft
# saves and API calls do not each add a write.
TOUCH_EVERY = timedelta(seconds=30)


def touch(*, participant: Participant) -> None:
    """The participant is here: the lease on their items starts again (written at most
    every TOUCH_EVERY)."""
    now = timezone.now()
    if now - participant.last_seen_at >= TOUCH_EVERY:
        Participant.objects.filter(pk=participant.pk).update(last_seen_at=now)


FINAL_OUTCOMES = tuple(o for o in Participant.Outcome.values if o)


@transaction.atomic
def finish_participation(*, participant: Participant, outcome: str) -> Participant:
    """End a participant's part: `completed`, `declined` (consent), `screened_out` (failed
    qualification, no item left), `left` (the participant's own "Leave") or `timed_out`
    (past the link's time budget). Their open items go back to the pool (answers kept). The
    first outcome stands: finishing again changes nothing and returns the participant as
    stored."""
    if outcome not in FINAL_OUTCOMES:
        raise invalid_field("outcome", f"must be one of {', '.join(FINAL_OUTCOMES)}")
    updated = Participant.objects.filter(pk=participant.pk, outcome="").update(
        outcome=outcome, finished_at=timezone.now(), updated_at=timezone.now()
    )
    if updated:
        withdraw_open(Assignment.objects.filter(study=participant.study, rater=participant.user))
    participant.refresh_from_db()
    return participant


def outcome_code(participant: Participant) -> str:
    """The code a finished participant takes back to the panel ("" for none):

    - completed: the completion code;
    - timed out: the completion code if they submitted any of the link's items in time
      (their work counts and is paid), else the screen-out code;
    - left: the link's code for leaving, else the screen-out code;
    - declined, screened out: the screen-out code."""
    link = participant.link
    outcome = participant.outcome
    if outcome == Participant.Outcome.COMPLETED:
        return link.completion_code
    if outcome == Participant.Outcome.TIMED_OUT and has_done_study_work(participant):
        return link.completion_code
    if outcome == Participant.Outcome.LEFT and link.left_code:
        return link.left_code
    return link.screenout_code


def return_url(link: RecruitmentLink, code: str) -> str:
    """The panel's completion URL with `?cc=<code>` added; "" without a code (the page then
    asks the participant to return the study on the panel)."""
    if not code:
        return ""
    joiner = "&" if "?" in link.completion_url else "?"
    return f"{link.completion_url}{joiner}cc={quote(code, safe='')}"


def completion(participant: Participant) -> tuple[str, str]:
    """(code, URL to send the participant to) for a finished participant."""
    code = outcome_code(participant)
    return code, return_url(participant.link, code)


def has_done_study_work(participant: Participant) -> bool:
    """Whether the participant submitted any of the link's items: qualification (and
    training) items are screening in batches of their own and never count."""
    return Assignment.objects.filter(
        batch_id=participant.link.batch_id, rater=participant.user, state=Assignment.State.SUBMITTED
    ).exists()
