"""Batch administration (study admins and viewers only): batches, their
assignments, progress, the answers that count per batch, disagreements, gold-item
accuracy, consensus and discussion notes."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, NamedTuple

from django.contrib.auth import get_user_model
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
from annotate.rubrics import per_claim_parts
from annotate.selectors.contents import rubric_definition
from annotate.selectors.counting import counting_only
from annotate.selectors.queue import revision_answers, revisions_with_answers


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
    and the items still missing ratings (fewer submitted than planned). The assignments
    are read as values: only the raters and the items missing ratings become objects."""
    import statistics

    rows = Assignment.objects.filter(batch=batch).values_list("rater_id", "summary_id", "state", "active_seconds")
    per_rater: dict[int, list[tuple]] = {}
    per_item: dict[int, list[str]] = {}
    for rater_id, summary_id, state, seconds in rows:
        per_rater.setdefault(rater_id, []).append((state, seconds))
        per_item.setdefault(summary_id, []).append(state)
    users = get_user_model().objects.in_bulk(list(per_rater))
    raters = []
    for rater_id, items in sorted(per_rater.items(), key=lambda kv: users[kv[0]].get_username()):
        states = [state for state, _ in items]
        active = [seconds for state, seconds in items if state == Assignment.State.SUBMITTED]
        raters.append(
            RaterProgress(
                rater=users[rater_id],
                assigned=sum(s != Assignment.State.WITHDRAWN for s in states),
                pending=states.count(Assignment.State.PENDING),
                in_progress=states.count(Assignment.State.IN_PROGRESS),
                submitted=states.count(Assignment.State.SUBMITTED),
                skipped=states.count(Assignment.State.SKIPPED),
                withdrawn=states.count(Assignment.State.WITHDRAWN),
                median_active_seconds=statistics.median(active) if active else None,
            )
        )
    counts = {}
    # Qualification items are screening, rated by whoever arrives: never "missing ratings".
    for summary_id, states in per_item.items() if batch.kind != Batch.Kind.QUALIFICATION else ():
        planned = sum(s != Assignment.State.WITHDRAWN for s in states)
        submitted = states.count(Assignment.State.SUBMITTED)
        if submitted < planned:
            counts[summary_id] = (submitted, planned)
    summaries = Summary.objects.only("uuid", "key", "study_id", "source_id").in_bulk(list(counts))
    missing = sorted(((summaries[pk], *c) for pk, c in counts.items()), key=lambda r: (r[1] - r[2], r[0].key))
    skips: dict[int, list[tuple[Any, str]]] = {}
    skipped = Assignment.objects.filter(batch=batch, state=Assignment.State.SKIPPED).order_by("rater__username")
    for summary_id, rater_id, reason in skipped.values_list("summary_id", "rater_id", "skip_reason"):
        skips.setdefault(summary_id, []).append((users[rater_id], reason))
    return BatchProgress(batch=batch, raters=raters, items=len(per_item), items_missing=missing, skips=skips)


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


@dataclass(frozen=True)
class Disagreement:
    summary: ItemRef
    question: str
    values: dict  # username -> answer
    spread: float  # how far apart: scale range, or number of differing raters/sentences


def question_answers(batch: Batch, *, question: str, phase: str = "initial") -> dict[int, dict[str, Any]]:
    """{summary id: {rater's username: answer}} to one question, from the answers that
    count (batch_answer_revisions), in a fixed number of queries that read only that
    question's ratings or spans: what disagreements compare. An answer is as
    revision_answers gives it (a score, "na", a choice, a list; {finding uuid: answer} for
    per-finding questions; the list of spans for span questions); None when the rater
    left the question unanswered."""
    counting = batch_answer_revisions(batch, phase=phase)
    slots = {}
    result: dict[int, dict[str, Any]] = {}
    for revision_id, summary_id, username in counting.values_list(
        "pk", "assignment__summary_id", "assignment__rater__username"
    ):
        slots[revision_id] = (summary_id, username)
        result.setdefault(summary_id, {})[username] = None
    chosen = counting.order_by().values("pk")
    ratings = (
        Rating.objects.filter(revision__in=chosen, question=question)
        .order_by("revision_id", "pk")
        .values_list("revision_id", "score", "value", "finding__uuid")
    )
    for revision_id, score, value, finding in ratings:
        summary_id, username = slots[revision_id]
        answer = score if score is not None else value
        if finding is None:
            result[summary_id][username] = answer
        else:
            by_finding = result[summary_id][username] or {}
            by_finding[str(finding)] = answer
            result[summary_id][username] = by_finding
    spans = (
        Span.objects.filter(revision__in=chosen, question=question)
        .order_by("revision_id", "index")
        .values("revision_id", *Span.ANSWER_FIELDS)
    )
    for span in spans:
        summary_id, username = slots[span["revision_id"]]
        result[summary_id][username] = (result[summary_id][username] or []) + [Span.answer_from(span)]
    return result


def _sentence_marks(summary_text: str, spans: list[dict]) -> dict[int, set[str]]:
    """Sentence index -> the 'factual' answers of the spans that touch it."""
    from core.sentences import split_spans

    marks: dict[int, set[str]] = {}
    for index, (start, end) in enumerate(split_spans(summary_text)):
        for span in spans:
            if span["start"] < end and span["end"] > start:
                marks.setdefault(index, set()).add(str(span.get("answers", {}).get("factual", "")))
    return marks


