"""The rater's side: their queue, their assignments and the revisions of their
answers. A rater only ever reaches their own rows through these functions."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

from django.db.models import Count, Exists, OuterRef, Prefetch, Q, QuerySet
from django.http import Http404

from annotate.models import (
    Assignment,
    Batch,
    Comparison,
    ComparisonMember,
    ExpectedAnswer,
    Finding,
    QualificationAttempt,
    QualificationRule,
    RaterPause,
    Rating,
    Revision,
    Span,
    Study,
)
from annotate.rubrics import per_claim_parts
from annotate.selectors.onboarding import OnboardingRequired, needs_onboarding


def visible_to_rater(user) -> Q:
    """The qualification gate (annotate/services/qualification.py), as a filter on a rater's
    assignments: in a study with a pass rule, a rater who has not passed sees only the
    items of its qualification batches and of training batches. Subqueries, not a query
    per study, so the pages and the API that list or open items cost no extra query."""
    gated = Exists(QualificationRule.objects.filter(study=OuterRef("study_id")))
    passed = Exists(QualificationAttempt.objects.filter(study=OuterRef("study_id"), rater=user, passed=True))
    return Q(batch__kind=Batch.Kind.QUALIFICATION) | Q(batch__training=True) | ~gated | passed


def assignments_for_rater(user) -> QuerySet[Assignment]:
    """The rater's own assignments, in queue order. Never anyone else's; withdrawn
    ones leave the queue, and so do items behind the qualification gate."""
    return (
        Assignment.objects.filter(rater=user)
        .filter(visible_to_rater(user))
        .exclude(state=Assignment.State.WITHDRAWN)
        .select_related("study", "summary", "batch")
        .order_by("study__title", "position")
    )


def get_assignment_for_rater(user, assignment_uuid) -> Assignment:
    """The rater's own assignment with its study, rubric, summary, source and findings, else
    404; OnboardingRequired (403) while the rater has not finished the study's onboarding
    (annotate.selectors.onboarding), for every item page and item API call alike.

    Another rater's assignment is a 404, not a 403, so its existence does not leak. The
    source's sentences are not fetched here: a source at the size limit has thousands,
    and a draft save (the most frequent request) needs none; the pages that show them
    read them themselves.
    """
    findings = Prefetch("summary__source__findings", queryset=Finding.objects.order_by("index"))
    # Whether the study admin paused this rater (docs/monitoring.md) and whether an
    # onboarding step is pending, in the same query.
    paused = RaterPause.objects.filter(study=OuterRef("study_id"), rater=user, resumed_at=None)
    try:
        assignment = (
            Assignment.objects.select_related("study__rubric", "summary__source", "batch")
            .annotate(rater_paused=Exists(paused), needs_onboarding=needs_onboarding(user, "study_id"))
            .prefetch_related(findings)
            .filter(visible_to_rater(user))
            .get(uuid=assignment_uuid, rater=user)
        )
    except (Assignment.DoesNotExist, ValueError, TypeError):
        raise Http404("No such assignment.") from None
    if assignment.needs_onboarding:
        raise OnboardingRequired(assignment.study)
    return assignment


@dataclass(frozen=True)
class QueueProgress:
    study: Study
    total: int
    submitted: int
    skipped: int
    gated: bool = False  # the study has a qualification pass rule
    paused: bool = False  # a study admin paused this rater in the study (docs/monitoring.md)

    @property
    def done(self) -> int:
        return self.submitted + self.skipped

    @property
    def percent(self) -> int:
        return round(100 * self.done / self.total) if self.total else 0


def queue_progress(user) -> list[QueueProgress]:
    """Per study: how many of the rater's assignments are submitted or skipped, whether
    the study gates raters on a qualification and whether the rater is paused there."""
    rows = (
        Assignment.objects.filter(rater=user)
        .filter(visible_to_rater(user))
        .exclude(state=Assignment.State.WITHDRAWN)
        .values("study")
        .annotate(
            total=Count("id"),
            submitted=Count("id", filter=Q(state=Assignment.State.SUBMITTED)),
            skipped=Count("id", filter=Q(state=Assignment.State.SKIPPED)),
        )
    )
    studies = Study.objects.annotate(
        gated=Exists(QualificationRule.objects.filter(study=OuterRef("pk"))),
        paused=Exists(RaterPause.objects.filter(study=OuterRef("pk"), rater=user, resumed_at=None)),
    ).in_bulk([row["study"] for row in rows])
    return sorted(
        (
            QueueProgress(
                studies[r["study"]],
                r["total"],
                r["submitted"],
                r["skipped"],
                studies[r["study"]].gated,
                studies[r["study"]].paused,
            )
            for r in rows
        ),
        key=lambda p: p.study.title,
    )


def next_assignment_for_rater(user, *, after: Assignment) -> Assignment | None:
    """The next unfinished assignment in the same study's queue, wrapping around."""
    open_states = [Assignment.State.PENDING, Assignment.State.IN_PROGRESS]
    queue = (
        Assignment.objects.filter(rater=user, study_id=after.study_id, state__in=open_states)
        .filter(visible_to_rater(user))
        .exclude(pk=after.pk)
    )
    return queue.filter(position__gt=after.position).order_by("position").first() or queue.order_by("position").first()


