"""A batch's page for study admins and viewers: progress, the items still missing
ratings, gold accuracy and, for admins, every assignment with its actions; and an answer
as text for the admin pages (`display_answer`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

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
    # Per item missing ratings: the summary, submitted and planned ratings, and who
    # skipped it and why ("0 of 2 submitted" alone would hide a skip).
    missing: list[dict[str, Any]]
    quality: list[RaterAccuracy]
    is_admin: bool
    assignments: list[Assignment]  # admins only; viewers see none
    questions: list  # the rubric's comparable questions (the disagreements' choices)
    adaptive: AdaptiveState | None = None  # an adaptive side-by-side batch: where the rule stands


def batch_page(user, study: Study, batch: Batch) -> BatchPage:
    """The page of a batch of `study`, which the view got through
    annotate.selectors.access.get_study_for_viewer (a viewer or an admin)."""
    is_admin = is_study_admin(user, study)
    progress = batch_progress(batch)
    missing = [
        {"summary": summary, "done": done, "planned": planned, "skips": progress.skips.get(summary.pk, [])}
        for summary, done, planned in progress.items_missing
    ]
    assignments = batch_assignments(batch).order_by("summary__key", "rater__username") if is_admin else []
    return BatchPage(
        study=study,
        batch=batch,
        progress=progress,
        missing=missing,
        quality=quality_report(batch),
        is_admin=is_admin,
        assignments=list(assignments),
        questions=[q for q in rubric_definition(study.rubric).questions if q.comparable],
        adaptive=adaptive_state(batch) if batch.design.get("name") == DESIGN else None,
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
