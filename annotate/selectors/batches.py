"""Batch administration (study admins and viewers only): batches, their
assignments, progress, the answers that count per batch and the state they are in,
gold-item accuracy, consensus and discussion notes (disagreements:
annotate.selectors.disagreements)."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, NamedTuple, TypeVar

from django.contrib.auth import get_user_model
from django.core.cache import cache
from django.core.exceptions import ValidationError
from django.db.models import Count, Exists, OuterRef, Q, QuerySet
from django.http import Http404

from annotate.models import (
    Assignment,
    Batch,
    ConsensusAnswer,
    DiscussionNote,
    ExpectedAnswer,
    Rating,
    Revision,
    Span,
    Study,
    Summary,
)
from annotate.selectors.counting import counting_only
from annotate.selectors.queue import revision_answers, revisions_with_answers
from core.models import change_states

T = TypeVar("T")


def get_batch(study: Study, batch_uuid, *, counts: bool = False) -> Batch:
    """The study's batch, else 404. The one lookup of a batch for pages and API alike.
    With counts, it carries its assignment and item counts (n_assignments, n_items), which
    read every assignment of the batch: only the batch's own detail asks for them."""
    batches = batches_for_study(study) if counts else Batch.objects.filter(study=study).select_related("created_by")
    try:
        batch = batches.filter(uuid=batch_uuid).first()
    except (ValueError, ValidationError):
        batch = None
    if batch is None:
        raise Http404("No such batch.")
    return batch


def batches_for_study(study: Study, *, kind: str | None = None) -> QuerySet[Batch]:
    batches = (
        Batch.objects.filter(study=study)
        .select_related("created_by")
        .annotate(
            n_assignments=Count("assignments", filter=~Q(assignments__state=Assignment.State.WITHDRAWN)),
            n_items=Count("assignments__summary", distinct=True),
        )
        .order_by("created_at", "pk")
    )
    return batches.filter(kind=kind) if kind else batches


def batch_assignments(
    batch: Batch, *, rater: str | None = None, state: str | None = None, summary=None
) -> QuerySet[Assignment]:
    assignments = (
        Assignment.objects.filter(batch=batch)
        .select_related("rater", "summary", "moved_to")
        .order_by("summary_id", "rater_id")
    )
    if rater:
        assignments = assignments.filter(rater__username=rater)
    if state:
        assignments = assignments.filter(state=state)
    if summary:
        assignments = assignments.filter(summary__uuid=summary)
    return assignments


def get_batch_assignment(batch: Batch, assignment_uuid) -> Assignment:
    assignment = batch_assignments(batch).select_related("study").filter(uuid=assignment_uuid).first()
    if assignment is None:
        raise Http404("No such assignment in this batch.")
    return assignment


def get_batch_summary(batch: Batch, summary_uuid) -> Summary | None:
    """The summary if it is an item of the batch, else None."""
    return (
        Summary.objects.select_related("source", "study")
        .filter(uuid=summary_uuid, study=batch.study_id, assignments__batch=batch)
        .distinct()
        .first()
    )


@dataclass(frozen=True)
class RaterProgress:
    rater: Any
    assigned: int
    pending: int
    in_progress: int
    submitted: int
    skipped: int
    withdrawn: int
    median_active_seconds: float | None


@dataclass(frozen=True)
class BatchProgress:
    batch: Batch
    raters: list[RaterProgress]
    items: int
    items_missing: list[tuple[Summary, int, int]]  # (summary, submitted, planned)
    # summary id -> [(rater, skip reason)] of the batch's skipped assignments
    skips: dict[int, list[tuple[Any, str]]] = field(default_factory=dict)


def batch_progress(batch: Batch) -> BatchProgress:
    """Per rater: assignments by state and median active time per submitted item;
    and the items still missing ratings (fewer submitted than planned). The counts are
    computed from every assignment once per state of the batch (batch_state) and kept in
    Django's cache; only the raters and the items missing ratings become objects."""
    per_rater, items, missing, skipped = per_batch_state(batch, "batch-progress", lambda: _progress_counts(batch))
    users = get_user_model().objects.in_bulk([rater_id for rater_id, *_ in per_rater])
    raters = sorted(
        (RaterProgress(users[rater_id], *figures) for rater_id, *figures in per_rater),
        key=lambda r: r.rater.get_username(),
    )
    summaries = Summary.objects.only("uuid", "key", "study_id", "source_id").in_bulk([pk for pk, *_ in missing])
    items_missing = sorted(((summaries[pk], *c) for pk, *c in missing), key=lambda r: (r[1] - r[2], r[0].key))
    skips: dict[int, list[tuple[Any, str]]] = {}
    for summary_id, rater_id, reason in sorted(skipped, key=lambda row: users[row[1]].get_username()):
        skips.setdefault(summary_id, []).append((users[rater_id], reason))
    return BatchProgress(batch=batch, raters=raters, items=items, items_missing=items_missing, skips=skips)