def next_open_assignment(user, *, study: Study) -> Assignment | None:
    """The first unfinished item of the rater's queue for the study (the Continue button)."""
    open_states = [Assignment.State.PENDING, Assignment.State.IN_PROGRESS]
    return (
        Assignment.objects.filter(rater=user, study=study, state__in=open_states)
        .filter(visible_to_rater(user))
        .order_by("position", "pk")
        .first()
    )


def get_study_for_rater(user, slug: str) -> Study:
    """A study the user has items in (any state), else 404: a rater's own pages about a
    study (continue, done) reach only the studies they rate."""
    study = Study.objects.filter(slug=slug, assignments__rater=user).first() if user.is_authenticated else None
    if study is None:
        raise Http404("No such study.")
    return study


def _median(times: list[float]) -> float:
    middle = len(times) // 2
    return float(times[middle]) if len(times) % 2 else (times[middle - 1] + times[middle]) / 2


def median_active_seconds(study: Study, *, fast_fraction: float = 0.25) -> float | None:
    """The study's median active time per submitted item, over every rater, from
    believable times only, else None. The time-left estimate multiplies it by the items a
    rater has left, so an item the quality monitor calls too fast (docs/monitoring.md: no
    time at all, under the study's floor, or under `fast_fraction` of the median of all
    recorded times) must not make a promise of "under a minute"."""
    times = sorted(
        Assignment.objects.filter(study=study, state=Assignment.State.SUBMITTED, active_seconds__gt=0).values_list(
            "active_seconds", flat=True
        )
    )
    if not times:
        return None
    limit = max(fast_fraction * _median(times), study.min_seconds_per_item)
    believable = [t for t in times if t >= limit]
    return _median(believable) if believable else None


@dataclass(frozen=True)
class QueuePlace:
    """Where an item sits in the rater's queue for its study: "Item k of N"."""

    number: int
    total: int
    previous: Any  # uuid of the item before, or None
    next: Any  # uuid of the item after, or None


def queue_place(user, *, assignment: Assignment) -> QueuePlace:
    """The item's place among the rater's (not withdrawn) items of its study, in queue
    order, with its neighbours: one query over uuids, whatever state they are in."""
    uuids = list(
        Assignment.objects.filter(rater=user, study_id=assignment.study_id)
        .filter(visible_to_rater(user))
        .exclude(state=Assignment.State.WITHDRAWN)
        .order_by("position", "pk")
        .values_list("uuid", flat=True)
    )
    if assignment.uuid not in uuids:  # a withdrawn item shown read-only
        return QueuePlace(number=0, total=len(uuids), previous=None, next=None)
    index = uuids.index(assignment.uuid)
    return QueuePlace(
        number=index + 1,
        total=len(uuids),
        previous=uuids[index - 1] if index > 0 else None,
        next=uuids[index + 1] if index + 1 < len(uuids) else None,
    )


