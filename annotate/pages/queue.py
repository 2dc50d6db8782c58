"""The rater's queue: their items, study by study, with where Continue leads, the time
left and their standing at a study's qualification."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy, ngettext

from annotate.models import Assignment, Batch
from annotate.selectors.queue import QueueProgress, assignments_for_rater, median_active_seconds, queue_progress
from annotate.services import qualification, ratings

# The queue's short names of a batch's kind (the admin's choices say more).
PHASE_LABELS = {
    Batch.Kind.CALIBRATION: gettext_lazy("Calibration"),
    Batch.Kind.MAIN: gettext_lazy("Main"),
    Batch.Kind.ADJUDICATION: gettext_lazy("Adjudication"),
    Batch.Kind.QUALIFICATION: gettext_lazy("Qualification"),
}


def time_left_text(seconds: float | None) -> str:
    """An estimate of the time left, rounded as a person would say it."""
    if seconds is None:
        return ""
    if seconds < 60:
        return _("under a minute")
    minutes = round(seconds / 60)
    if minutes < 90:
        return ngettext("about %(minutes)s minute", "about %(minutes)s minutes", minutes) % {"minutes": minutes}
    return _("about %(hours).1f hours") % {"hours": seconds / 3600}


@dataclass(frozen=True)
class StudyWay:
    """What the queue shows of one study beside its items: the rater's progress (`p`),
    the items left, the time left (the study's median active time per item times the
    items left) and the rater's standing at the qualification (None without a pass rule)."""

    p: QueueProgress
    left: int
    time_left: str
    gate: Any  # annotate.services.qualification.Status


@dataclass(frozen=True)
class QueuePage:
    # The rater's items in queue order, each with `phase_label`: its batch's kind in short.
    assignments: list[Assignment]
    studies: list[StudyWay]
    paused_message: str


def _study_way(user, p: QueueProgress) -> StudyWay:
    left = p.total - p.done
    median = median_active_seconds(p.study) if left else None
    return StudyWay(
        p=p,
        left=left,
        time_left=time_left_text(median * left) if median is not None else "",
        gate=qualification.qualification_status(study=p.study, rater=user) if p.gated else None,
    )


def queue_page(user) -> QueuePage:
    """The rater's own queue (annotate.selectors.queue: never anyone else's items)."""
    assignments = list(assignments_for_rater(user))
    for a in assignments:
        a.phase_label = PHASE_LABELS.get(a.batch.kind, "") if a.batch_id else ""
    return QueuePage(
        assignments=assignments,
        studies=[_study_way(user, p) for p in queue_progress(user)],
        paused_message=_(ratings.PAUSED_MESSAGE),
    )
