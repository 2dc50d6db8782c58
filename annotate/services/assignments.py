"""Assignments one at a time or outside batches: topping up summaries with raters
(`manage.py assign`), withdrawing an item from a queue, moving it to another rater."""

from __future__ import annotations

from collections.abc import Sequence

from django.db import IntegrityError, transaction
from django.db.models import F, Max
from django.utils import timezone

from annotate.designs import shuffled_order, top_up_assignments
from annotate.models import Assignment, RaterPause, Study, StudyMembership, Summary
from annotate.services.members import add_study_member
from core.exceptions import ApplicationError, InvalidStateError


@transaction.atomic
def assign_summaries(
    *,
    study: Study,
    raters: Sequence,
    per_item: int,
    seed: int,
    summaries: Sequence[Summary] | None = None,
) -> list[Assignment]:
    """Give each summary `per_item` raters (counting existing assignments), with
    balanced workloads, and append the new ones to each rater's queue in that rater's
    own seeded random order. Running it again with the same inputs adds nothing."""
    if summaries is None:
        summaries = list(study.summaries.order_by("key"))
    if any(s.study_id != study.pk for s in summaries):
        raise ApplicationError("Every summary must belong to the study.")
    rater_ids = [r.pk for r in raters]
    existing: dict[int, set[int]] = {s.pk: set() for s in summaries}
    for summary_id, rater_id in Assignment.objects.filter(summary__in=summaries).values_list("summary", "rater"):
        existing[summary_id].add(rater_id)
    try:
        pairs = top_up_assignments(
            items=[s.pk for s in summaries], raters=rater_ids, per_item=per_item, existing=existing, seed=seed
        )
    except ValueError as exc:
        raise ApplicationError(str(exc)) from None

    created: list[Assignment] = []
    by_rater: dict[int, list[int]] = {}
    for summary_id, rater_id in pairs:
        by_rater.setdefault(rater_id, []).append(summary_id)
    users = {u.pk: u for u in raters}
    for rater_id, summary_ids in by_rater.items():
        membership = add_study_member(study=study, user=users[rater_id], role=StudyMembership.Role.RATER)
        last = Assignment.objects.filter(study=study, rater_id=rater_id).aggregate(m=Max("position"))["m"]
        start = 0 if last is None else last + 1
        order = shuffled_order(summary_ids, seed=f"{membership.order_seed}:{start}")
        created += Assignment.objects.bulk_create(
            Assignment(study=study, summary_id=sid, rater_id=rater_id, position=start + i)
            for i, sid in enumerate(order)
        )
    return created


@transaction.atomic
def withdraw_assignment(*, assignment: Assignment) -> Assignment:
    """Take an item off a rater's queue. Whatever they answered stays stored."""
    updated = (
        Assignment.objects.filter(pk=assignment.pk)
        .exclude(state=Assignment.State.WITHDRAWN)
        .update(
            state=Assignment.State.WITHDRAWN,
            withdrawn_at=timezone.now(),
            version=F("version") + 1,
            updated_at=timezone.now(),
        )
    )
    if not updated:
        raise InvalidStateError("This assignment is already withdrawn.")
    assignment.refresh_from_db()
    return assignment


@transaction.atomic
def move_assignment(*, assignment: Assignment, to_rater) -> Assignment:
    """Give the item to another rater: a new assignment for them, and the old one
    withdrawn (its answers and history kept) and pointing at the new one."""
    if assignment.rater_id == to_rater.pk:
        raise ApplicationError("The item is already with this rater.")
    if assignment.state == Assignment.State.WITHDRAWN:
        raise InvalidStateError("A withdrawn assignment cannot be moved.")
    if RaterPause.objects.filter(study=assignment.study_id, rater=to_rater, resumed_at=None).exists():
        raise ApplicationError(f"{to_rater.get_username()} is paused in this study: paused raters get no new items.")
    if (
        Assignment.objects.filter(summary=assignment.summary, rater=to_rater)
        .exclude(state=Assignment.State.WITHDRAWN)
        .exists()
    ):
        raise ApplicationError(f"{to_rater.get_username()} already has this summary (in this or another batch).")
    add_study_member(study=assignment.study, user=to_rater, role=StudyMembership.Role.RATER)
    last = Assignment.objects.filter(study=assignment.study, rater=to_rater).aggregate(m=Max("position"))["m"]
    withdraw_assignment(assignment=assignment)
    try:
        with transaction.atomic():
            new = Assignment.objects.create(
                study=assignment.study,
                batch=assignment.batch,
                summary=assignment.summary,
                rater=to_rater,
                position=0 if last is None else last + 1,
                shown_order=assignment.shown_order,
            )
    except IntegrityError:
        raise ApplicationError(f"{to_rater.get_username()} already has this item in this batch.") from None
    Assignment.objects.filter(pk=assignment.pk).update(moved_to=new)
    assignment.refresh_from_db()
    return new
