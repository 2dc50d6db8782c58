"""The answer that counts. One rule, written once: per assignment and phase the
newest submitted revision; of a rater's several assignments to one summary, the newest
submitted (newest_rater_answers). The analysis frames, the admin pages and the dataset
export all read answers through it."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from datetime import datetime
from typing import NamedTuple, TypeVar

from django.db.models import Exists, OuterRef, QuerySet

from annotate.models import Assignment, Batch, RaterExclusion, Revision, Study

T = TypeVar("T")


def submitted_revisions(*, study: Study, phase: str = "all", include_calibration: bool = False) -> QuerySet[Revision]:
    """The study's submitted revisions a count chooses from, in the order the rule reads
    them: by assignment and phase, newest first. Calibration (pilot) and qualification
    batches are left out unless asked for (include_calibration); `phase` is "initial",
    "post_discussion" or "all". A rater's answers in a batch the admin excluded them from
    (RaterExclusion, docs/monitoring.md) are always left out: the report and the export's
    answer tables never count them."""
    excluded = RaterExclusion.objects.filter(
        batch_id=OuterRef("assignment__batch_id"), rater_id=OuterRef("assignment__rater_id")
    )
    revisions = Revision.objects.filter(assignment__study=study, status=Revision.Status.SUBMITTED).exclude(
        Exists(excluded)
    )
    if not include_calibration:
        revisions = revisions.exclude(assignment__batch__kind__in=Batch.OUTSIDE_ANALYSIS)
    if phase != "all":
        revisions = revisions.filter(phase=phase)
    return revisions.order_by("assignment_id", "phase", "-number")


def counting_only(rows: Iterable[T], *, key: Callable[[T], tuple]) -> Iterator[T]:
    """The rows that count, from rows in submitted_revisions' order: the first (newest)
    of each (assignment, phase). `key(row)` gives a row's (assignment id, phase). Works
    on model instances and on raw value rows alike, streamed."""
    last = None
    for row in rows:
        slot = key(row)
        if slot != last:
            last = slot
            yield row


def latest_submitted_revisions(
    *, study: Study, phase: str = "all", include_calibration: bool = False
) -> list[Revision]:
    """Per assignment (and phase), the newest submitted revision: the answer that counts.
    Calibration (pilot) batches are left out unless asked for."""
    revisions = submitted_revisions(study=study, phase=phase, include_calibration=include_calibration)
    # One Rubric instance per rubric, not one per revision: a rubric carries its whole definition.
    return list(counting_only(revisions.prefetch_related("rubric"), key=lambda r: (r.assignment_id, r.phase)))


class AnswerCandidate(NamedTuple):
    """One assignment's newest submitted revision in one phase, as the rule below needs it."""

    revision_id: int
    summary_id: int
    rater_id: int
    phase: str
    submitted_at: datetime
    batch_name: str  # "" without a batch
    assignment_uuid: str


def newest_rater_answers(candidates: Iterable[AnswerCandidate]) -> set[int]:
    """The revisions whose answers are a rater's answers to a summary, one per (summary,
    rater, phase): where a rater answered the same summary in several assignments (in
    two batches, say), the newest submitted counts. An exact tie in time goes to the
    batch whose name sorts last, then to the assignment whose uuid sorts last: never to
    database ids or row order, so the choice is the same on every database and in a
    re-imported copy.

    The one rule for a rater's answer to an item: the analysis frames (ratings_frame,
    spans_frame) and the dataset card's agreement figures both use it."""
    best: dict[tuple[int, int, str], tuple[tuple, int]] = {}
    for c in candidates:
        slot = (c.summary_id, c.rater_id, c.phase)
        rank = (c.submitted_at, c.batch_name, c.assignment_uuid)
        if slot not in best or rank > best[slot][0]:
            best[slot] = (rank, c.revision_id)
    return {revision_id for _, revision_id in best.values()}


def rater_answer_revisions(*, study: Study, phase: str = "all", include_calibration: bool = False) -> list[Revision]:
    """latest_submitted_revisions, keeping per (summary, rater, phase) only the revision
    newest_rater_answers chooses: what analysis counts as one rater's answers."""
    revisions = latest_submitted_revisions(study=study, phase=phase, include_calibration=include_calibration)
    assignments = {
        pk: (summary_id, rater_id, batch_name or "", str(uuid))
        for pk, summary_id, rater_id, batch_name, uuid in Assignment.objects.filter(
            pk__in={r.assignment_id for r in revisions}
        ).values_list("pk", "summary_id", "rater_id", "batch__name", "uuid")
    }

    def candidates() -> Iterator[AnswerCandidate]:
        for r in revisions:
            summary_id, rater_id, batch_name, assignment_uuid = assignments[r.assignment_id]
            yield AnswerCandidate(r.pk, summary_id, rater_id, r.phase, r.submitted_at, batch_name, assignment_uuid)

    chosen = newest_rater_answers(candidates())
    return [r for r in revisions if r.pk in chosen]