def _scale_spread(values: dict, threshold: float) -> tuple[float, dict] | None:
    """Scores at least `threshold` apart; N/A differs from any score."""
    scores = [v for v in values.values() if isinstance(v, int)]
    has_na = any(v == "na" for v in values.values())
    spread = float(max(scores) - min(scores)) if len(scores) >= 2 else 0.0
    if has_na and scores:
        spread = max(spread, float(threshold))
    return None if spread < threshold else (spread, values)


def _compared_spans_spread(values: dict) -> tuple[float, dict] | None:
    """Spans in either compared summary, each not marked alike by every rater."""
    marked = {rater: {(x.get("summary"), x["text"]) for x in v or []} for rater, v in values.items()}
    differing = len(set().union(*marked.values()) - set.intersection(*marked.values()))
    shown = {rater: [x["text"] for x in v or []] for rater, v in values.items()}
    return (float(differing), shown) if differing else None


def _highlight_spread(values: dict, text: str) -> tuple[float, dict] | None:
    """Sentences marked by one rater only, or marked factual by one and not by another."""
    marks = {rater: _sentence_marks(text, v or []) for rater, v in values.items()}
    sentences = set().union(*(m.keys() for m in marks.values()))
    differing = sum(
        1
        for i in sentences
        if len({i in m for m in marks.values()}) > 1 or len(set().union(*(m.get(i, set()) for m in marks.values()))) > 1
    )
    shown = {
        rater: [
            s["text"] + (" (not factual)" if s.get("answers", {}).get("factual") == "no" else "") for s in (v or [])
        ]
        for rater, v in values.items()
    }
    return (float(differing), shown) if differing else None


def _per_claim_spread(values: dict) -> tuple[float, dict] | None:
    """Claim by claim: a claim counts when the raters chose different options for it."""
    values = {rater: per_claim_parts(v or {})[0] for rater, v in values.items()}
    claims = set().union(*(v.keys() for v in values.values()))
    differing = sum(len({v.get(c) for v in values.values()}) > 1 for c in claims)
    return (float(differing), values) if differing else None


def _per_finding_spread(values: dict, threshold: float) -> tuple[float, dict] | None:
    """The largest gap between two raters' scores of one finding, at least `threshold`."""
    findings = set().union(*((v or {}).keys() for v in values.values()))
    gaps = [
        max(s) - min(s)
        for f in findings
        if len(s := [v.get(f) for v in values.values() if isinstance((v or {}).get(f), int)]) >= 2
    ]
    spread = float(max(gaps, default=0))
    return None if spread < threshold else (spread, values)


def _choice_spread(q, values: dict) -> tuple[float, dict] | None:
    """Different choices or tickbox sets; for a preference, a different summary (or a tie)."""
    if q.several_options:
        values = {rater: v or [] for rater, v in values.items()}  # nothing ticked
    if q.preference:
        # Raters disagree on which summary (or a tie), not on how much.
        values = {rater: (v or {}).get("preferred") for rater, v in values.items()}
    normalised = {str(sorted(v)) if isinstance(v, list) else str(v) for v in values.values()}
    if not q.comparable or len(normalised) < 2:
        return None
    return float(len(normalised)), values


def _spread(q, values: dict, *, threshold: float, text: str | None) -> tuple[float, dict] | None:
    """How far one item's answers lie apart and the answers as shown; None if they agree."""
    if q.plain_scale:
        return _scale_spread(values, threshold)
    if q.in_compared:
        return _compared_spans_spread(values)
    if q.highlights:
        return _highlight_spread(values, text)
    if q.per_claim:
        return _per_claim_spread(values)
    if q.per_finding:
        return _per_finding_spread(values, threshold)
    return _choice_spread(q, values)


def _item_refs(summary_ids: list[int], *, with_texts: bool) -> tuple[dict[int, ItemRef], dict[int, str]]:
    """Each item's key and uuid as plain values (ItemRef); texts only where sentences are compared."""
    refs, texts = {}, {}
    for start in range(0, len(summary_ids), 5000):
        chunk = Summary.objects.filter(pk__in=summary_ids[start : start + 5000])
        refs.update((pk, ItemRef(pk, uuid, key)) for pk, uuid, key in chunk.values_list("pk", "uuid", "key"))
    if with_texts:
        for start in range(0, len(summary_ids), 5000):
            texts.update(Summary.objects.filter(pk__in=summary_ids[start : start + 5000]).values_list("pk", "text"))
    return refs, texts


def batch_disagreements(
    batch: Batch, *, question: str, threshold: float = 1, phase: str = "initial", sort: str = "spread"
) -> list[Disagreement]:
    """Items where the raters' answers to `question` differ: scale answers at least
    `threshold` apart (N/A differs from any score), different choices or tickbox
    sets, span questions marked in a sentence by one rater only or marked factual by
    one and not factual by another. Sorted by spread (largest first) or by item."""
    definition = rubric_definition(batch.study.rubric)
    q = definition.question(question)
    answers = question_answers(batch, question=question, phase=phase)
    compared = [summary_id for summary_id, values in answers.items() if len(values) >= 2]
    summaries, texts = _item_refs(compared, with_texts=q.highlights)
    rows = []
    for summary_id in compared:
        found = _spread(q, answers[summary_id], threshold=threshold, text=texts.get(summary_id))
        if found is not None:
            spread, values = found
            rows.append(Disagreement(summary=summaries[summary_id], question=question, values=values, spread=spread))
    if sort == "item":
        rows.sort(key=lambda r: r.summary.key)
    else:
        rows.sort(key=lambda r: (-r.spread, r.summary.key))
    return rows


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
