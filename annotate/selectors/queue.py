"""The rater's side: their queue, their assignments and the revisions of their
answers. A rater only ever reaches their own rows through these functions."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db.models import Count, Prefetch, Q, QuerySet
from django.http import Http404

from annotate.models import (
    Assignment,
    ExpectedAnswer,
    Finding,
    Rating,
    Revision,
    SourceSentence,
    Span,
    Study,
)


def assignments_for_rater(user) -> QuerySet[Assignment]:
    """The rater's own assignments, in queue order. Never anyone else's; withdrawn
    ones leave the queue."""
    return (
        Assignment.objects.filter(rater=user)
        .exclude(state=Assignment.State.WITHDRAWN)
        .select_related("study", "summary")
        .order_by("study__title", "position")
    )


def get_assignment_for_rater(user, assignment_uuid) -> Assignment:
    """The rater's own assignment with everything the rating page needs, else 404.

    Another rater's assignment is a 404, not a 403, so its existence does not leak.
    """
    sentences = Prefetch("summary__source__sentences", queryset=SourceSentence.objects.order_by("index"))
    findings = Prefetch("summary__source__findings", queryset=Finding.objects.order_by("index"))
    try:
        return (
            Assignment.objects.select_related("study__rubric", "summary__source")
            .prefetch_related(sentences, findings)
            .get(uuid=assignment_uuid, rater=user)
        )
    except (Assignment.DoesNotExist, ValueError, TypeError):
        raise Http404("No such assignment.") from None


@dataclass(frozen=True)
class QueueProgress:
    study: Study
    total: int
    submitted: int
    skipped: int

    @property
    def done(self) -> int:
        return self.submitted + self.skipped

    @property
    def percent(self) -> int:
        return round(100 * self.done / self.total) if self.total else 0


def queue_progress(user) -> list[QueueProgress]:
    """Per study: how many of the rater's assignments are submitted or skipped."""
    rows = (
        Assignment.objects.filter(rater=user)
        .exclude(state=Assignment.State.WITHDRAWN)
        .values("study")
        .annotate(
            total=Count("id"),
            submitted=Count("id", filter=Q(state=Assignment.State.SUBMITTED)),
            skipped=Count("id", filter=Q(state=Assignment.State.SKIPPED)),
        )
    )
    studies = Study.objects.in_bulk([row["study"] for row in rows])
    return sorted(
        (QueueProgress(studies[r["study"]], r["total"], r["submitted"], r["skipped"]) for r in rows),
        key=lambda p: p.study.title,
    )


def next_assignment_for_rater(user, *, after: Assignment) -> Assignment | None:
    """The next unfinished assignment in the same study's queue, wrapping around."""
    open_states = [Assignment.State.PENDING, Assignment.State.IN_PROGRESS]
    queue = Assignment.objects.filter(rater=user, study_id=after.study_id, state__in=open_states).exclude(pk=after.pk)
    return queue.filter(position__gt=after.position).order_by("position").first() or queue.order_by("position").first()


def revisions_with_answers() -> QuerySet[Revision]:
    return Revision.objects.select_related("rubric").prefetch_related(
        Prefetch("ratings", queryset=Rating.objects.select_related("rationale", "finding").order_by("question")),
        Prefetch("spans", queryset=Span.objects.order_by("question", "index")),
    )


def latest_revision(assignment: Assignment) -> Revision | None:
    """The newest revision, draft or submitted, with its ratings and rationales."""
    return revisions_with_answers().filter(assignment=assignment).order_by("-number").first()


def revision_answers(revision: Revision | None) -> tuple[dict[str, Any], dict[str, str]]:
    """(answers, rationales) of a revision, as the rubric's validate() takes them."""
    if revision is None:
        return {}, {}
    answers: dict[str, Any] = {}
    rationales: dict[str, Any] = {}
    for rating in revision.ratings.all():
        rationale = getattr(rating, "rationale", None)
        if rating.finding_id is not None:
            finding = str(rating.finding.uuid)
            answers.setdefault(rating.question, {})[finding] = rating.answer
            if rationale is not None:
                rationales.setdefault(rating.question, {})[finding] = rationale.text
            continue
        answers[rating.question] = rating.answer
        if rationale is not None:
            rationales[rating.question] = rationale.text
    for span in revision.spans.all():
        answers.setdefault(span.question, []).append(span.as_answer())
    return answers, rationales


def training_feedback(assignment: Assignment) -> ExpectedAnswer | None:
    """The expected answers to show after submitting: in a training batch only, and
    only a training item's. Gold items and attention checks given in a training batch
    keep their answers hidden, since raters are scored on them. A summary has one
    ExpectedAnswer per study (constraint expected_answer_unique_study_summary) and its
    purpose cannot change once it is in a batch (record_expected_answer), so a training
    item is never a gold item or attention check of a scored batch as well."""
    if assignment.batch_id is None or not assignment.batch.training:
        return None
    return ExpectedAnswer.objects.filter(
        study=assignment.study_id, summary=assignment.summary_id, purpose=ExpectedAnswer.Purpose.TRAINING
    ).first()
