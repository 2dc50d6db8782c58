"""Everything the rating page and the comparison page read of one item, in one call: the
rater's own assignment and its place in their queue, their latest answers, a comparison's
summaries, the rubric, the claims asked, and the flags shown on the item.

The page model (annotate/pages/rating.py) calls `item_reads` once and builds the page from
what it returns; every query of the page is made here."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from annotate.models import Assignment, Claim, ItemFlag, Revision
from annotate.rubrics import RubricDefinition
from annotate.selectors.claims import ClaimUnit, claims_asked
from annotate.selectors.contents import claims_for_summary, rubric_definition
from annotate.selectors.monitor import item_flags
from annotate.selectors.queue import (
    QueuePlace,
    ShownSummary,
    get_assignment_for_rater,
    latest_revision,
    latest_revision_phase,
    queue_place,
    revision_answers,
    shared_note_rows,
    shown_summaries,
)


@dataclass(frozen=True)
class ItemReads:
    """One item as its rater opens it. `answers`, `rationales` and `phase` are those of the
    latest revision; with `stored_answers=False` (a refused post, shown with what the rater
    sent) the answers are empty and only the phase is read."""

    assignment: Assignment
    place: QueuePlace
    answers: dict[str, Any]
    rationales: dict[str, Any]
    phase: str | None
    compared: list[ShownSummary] | None  # a comparison's summaries, in this rater's order
    notes: list[dict]  # the discussion notes shared with the item's raters: question, text
    definition: RubricDefinition  # as stored; the page translates it
    recorded_claims: list[Claim]  # assisted condition only: the pipeline's verdict per claim
    claims: list[ClaimUnit]  # the claims a per-claim question asks about
    own_flags: list[ItemFlag]
    shared_flags: list[ItemFlag]


def item_reads(user, assignment_uuid, *, stored_answers: bool = True) -> ItemReads:
    """The rater's own item (else 404) with all its page shows: the queue's reads (the
    answers last: they read the stored form of per-claim answers and spans), then the
    rubric's and the claims', then the flags."""
    assignment = get_assignment_for_rater(user, assignment_uuid)
    place = queue_place(user, assignment=assignment)
    if stored_answers:
        revision = latest_revision(assignment)
        phase = revision.phase if revision is not None else None
    else:  # a refused post is shown with what was sent: only the phase is read
        revision, phase = None, latest_revision_phase(assignment)
    compared = shown_summaries(assignment)
    # The notes are shown in a re-rating round after a discussion (docs/batches.md).
    notes = shared_note_rows(assignment) if phase == Revision.Phase.POST_DISCUSSION else []
    answers, rationales = revision_answers(revision)
    summary = assignment.summary
    definition = rubric_definition(assignment.study.rubric)
    recorded = list(claims_for_summary(summary)) if assignment.study.assisted else []
    claims = claims_asked(definition, summary)
    own, shared = item_flags(assignment)
    return ItemReads(
        assignment=assignment,
        place=place,
        answers=answers,
        rationales=rationales,
        phase=phase,
        compared=compared,
        notes=notes,
        definition=definition,
        recorded_claims=recorded,
        claims=claims,
        own_flags=own,
        shared_flags=shared,
    )