def revisions_with_answers() -> QuerySet[Revision]:
    return Revision.objects.select_related("rubric").prefetch_related(
        Prefetch("ratings", queryset=Rating.objects.select_related("rationale", "finding").order_by("question")),
        Prefetch("spans", queryset=Span.objects.order_by("question", "index")),
    )


def latest_revision(assignment: Assignment) -> Revision | None:
    """The newest revision, draft or submitted, with its ratings and rationales."""
    return revisions_with_answers().filter(assignment=assignment).order_by("-number").first()


def latest_revision_phase(assignment: Assignment) -> str | None:
    """The phase of the newest revision (initial or post_discussion), one small query."""
    return assignment.revisions.order_by("-number").values_list("phase", flat=True).first()


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
        if isinstance(rating.value, dict) and "preferred" not in rating.value:
            # A per-claim answer (annotate.selectors.claims); a preference is the other
            # object-valued answer, read as it is stored.
            answers[rating.question], rationales[rating.question] = per_claim_parts(rating.value)
            continue
        answers[rating.question] = rating.answer
        if rationale is not None:
            rationales[rating.question] = rationale.text
    for span in revision.spans.all():
        answers.setdefault(span.question, []).append(span.as_answer())
    return answers, rationales


def training_feedback(assignment: Assignment) -> ExpectedAnswer | None:
    """The expected answers to show after submitting: a qualification batch's items,
    and in a training batch only a training item's. Gold items and attention checks given in a training batch
    keep their answers hidden, since raters are scored on them. A summary has one
    ExpectedAnswer per study (constraint expected_answer_unique_study_summary) and its
    purpose cannot change once it is in a batch (record_expected_answer), so a training
    item is never a gold item or attention check of a scored batch as well."""
    if assignment.batch_id is None:
        return None
    if assignment.batch.kind == Batch.Kind.QUALIFICATION:
        # A qualification item's answer is scored when submitted (and cannot be changed
        # afterwards), so its gold answer is shown straight after, as Potato does.
        return ExpectedAnswer.objects.filter(study=assignment.study_id, summary=assignment.summary_id).first()
    if not assignment.batch.training:
        return None
    return ExpectedAnswer.objects.filter(
        study=assignment.study_id, summary=assignment.summary_id, purpose=ExpectedAnswer.Purpose.TRAINING
    ).first()


def shared_note_rows(assignment: Assignment) -> list[dict]:
    """The discussion notes a study admin shared with the raters of this item (its batch
    and summary), oldest first, as the rater sees them: the question it is about and the
    text, never the author."""
    if assignment.batch_id is None:
        return []
    from annotate.models import DiscussionNote

    notes = DiscussionNote.objects.filter(
        batch_id=assignment.batch_id, summary_id=assignment.summary_id, shared=True
    ).order_by("created_at", "pk")
    return [{"question": question, "text": text} for question, text in notes.values_list("question", "text")]


class ShownSummary(NamedTuple):
    """One summary of a comparison as a rater is shown it: its side's letter, uuid and
    text. Nothing else of it (never its generator) reaches the page."""

    label: str
    uuid: str
    text: str


def shown_summaries(assignment: Assignment) -> list[ShownSummary] | None:
    """A comparison item's summaries in the order this rater is shown them (A on the
    left), else None for a summary rated alone. An assignment made without an order
    (outside a batch) shows the comparison's own order. A summary rated alone costs no
    query (its generator, already loaded, says it is no comparison item)."""
    if assignment.summary.generator != Comparison.ITEM_GENERATOR:
        return None
    rows = list(
        ComparisonMember.objects.filter(comparison__item_id=assignment.summary_id)
        .order_by("index")
        .values_list("summary__uuid", "summary__text")
    )
    if not rows:
        return None
    texts = {str(u): t for u, t in rows}
    order = [u for u in assignment.shown_order if u in texts] or list(texts)
    order += [u for u in texts if u not in order]
    return [ShownSummary(chr(ord("A") + i), u, texts[u]) for i, u in enumerate(order)]
