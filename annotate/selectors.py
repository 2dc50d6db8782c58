"""Reads. Every access rule about who sees what is written here, once."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NamedTuple

from django.db.models import Count, JSONField, Prefetch, Q, QuerySet
from django.http import Http404

from annotate.exceptions import ApplicationError
from annotate.models import (
    Assignment,
    Batch,
    ExpectedAnswer,
    Finding,
    Rating,
    Revision,
    Rubric,
    SourceSentence,
    Span,
    Study,
    StudyMembership,
    Summary,
)
from annotate.rubrics import RubricDefinition


def rubric_definition(rubric: Rubric) -> RubricDefinition:
    return RubricDefinition.from_dict(rubric.definition)


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


def _revisions_with_answers() -> QuerySet[Revision]:
    return Revision.objects.select_related("rubric").prefetch_related(
        Prefetch("ratings", queryset=Rating.objects.select_related("rationale", "finding").order_by("question")),
        Prefetch("spans", queryset=Span.objects.order_by("question", "index")),
    )


def latest_revision(assignment: Assignment) -> Revision | None:
    """The newest revision, draft or submitted, with its ratings and rationales."""
    return _revisions_with_answers().filter(assignment=assignment).order_by("-number").first()


def revision_history(assignment: Assignment) -> list[Revision]:
    return list(_revisions_with_answers().filter(assignment=assignment).order_by("number"))


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


def latest_submitted_revisions(
    *, study: Study, phase: str = "all", include_calibration: bool = False
) -> list[Revision]:
    """Per assignment (and phase), the newest submitted revision: the answer that counts.
    Calibration (pilot) batches are left out unless asked for."""
    revisions = Revision.objects.filter(assignment__study=study, status=Revision.Status.SUBMITTED)
    if not include_calibration:
        revisions = revisions.exclude(assignment__batch__kind=Batch.Kind.CALIBRATION)
    if phase != "all":
        revisions = revisions.filter(phase=phase)
    chosen: dict[tuple[int, str], Revision] = {}
    for revision in revisions.select_related("rubric").order_by("assignment_id", "phase", "-number"):
        chosen.setdefault((revision.assignment_id, revision.phase), revision)
    return list(chosen.values())


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
        a.pk: a for a in Assignment.objects.filter(pk__in={r.assignment_id for r in revisions}).select_related("batch")
    }
    chosen = newest_rater_answers(
        AnswerCandidate(
            revision_id=r.pk,
            summary_id=assignments[r.assignment_id].summary_id,
            rater_id=assignments[r.assignment_id].rater_id,
            phase=r.phase,
            submitted_at=r.submitted_at,
            batch_name=assignments[r.assignment_id].batch.name if assignments[r.assignment_id].batch_id else "",
            assignment_uuid=str(assignments[r.assignment_id].uuid),
        )
        for r in revisions
    )
    return [r for r in revisions if r.pk in chosen]


def ratings_frame(*, study: Study, phase: str = "all", include_calibration: bool = False):
    """A tidy pandas frame, one row per (item, rater, question, phase), of the answers
    that count (each assignment's newest submitted revision; of a rater's several
    assignments to one summary, the newest submitted: rater_answer_revisions).

    Columns: item (summary uuid), rater (user id), question, finding (uuid of the
    finding for per-finding questions, else ""), score (float, NaN for
    non-scale answers), answer (the stored answer: int, str, list or None), rationale,
    phase, rubric_version, submitted_at. Analysis code imports no ORM; it gets this.
    """
    import pandas as pd

    revisions = {
        r.pk: r for r in rater_answer_revisions(study=study, phase=phase, include_calibration=include_calibration)
    }
    rows = []
    ratings = (
        Rating.objects.filter(revision_id__in=list(revisions))
        .select_related("revision__assignment__summary", "rationale", "finding")
        .order_by("revision__assignment__summary__key", "revision__assignment__rater_id", "question")
    )
    for rating in ratings:
        revision = revisions[rating.revision_id]
        rationale = getattr(rating, "rationale", None)
        rows.append(
            {
                "item": str(rating.revision.assignment.summary.uuid),
                "rater": str(rating.revision.assignment.rater_id),
                "question": rating.question,
                "finding": str(rating.finding.uuid) if rating.finding_id else "",
                "score": float(rating.score) if rating.score is not None else float("nan"),
                "answer": rating.answer,
                "rationale": rationale.text if rationale is not None else "",
                "phase": revision.phase,
                "rubric_version": revision.rubric.version,
                "submitted_at": revision.submitted_at,
            }
        )
    columns = [
        "item",
        "rater",
        "question",
        "finding",
        "score",
        "answer",
        "rationale",
        "phase",
        "rubric_version",
        "submitted_at",
    ]
    return pd.DataFrame(rows, columns=columns)


def summaries_frame(*, study: Study):
    """One row per summary: item (uuid), key, source key, generator, text length, and
    the source's metadata as `source.<field>` columns. For admins and analysis only:
    it names the generator, so it must never reach a rater."""
    import pandas as pd

    rows = []
    for summary in Summary.objects.filter(study=study).select_related("source").order_by("key"):
        row = {
            "item": str(summary.uuid),
            "key": summary.key,
            "source": summary.source.key,
            "generator": summary.generator,
            "n_chars": len(summary.text),
            "n_words": len(summary.text.split()),
            "context_sentences": None,
            # What the generation pipeline recorded (LitSumm's Table 2), when it wrote the summary.
            "pipeline": summary.metadata.get("pipeline", ""),
            "attempts": summary.metadata.get("attempts"),
            "references_passed": (summary.metadata.get("reference_checks") or {}).get("passed"),
            "consistency_revised": summary.metadata.get("consistency_revised"),
            "flags": list(summary.flags),
        }
        row.update({f"source.{k}": v for k, v in sorted(summary.source.metadata.items())})
        rows.append(row)
    counts = dict(SourceSentence.objects.filter(source__study=study).values_list("source__key").annotate(n=Count("id")))
    for row in rows:
        row["context_sentences"] = counts.get(row["source"], 0)
    return pd.DataFrame(rows)


def filter_summaries(
    *,
    study: Study,
    generator: str | list[str] | None = None,
    flags_any: list[str] | None = None,
    flags_none: list[str] | None = None,
    source_metadata: dict[str, str] | None = None,
    min_context: int | None = None,
    max_context: int | None = None,
    rated: bool | None = None,
) -> QuerySet[Summary]:
    """The study's summaries matching every given filter, annotated with
    `context_sentences` (sentences in the source). `rated` is about submitted
    ratings in any batch."""
    summaries = (
        Summary.objects.filter(study=study)
        .select_related("source")
        .annotate(context_sentences=Count("source__sentences", distinct=True))
        .order_by("key")
    )
    if generator:
        summaries = summaries.filter(generator__in=[generator] if isinstance(generator, str) else generator)
    for key, value in (source_metadata or {}).items():
        # The key becomes part of an ORM lookup: only a plain field name is allowed, so
        # "a__b" or "contains" cannot turn a filter into another query.
        if not re.fullmatch(r"[A-Za-z][A-Za-z0-9_]*", key) or "__" in key or key in JSONField.get_lookups():
            raise ApplicationError(f"source metadata field {key!r} is not a plain field name")
        summaries = summaries.filter(**{f"source__metadata__{key}": value})
    if min_context is not None:
        summaries = summaries.filter(context_sentences__gte=min_context)
    if max_context is not None:
        summaries = summaries.filter(context_sentences__lte=max_context)
    if rated is not None:
        rated_ids = Revision.objects.filter(assignment__study=study, status=Revision.Status.SUBMITTED).values(
            "assignment__summary"
        )
        summaries = summaries.filter(pk__in=rated_ids) if rated else summaries.exclude(pk__in=rated_ids)
    if flags_any or flags_none:
        # JSON containment is not portable to SQLite: filter the (small) flag lists here.
        wanted, unwanted = set(flags_any or []), set(flags_none or [])
        keep = [s.pk for s in summaries if wanted <= set(s.flags) and not unwanted & set(s.flags)]
        summaries = summaries.filter(pk__in=keep)
    return summaries


# --- studies, batches and adjudication (study admins and viewers only) -------------------


def _is_member(user, study: Study, roles: tuple[str, ...]) -> bool:
    return user.is_staff or StudyMembership.objects.filter(study=study, user=user, role__in=roles).exists()


def get_study_for_admin(user, slug: str) -> Study:
    """The study if the user administers it (or is staff), else 404."""
    study = Study.objects.select_related("rubric").filter(slug=slug).first()
    if study is None or not user.is_authenticated or not _is_member(user, study, ("admin",)):
        raise Http404("No such study.")
    return study


def get_study_for_viewer(user, slug: str) -> Study:
    """The study if the user may read its dashboards (admin, viewer or staff), else 404.
    A rater who is only a rater gets 404: raters see nothing of a study but their items."""
    study = Study.objects.select_related("rubric").filter(slug=slug).first()
    if study is None or not user.is_authenticated or not _is_member(user, study, ("admin", "viewer")):
        raise Http404("No such study.")
    return study


def studies_for_staff_pages(user) -> QuerySet[Study]:
    if user.is_staff:
        return Study.objects.order_by("title")
    return Study.objects.filter(memberships__user=user, memberships__role__in=("admin", "viewer")).distinct()


def get_batch(study: Study, batch_uuid) -> Batch:
    try:
        return Batch.objects.get(study=study, uuid=batch_uuid)
    except (Batch.DoesNotExist, ValueError):
        raise Http404("No such batch.") from None


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


def batch_progress(batch: Batch) -> BatchProgress:
    """Per rater: assignments by state and median active time per submitted item;
    and the items still missing ratings (fewer submitted than planned)."""
    import statistics

    assignments = list(
        Assignment.objects.filter(batch=batch).select_related("rater", "summary").order_by("rater__username")
    )
    per_rater: dict[int, list[Assignment]] = {}
    for a in assignments:
        per_rater.setdefault(a.rater_id, []).append(a)
    rows = []
    for items in per_rater.values():
        states = [a.state for a in items]
        active = [a.active_seconds for a in items if a.state == Assignment.State.SUBMITTED]
        rows.append(
            RaterProgress(
                rater=items[0].rater,
                assigned=sum(s != Assignment.State.WITHDRAWN for s in states),
                pending=states.count(Assignment.State.PENDING),
                in_progress=states.count(Assignment.State.IN_PROGRESS),
                submitted=states.count(Assignment.State.SUBMITTED),
                skipped=states.count(Assignment.State.SKIPPED),
                withdrawn=states.count(Assignment.State.WITHDRAWN),
                median_active_seconds=statistics.median(active) if active else None,
            )
        )
    per_item: dict[int, list[Assignment]] = {}
    for a in assignments:
        per_item.setdefault(a.summary_id, []).append(a)
    missing = []
    for items in per_item.values():
        planned = sum(a.state != Assignment.State.WITHDRAWN for a in items)
        submitted = sum(a.state == Assignment.State.SUBMITTED for a in items)
        if submitted < planned:
            missing.append((items[0].summary, submitted, planned))
    missing.sort(key=lambda row: (row[1] - row[2], row[0].key))
    return BatchProgress(batch=batch, raters=rows, items=len(per_item), items_missing=missing)


def batch_answers(batch: Batch, *, phase: str = "initial", summary: Summary | None = None) -> dict:
    """{summary id: {rater: (answers, rationales, revision)}} of the answers that count
    (each assignment's newest submitted revision in `phase`). Admin pages only."""
    revisions = Revision.objects.filter(assignment__batch=batch, status=Revision.Status.SUBMITTED, phase=phase).exclude(
        assignment__state=Assignment.State.WITHDRAWN
    )
    if summary is not None:
        revisions = revisions.filter(assignment__summary=summary)
    chosen: dict[int, Revision] = {}
    for revision in (
        _revisions_with_answers()
        .filter(pk__in=revisions)
        .select_related("assignment__rater")
        .order_by("assignment_id", "-number")
    ):
        chosen.setdefault(revision.assignment_id, revision)
    result: dict[int, dict] = {}
    for revision in chosen.values():
        answers, rationales = revision_answers(revision)
        result.setdefault(revision.assignment.summary_id, {})[revision.assignment.rater] = (
            answers,
            rationales,
            revision,
        )
    return result


@dataclass(frozen=True)
class Disagreement:
    summary: Summary
    question: str
    values: dict  # rater -> displayable value
    spread: float  # how far apart: scale range, or number of differing raters/sentences


def _sentence_marks(summary_text: str, spans: list[dict]) -> dict[int, set[str]]:
    """Sentence index -> the 'factual' answers of the spans that touch it."""
    from annotate.text import split_spans

    marks: dict[int, set[str]] = {}
    for index, (start, end) in enumerate(split_spans(summary_text)):
        for span in spans:
            if span["start"] < end and span["end"] > start:
                marks.setdefault(index, set()).add(str(span.get("answers", {}).get("factual", "")))
    return marks


def batch_disagreements(
    batch: Batch, *, question: str, threshold: float = 1, phase: str = "initial", sort: str = "spread"
) -> list[Disagreement]:
    """Items where the raters' answers to `question` differ: scale answers at least
    `threshold` apart (N/A differs from any score), different choices or tickbox
    sets, span questions marked in a sentence by one rater only or marked factual by
    one and not factual by another. Sorted by spread (largest first) or by item."""
    definition = rubric_definition(batch.study.rubric)
    q = definition.question(question)
    answers = batch_answers(batch, phase=phase)
    summaries = Summary.objects.in_bulk(list(answers))
    rows = []
    for summary_id, by_rater in answers.items():
        if len(by_rater) < 2:
            continue
        summary = summaries[summary_id]
        values = {rater: a[0].get(question) for rater, a in by_rater.items()}
        spread = 0.0
        if q.kind == "scale":
            scores = [v for v in values.values() if isinstance(v, int)]
            has_na = any(v == "na" for v in values.values())
            spread = float(max(scores) - min(scores)) if len(scores) >= 2 else 0.0
            if has_na and scores:
                spread = max(spread, float(threshold))
            if spread < threshold:
                continue
        elif q.kind == "span":
            marks = {rater: _sentence_marks(summary.text, v or []) for rater, v in values.items()}
            sentences = set().union(*(m.keys() for m in marks.values()))
            differing = sum(
                1
                for i in sentences
                if len({i in m for m in marks.values()}) > 1
                or len(set().union(*(m.get(i, set()) for m in marks.values()))) > 1
            )
            if not differing:
                continue
            spread = float(differing)
            values = {
                rater: [
                    s["text"] + (" (not factual)" if s.get("answers", {}).get("factual") == "no" else "")
                    for s in (v or [])
                ]
                for rater, v in values.items()
            }
        elif q.kind == "per_finding":
            findings = set().union(*((v or {}).keys() for v in values.values()))
            gaps = [
                max(s) - min(s)
                for f in findings
                if len(s := [v.get(f) for v in values.values() if isinstance((v or {}).get(f), int)]) >= 2
            ]
            spread = float(max(gaps, default=0))
            if spread < threshold:
                continue
        else:
            if q.kind == "checkboxes":
                values = {rater: v or [] for rater, v in values.items()}  # nothing ticked
            normalised = {str(sorted(v)) if isinstance(v, list) else str(v) for v in values.values()}
            if q.kind == "text" or len(normalised) < 2:
                continue
            spread = float(len(normalised))
        rows.append(Disagreement(summary=summary, question=question, values=values, spread=spread))
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
    return expected == given


def quality_report(batch: Batch) -> list[RaterAccuracy]:
    """Each rater's accuracy on the batch's gold items and attention checks: the
    share of expected answers their submitted (initial) answer matches exactly."""
    expected = {
        e.summary_id: e.answers
        for e in ExpectedAnswer.objects.filter(study=batch.study_id).exclude(purpose=ExpectedAnswer.Purpose.TRAINING)
    }
    answers = batch_answers(batch, phase="initial")
    per_rater: dict[Any, list[int]] = {}
    for summary_id, by_rater in answers.items():
        if summary_id not in expected:
            continue
        for rater, (given, _, _) in by_rater.items():
            row = per_rater.setdefault(rater, [0, 0, 0])
            row[0] += 1
            for key, value in expected[summary_id].items():
                row[1] += 1
                row[2] += answer_matches(value, given.get(key))
    return [RaterAccuracy(rater, *counts) for rater, counts in sorted(per_rater.items(), key=lambda kv: kv[0].pk)]


def training_feedback(assignment: Assignment) -> ExpectedAnswer | None:
    """The expected answers to show after submitting, in a training batch only."""
    if assignment.batch_id is None or not assignment.batch.training:
        return None
    return ExpectedAnswer.objects.filter(study=assignment.study_id, summary=assignment.summary_id).first()


def spans_frame(*, study: Study, phase: str = "all", include_calibration: bool = False):
    """One row per highlighted span of the answers that count: item (summary uuid),
    rater, question, target, start, end, text, factual (the span's "factual" answer,
    if its question asks it), rationale, phase. The revisions are ratings_frame's."""
    import pandas as pd

    revisions = {
        r.pk: r for r in rater_answer_revisions(study=study, phase=phase, include_calibration=include_calibration)
    }
    rows = [
        {
            "item": str(span.revision.assignment.summary.uuid),
            "rater": str(span.revision.assignment.rater_id),
            "question": span.question,
            "target": span.target,
            "start": span.start,
            "end": span.end,
            "text": span.text,
            "factual": span.answers.get("factual"),
            "rationale": span.rationale,
            "phase": revisions[span.revision_id].phase,
        }
        for span in Span.objects.filter(revision_id__in=list(revisions))
        .select_related("revision__assignment__summary")
        .order_by("revision__assignment__summary__key", "revision__assignment__rater_id", "question", "index")
    ]
    columns = ["item", "rater", "question", "target", "start", "end", "text", "factual", "rationale", "phase"]
    return pd.DataFrame(rows, columns=columns)