def _progress_counts(batch: Batch) -> tuple[list[tuple], int, list[tuple], list[tuple]]:
    """batch_progress's figures as plain values: per rater (id, the RaterProgress
    figures), the number of items, the items missing ratings (summary id, submitted,
    planned) and the skips (summary id, rater id, reason), from the assignments read as
    values."""
    import statistics

    rows = Assignment.objects.filter(batch=batch).values_list("rater_id", "summary_id", "state", "active_seconds")
    per_rater: dict[int, list[tuple]] = {}
    per_item: dict[int, list[str]] = {}
    for rater_id, summary_id, state, seconds in rows:
        per_rater.setdefault(rater_id, []).append((state, seconds))
        per_item.setdefault(summary_id, []).append(state)
    raters = []
    for rater_id, items in per_rater.items():
        states = [state for state, _ in items]
        active = [seconds for state, seconds in items if state == Assignment.State.SUBMITTED]
        raters.append(
            (
                rater_id,
                sum(s != Assignment.State.WITHDRAWN for s in states),
                states.count(Assignment.State.PENDING),
                states.count(Assignment.State.IN_PROGRESS),
                states.count(Assignment.State.SUBMITTED),
                states.count(Assignment.State.SKIPPED),
                states.count(Assignment.State.WITHDRAWN),
                statistics.median(active) if active else None,
            )
        )
    missing = []
    # Qualification items are screening, rated by whoever arrives: never "missing ratings".
    for summary_id, states in per_item.items() if batch.kind != Batch.Kind.QUALIFICATION else ():
        planned = sum(s != Assignment.State.WITHDRAWN for s in states)
        submitted = states.count(Assignment.State.SUBMITTED)
        if submitted < planned:
            missing.append((summary_id, submitted, planned))
    skipped = Assignment.objects.filter(batch=batch, state=Assignment.State.SKIPPED).order_by("pk")
    skips = list(skipped.values_list("summary_id", "rater_id", "skip_reason"))
    return raters, len(per_item), missing, skips


def batch_answers(batch: Batch, *, phase: str = "initial", summary: Summary | None = None) -> dict:
    """{summary id: {rater: (answers, rationales, revision)}} of the answers that count
    (each assignment's newest submitted revision in `phase`). Admin pages only."""
    revisions = Revision.objects.filter(assignment__batch=batch, status=Revision.Status.SUBMITTED, phase=phase).exclude(
        assignment__state=Assignment.State.WITHDRAWN
    )
    if summary is not None:
        revisions = revisions.filter(assignment__summary=summary)
    ordered = (
        revisions_with_answers()
        .filter(pk__in=revisions)
        .select_related("assignment__rater")
        .order_by("assignment_id", "phase", "-number")
    )
    result: dict[int, dict] = {}
    for revision in counting_only(ordered, key=lambda r: (r.assignment_id, r.phase)):
        answers, rationales = revision_answers(revision)
        result.setdefault(revision.assignment.summary_id, {})[revision.assignment.rater] = (
            answers,
            rationales,
            revision,
        )
    return result


class ItemRef(NamedTuple):
    """An item named the way lists show it: what a page of thousands needs of a summary."""

    pk: int
    uuid: Any
    key: str


@dataclass(frozen=True)
class AnswerRow:
    """One rater's answers that count for one item of a batch (admins only)."""

    summary: ItemRef
    rater: str
    assignment: Any
    revision: int
    phase: str
    submitted_at: datetime | None
    rubric_version: int
    answers: dict
    rationales: dict


# One row per (item, rater) in a batch and phase (assignment_unique_batch_summary_rater).
ANSWER_ORDER = ("assignment__summary_id", "assignment__rater_id")


