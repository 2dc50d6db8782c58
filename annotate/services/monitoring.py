"""Writes of the live quality monitor and of the raters' questions (docs/monitoring.md):
pausing and resuming a rater, moving a rater's open items to others, excluding a rater's
answers from the analysis, raising a flag on an item and answering it. Keyword-only,
atomic, the same functions for pages and API."""

from __future__ import annotations

from dataclasses import dataclass

from django.db import IntegrityError, transaction
from django.db.models import Count
from django.utils import timezone
from django.utils.translation import gettext

from annotate.models import Assignment, Batch, ItemFlag, RaterExclusion, RaterPause, Study, StudyMembership
from annotate.selectors.monitor import open_pauses
from annotate.services.assignments import move_assignment
from core.exceptions import ApplicationError
from core.text_validation import check_limit, check_text

MAX_REASON_CHARS = 2000
MAX_NOTE_CHARS = 4000


def _invalid(field: str, message: str) -> ApplicationError:
    return ApplicationError(f'field "{field}": {message}', extra={"fields": {field: message}})


def _clean_text(value, field: str, *, limit: int, required: bool) -> str:
    if not isinstance(value, str):
        raise _invalid(field, "must be text")
    check_text(value, field)
    check_limit(value, field, limit)
    value = value.strip()
    if required and not value:
        raise _invalid(field, "must not be empty")
    return value


def _check_rater_of(study: Study, rater) -> None:
    if not StudyMembership.objects.filter(study=study, user=rater, role=StudyMembership.Role.RATER).exists():
        raise _invalid("rater", "is not a rater of this study")


# --- pause -------------------------------------------------------------------------------------


@transaction.atomic
def pause_rater(*, study: Study, rater, paused_by, reason: str = "") -> RaterPause:
    """Pause a rater in a study: no new items, no writes, a message on their pages."""
    _check_rater_of(study, rater)
    reason = _clean_text(reason, "reason", limit=MAX_REASON_CHARS, required=False)
    try:
        with transaction.atomic():
            return RaterPause.objects.create(study=study, rater=rater, paused_by=paused_by, reason=reason)
    except IntegrityError:  # rater_pause_one_open: two admins pressed Pause at once
        raise ApplicationError(f"{rater.get_username()} is already paused.") from None


@transaction.atomic
def resume_rater(*, study: Study, rater, resumed_by) -> RaterPause:
    pause = open_pauses(study).filter(rater=rater).select_for_update().first()
    if pause is None:
        raise ApplicationError(f"{rater.get_username()} is not paused.")
    pause.resumed_at = timezone.now()
    pause.resumed_by = resumed_by
    pause.save(update_fields=["resumed_at", "resumed_by", "updated_at"])
    return pause


# --- reassign ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Reassignment:
    moved: int
    kept: int  # open items no other rater could take (each has all the others already)


@transaction.atomic
def reassign_open_items(*, batch: Batch, rater) -> Reassignment:
    """Move the rater's open (not started or in progress) items of the batch to the
    study's other raters, keeping k: each item goes to one rater who has no live
    assignment of it yet (so no one rates an item twice, and the item keeps the number of
    raters the batch planned), choosing the one with the fewest open items in the batch
    (ties by username), never a paused rater. Answers already given stay stored."""
    open_states = [Assignment.State.PENDING, Assignment.State.IN_PROGRESS]
    mine = list(
        Assignment.objects.select_for_update()
        .filter(batch=batch, rater=rater, state__in=open_states)
        .select_related("summary", "study")
        .order_by("position")
    )
    paused = set(open_pauses(batch.study).values_list("rater_id", flat=True))
    members = [
        m.user
        for m in StudyMembership.objects.filter(study=batch.study, role=StudyMembership.Role.RATER)
        .exclude(user=rater)
        .exclude(user_id__in=paused)
        .select_related("user")
    ]
    load = dict(
        Assignment.objects.filter(batch=batch, state__in=open_states)
        .values("rater_id")
        .annotate(n=Count("id"))
        .values_list("rater_id", "n")
    )
    has = set(
        Assignment.objects.filter(summary__in=[a.summary_id for a in mine], rater__in=members)
        .exclude(state=Assignment.State.WITHDRAWN)
        .values_list("summary_id", "rater_id")
    )
    moved = kept = 0
    for assignment in mine:
        candidates = [u for u in members if (assignment.summary_id, u.pk) not in has]
        if not candidates:
            kept += 1
            continue
        target = min(candidates, key=lambda u: (load.get(u.pk, 0), u.get_username()))
        move_assignment(assignment=assignment, to_rater=target)
        load[target.pk] = load.get(target.pk, 0) + 1
        has.add((assignment.summary_id, target.pk))
        moved += 1
    return Reassignment(moved=moved, kept=kept)


# --- exclude -----------------------------------------------------------------------------------


@transaction.atomic
def exclude_rater(*, batch: Batch, rater, excluded_by, reason: str) -> RaterExclusion:
    """Leave the rater's answers in the batch out of the analysis (the report and the
    export's answer tables), recording who, when and why. The answers stay stored."""
    reason = _clean_text(reason, "reason", limit=MAX_REASON_CHARS, required=True)
    if not Assignment.objects.filter(batch=batch, rater=rater).exists():
        raise _invalid("rater", "has no items in this batch")
    try:
        with transaction.atomic():
            return RaterExclusion.objects.create(batch=batch, rater=rater, excluded_by=excluded_by, reason=reason)
    except IntegrityError:
        raise ApplicationError(f"{rater.get_username()}'s answers in this batch are already excluded.") from None


# --- questions to the admin ------------------------------------------------------------------


@transaction.atomic
def raise_flag(*, assignment: Assignment, rater, kind, note) -> ItemFlag:
    """A rater's question about an item they were given."""
    if assignment.rater_id != rater.pk:
        raise ApplicationError("This item is not yours.")
    if kind not in ItemFlag.Kind.values:
        raise _invalid("kind", f"must be one of {', '.join(ItemFlag.Kind.values)}")
    if isinstance(note, str) and not note.strip():
        # The one refusal of the flag form a rater meets by hand: in the page's language.
        empty = gettext("Your note is empty: write your question for the study admin.")
        raise ApplicationError(empty, extra={"fields": {"note": empty}})
    note = _clean_text(note, "note", limit=MAX_NOTE_CHARS, required=True)
    return ItemFlag.objects.create(study=assignment.study, assignment=assignment, raised_by=rater, kind=kind, note=note)


@transaction.atomic
def answer_flag(*, flag: ItemFlag, answered_by, answer, shared: bool = False) -> ItemFlag:
    """The admin's answer to a flag (a later answer replaces an earlier one: the inbox
    shows the newest); `shared` shows it to every rater of the study as a guideline note."""
    answer = _clean_text(answer, "answer", limit=MAX_NOTE_CHARS, required=True)
    updated = ItemFlag.objects.filter(pk=flag.pk).update(
        answer=answer,
        answered_by=answered_by,
        answered_at=timezone.now(),
        shared=bool(shared),
        updated_at=timezone.now(),
    )
    if not updated:
        raise ApplicationError("No such flag.")
    flag.refresh_from_db()
    return flag
