"""Reads. Every access rule about who sees what is written here, once."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db.models import Count, Prefetch, Q, QuerySet
from django.http import Http404

from annotate.models import Assignment, Finding, Rating, Revision, Rubric, SourceSentence, Span, Study, Summary
from annotate.rubrics import RubricDefinition


def rubric_definition(rubric: Rubric) -> RubricDefinition:
    return RubricDefinition.from_dict(rubric.definition)


def assignments_for_rater(user) -> QuerySet[Assignment]:
    """The rater's own assignments, in queue order. Never anyone else's."""
    return Assignment.objects.filter(rater=user).select_related("study", "summary").order_by("study__title", "position")


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


def latest_submitted_revisions(*, study: Study, phase: str = "all") -> list[Revision]:
    """Per assignment (and phase), the newest submitted revision: the answer that counts."""
    revisions = Revision.objects.filter(assignment__study=study, status=Revision.Status.SUBMITTED)
    if phase != "all":
        revisions = revisions.filter(phase=phase)
    chosen: dict[tuple[int, str], Revision] = {}
    for revision in revisions.select_related("rubric").order_by("assignment_id", "phase", "-number"):
        chosen.setdefault((revision.assignment_id, revision.phase), revision)
    return list(chosen.values())


def ratings_frame(*, study: Study, phase: str = "all"):
    """A tidy pandas frame, one row per (item, rater, question, phase), of the answers
    that count (each assignment's newest submitted revision).

    Columns: item (summary uuid), rater (user id), question, score (float, NaN for
    non-scale answers), answer (the stored answer: int, str, list or None), rationale,
    phase, rubric_version, submitted_at. Analysis code imports no ORM; it gets this.
    """
    import pandas as pd

    revisions = {r.pk: r for r in latest_submitted_revisions(study=study, phase=phase)}
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
        }
        row.update({f"source.{k}": v for k, v in sorted(summary.source.metadata.items())})
        rows.append(row)
    counts = dict(SourceSentence.objects.filter(source__study=study).values_list("source__key").annotate(n=Count("id")))
    for row in rows:
        row["context_sentences"] = counts.get(row["source"], 0)
    return pd.DataFrame(rows)