def batch_answer_revisions(
    batch: Batch, *, phase: str = "initial", summary: Summary | None = None, rater: str | None = None
) -> QuerySet[Revision]:
    """The answers that count in a batch (each live assignment's newest submitted revision
    in `phase`), as a queryset in the order of the assignments' index (batch, summary,
    rater): items in the order they were imported, then raters in the order their accounts
    were made. The database picks and orders them along that index, so a page of it reads
    only its own rows. answer_rows() turns a page into rows."""
    newer = Revision.objects.filter(
        assignment_id=OuterRef("assignment_id"),
        phase=OuterRef("phase"),
        status=Revision.Status.SUBMITTED,
        number__gt=OuterRef("number"),
    )
    revisions = (
        Revision.objects.filter(assignment__batch=batch, status=Revision.Status.SUBMITTED, phase=phase)
        .exclude(assignment__state=Assignment.State.WITHDRAWN)
        .exclude(Exists(newer))
    )
    if summary is not None:
        revisions = revisions.filter(assignment__summary=summary)
    if rater:
        revisions = revisions.filter(assignment__rater__username=rater)
    return revisions.order_by(*ANSWER_ORDER)


def answer_rows(ids: Sequence[int]) -> list[AnswerRow]:
    """Rows of the given revisions (ids of a page of batch_answer_revisions), in their
    order, in three queries of plain values (no model objects: the stream builds 50,000
    rows): the revisions with their assignment, rater, summary and rubric version, then
    their ratings with rationales, then their spans. Answers and rationales are shaped as
    revision_answers gives them."""
    ids = list(ids)
    heads = {
        row[0]: row
        for row in Revision.objects.filter(pk__in=ids).values_list(
            "pk",
            "number",
            "phase",
            "submitted_at",
            "rubric__version",
            "assignment__uuid",
            "assignment__rater__username",
            "assignment__summary_id",
            "assignment__summary__uuid",
            "assignment__summary__key",
        )
    }
    answers: dict[int, dict] = {revision_id: {} for revision_id in ids}
    rationales: dict[int, dict] = {revision_id: {} for revision_id in ids}
    ratings = (
        Rating.objects.filter(revision_id__in=ids)
        .order_by("revision_id", "question", "pk")
        .values_list("revision_id", "question", "score", "value", "finding__uuid", "rationale__text")
    )
    for revision_id, question, score, value, finding, rationale in ratings:
        answer = score if score is not None else value
        if finding is not None:
            answers[revision_id].setdefault(question, {})[str(finding)] = answer
            if rationale is not None:
                rationales[revision_id].setdefault(question, {})[str(finding)] = rationale
            continue
        answers[revision_id][question] = answer
        if rationale is not None:
            rationales[revision_id][question] = rationale
    spans = (
        Span.objects.filter(revision_id__in=ids)
        .order_by("revision_id", "question", "index")
        .values("revision_id", "question", *Span.ANSWER_FIELDS)
    )
    for span in spans:
        answers[span["revision_id"]].setdefault(span["question"], []).append(Span.answer_from(span))
    rows = []
    for revision_id in ids:
        _, number, phase, submitted_at, version, assignment, rater, summary_id, summary_uuid, key = heads[revision_id]
        rows.append(
            AnswerRow(
                summary=ItemRef(summary_id, summary_uuid, key),
                rater=rater,
                assignment=assignment,
                revision=number,
                phase=phase,
                submitted_at=submitted_at,
                rubric_version=version,
                answers=answers[revision_id],
                rationales=rationales[revision_id],
            )
        )
    return rows


def batch_state(batch: Batch) -> str:
    """A digest of the state of a batch's answers (core.models.change_states, one query):
    it changes with any write to them (every write to an assignment or a revision stamps
    its updated_at; rows added are counted), with the study's expected answers and with
    the study's rubric version."""
    states = change_states(
        {
            "assignments": Assignment.objects.filter(batch=batch),
            "revisions": Revision.objects.filter(assignment__batch=batch),
            "expected": ExpectedAnswer.objects.filter(study=batch.study_id),
        }
    )
    return hashlib.sha256(repr([batch.study.rubric_id, states]).encode()).hexdigest()


def per_batch_state(batch: Batch, name: str, compute: Callable[[], T], *options: Any) -> T:
    """compute() once per state of the batch's answers (batch_state) and `options` (what
    it takes besides), kept in Django's cache: what is computed from every answer of a
    batch is read back until an answer changes, and is never stale."""
    digest = hashlib.sha256(repr([batch_state(batch), *options]).encode()).hexdigest()
    return cache.get_or_set(f"{name}:{batch.pk}:{digest}", compute, timeout=BATCH_CACHE_SECONDS)


# Keys change with the batch's state, so this only bounds how long unused entries stay.
BATCH_CACHE_SECONDS = 3600


@dataclass(frozen=True)
class RaterAccuracy:
    rater: Any
    items: int  # submitted items that have expected answers
    compared: int  # expected answers compared
    correct: int

    @property
    def accuracy(self) -> float | None:
        return self.correct / self.compared if self.compared else None


