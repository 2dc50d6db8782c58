"""A batch's page for study admins and viewers: progress, the items still missing
ratings, gold accuracy and, for admins, every assignment with its actions; and an answer
as text for the admin pages (`display_answer`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.core.paginator import Page, Paginator

from annotate.models import Assignment, Batch, Study
from annotate.selectors.access import is_study_admin
from annotate.selectors.adaptive import DESIGN, AdaptiveState, adaptive_state
from annotate.selectors.batches import (
    BatchProgress,
    RaterAccuracy,
    batch_assignments,
    batch_progress,
    quality_report,
)
from annotate.selectors.contents import rubric_definition


@dataclass(frozen=True)
class BatchPage:
    study: Study
    batch: Batch
    progress: BatchProgress
    # Per item missing ratings, the first ASSIGNMENTS_PER_PAGE (fewest submitted first): the
    # summary, submitted and planned ratings, and who skipped it and why ("0 of 2 submitted"
    # alone would hide a skip).
    missing: list[dict[str, Any]]
    quality: list[RaterAccuracy]
    is_admin: bool
    assignments: list[Assignment]  # admins only, a page of ASSIGNMENTS_PER_PAGE; viewers see none
    questions: list  # the rubric's comparable questions (the disagreements' choices)
    adaptive: AdaptiveState | None = None  # an adaptive side-by-side batch: where the rule stands
    assignments_page: Page | None = None  # the page of assignments shown (admins), for its links


# A batch of thousands of items lists its assignments a page at a time.
ASSIGNMENTS_PER_PAGE = 100


def batch_page(user, study: Study, batch: Batch, *, page_number: str | int | None = None) -> BatchPage:
    """The page of a batch of `study`, which the view got through
    annotate.selectors.access.get_study_for_viewer (a viewer or an admin); its
    assignments on page `page_number` (the last for a number past it, the first for junk)."""
    is_admin = is_study_admin(user, study)
    progress = batch_progress(batch)
    missing = [
        {"summary": summary, "done": done, "planned": planned, "skips": progress.skips.get(summary.pk, [])}
        for summary, done, planned in progress.items_missing[:ASSIGNMENTS_PER_PAGE]
    ]
    assignments_page = None
    if is_admin:
        ordered = batch_assignments(batch).defer("summary__text").order_by("summary__key", "rater__username")
        assignments_page = Paginator(ordered, ASSIGNMENTS_PER_PAGE).get_page(page_number)
    return BatchPage(
        study=study,
        batch=batch,
        progress=progress,
        missing=missing,
        quality=quality_report(batch),
        is_admin=is_admin,
        assignments=list(assignments_page) if assignments_page is not None else [],
        questions=[q for q in rubric_definition(study.rubric).questions if q.comparable],
        adaptive=adaptive_state(batch) if batch.design.get("name") == DESIGN else None,
        assignments_page=assignments_page,
    )


def display_answer(value) -> str:
    """An answer as text for the admin pages (lists joined, spans quoted)."""
    if value is None or value == [] or value == {}:
        return "–"
    if isinstance(value, list):
        return "; ".join(
            f"“{v.get('text', '')}”" + (f" ({', '.join(map(str, v['answers'].values()))})" if v.get("answers") else "")
            if isinstance(v, dict)
            else str(v)
            for v in value
        )
    if isinstance(value, dict):
        # Per-finding scores, or a per-claim answer as stored ({claim: {"answer", "rationale"}}).
        return "; ".join(f"{k}: {v.get('answer', '–') if isinstance(v, dict) else v}" for k, v in value.items())
    return str(value)