def answer_matches(expected: Any, given: Any) -> bool:
    """Whether a given answer equals the expected one (tickbox sets in any order)."""
    if isinstance(expected, list):
        return sorted(expected) == sorted(given or [])
    if isinstance(expected, dict) and "preferred" in expected:
        # An expected preference: the same summary (or a tie); its strength only if given.
        given = given if isinstance(given, dict) else {}
        return all(given.get(k) == v for k, v in expected.items())
    return expected == given


def first_answers(batch: Batch, *, summaries: Collection[int]) -> dict[int, dict]:
    """{summary id: {rater: answers}} of each assignment's FIRST submitted revision of
    the initial phase, for the `summaries` (ids; those with expected answers, so the rest
    of a large batch is never read): the answer a rater gave before any feedback or
    discussion. Gold accuracy counts this one, so "Change my answer" after seeing the
    right answer cannot raise it (the answer that counts is still the newest)."""
    revisions = Revision.objects.filter(
        assignment__batch=batch, assignment__summary__in=summaries, status=Revision.Status.SUBMITTED, phase="initial"
    ).exclude(assignment__state=Assignment.State.WITHDRAWN)
    ordered = (
        revisions_with_answers()
        .filter(pk__in=revisions)
        .select_related("assignment__rater")
        .order_by("assignment_id", "number")
    )
    result: dict[int, dict] = {}
    for revision in counting_only(ordered, key=lambda r: r.assignment_id):
        answers, _ = revision_answers(revision)
        result.setdefault(revision.assignment.summary_id, {})[revision.assignment.rater] = answers
    return result


def quality_report(batch: Batch) -> list[RaterAccuracy]:
    """Each rater's accuracy on the batch's gold items and attention checks: the
    share of expected answers their first submitted answer (first_answers) matches
    exactly."""
    expected = {
        e.summary_id: e.answers
        for e in ExpectedAnswer.objects.filter(study=batch.study_id).exclude(purpose=ExpectedAnswer.Purpose.TRAINING)
    }
    per_rater: dict[Any, list[int]] = {}
    for summary_id, by_rater in first_answers(batch, summaries=list(expected)).items():
        for rater, given in by_rater.items():
            row = per_rater.setdefault(rater, [0, 0, 0])
            row[0] += 1
            for key, value in expected[summary_id].items():
                row[1] += 1
                row[2] += answer_matches(value, given.get(key))
    return [RaterAccuracy(rater, *counts) for rater, counts in sorted(per_rater.items(), key=lambda kv: kv[0].pk)]


def consensus_answers(batch: Batch, *, summary=None, question: str | None = None) -> QuerySet[ConsensusAnswer]:
    answers = (
        ConsensusAnswer.objects.filter(batch=batch)
        .select_related("summary", "decided_by", "rubric")
        .order_by("summary__key", "question", "created_at", "pk")
    )
    if summary:
        answers = answers.filter(summary__uuid=summary)
    if question:
        answers = answers.filter(question=question)
    return answers


def discussion_notes(batch: Batch, *, summary=None, question: str | None = None) -> QuerySet[DiscussionNote]:
    notes = (
        DiscussionNote.objects.filter(batch=batch)
        .select_related("summary", "author")
        .order_by("summary__key", "created_at", "pk")
    )
    if summary:
        notes = notes.filter(summary__uuid=summary)
    if question is not None and question != "":
        notes = notes.filter(question=question)
    return notes


@dataclass(frozen=True)
class ReratingScope:
    assignments: int  # submitted assignments whose answers the round would reopen
    summaries: int
    raters: int


def rerating_scope(batch: Batch) -> ReratingScope:
    """What "open the re-rating round" would reopen: as annotate.services.adjudication.open_rerating,
    the batch's submitted assignments whose newest revision is not yet post-discussion."""
    newest: dict[int, tuple[str, int, int]] = {}
    rows = (
        Revision.objects.filter(assignment__batch=batch, assignment__state=Assignment.State.SUBMITTED)
        .order_by("assignment_id", "-number")
        .values_list("assignment_id", "phase", "assignment__summary_id", "assignment__rater_id")
    )
    for assignment_id, phase, summary_id, rater_id in rows:
        newest.setdefault(assignment_id, (phase, summary_id, rater_id))
    chosen = [(s, r) for phase, s, r in newest.values() if phase != Revision.Phase.POST_DISCUSSION]
    return ReratingScope(
        assignments=len(chosen), summaries=len({s for s, _ in chosen}), raters=len({r for _, r in chosen})
    )
