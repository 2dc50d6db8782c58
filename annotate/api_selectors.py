"""Reads the API needs beyond annotate.selectors. Every queryset arrives with its
related rows joined or prefetched, so serializers never query per row.

Access is not decided here: callers pass a study they got from annotate.permissions.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.contrib.auth import get_user_model
from django.db.models import Count, Prefetch, Q, QuerySet
from django.http import Http404

from annotate import selectors
from annotate.models import (
    Assignment,
    Batch,
    Claim,
    ConsensusAnswer,
    DiscussionNote,
    Finding,
    Source,
    SourceSentence,
    Study,
    StudyMembership,
    Summary,
)


def studies_for_user(user, *, role: str | None = None) -> QuerySet[Study]:
    """The studies the user has a role in (staff: every study), each with the user's
    memberships in `my_memberships`. `role` keeps the studies where the user has that
    role; staff count as admin of every study."""
    mine = Prefetch("memberships", queryset=StudyMembership.objects.filter(user=user), to_attr="my_memberships")
    studies = Study.objects.select_related("rubric").prefetch_related(mine).order_by("slug")
    if user.is_staff:
        if role and role != StudyMembership.Role.ADMIN:
            studies = studies.filter(memberships__user=user, memberships__role=role)
    elif role:
        studies = studies.filter(memberships__user=user, memberships__role=role)
    else:
        studies = studies.filter(memberships__user=user)
    return studies.distinct()


def study_counts(study: Study) -> dict[str, int]:
    return {
        "sources": Source.objects.filter(study=study).count(),
        "summaries": Summary.objects.filter(study=study).count(),
        "batches": Batch.objects.filter(study=study).count(),
        "assignments": Assignment.objects.filter(study=study).exclude(state=Assignment.State.WITHDRAWN).count(),
    }


def sources_for_study(study: Study, *, key: str | None = None, licence: str | None = None) -> QuerySet[Source]:
    sources = (
        Source.objects.filter(study=study)
        .annotate(n_sentences=Count("sentences", distinct=True), n_findings=Count("findings", distinct=True))
        .order_by("key")
    )
    if key:
        sources = sources.filter(key=key)
    if licence:
        sources = sources.filter(licence=licence)
    return sources


def get_source(study: Study, source_uuid) -> Source:
    sentences = Prefetch("sentences", queryset=SourceSentence.objects.order_by("index"))
    findings = Prefetch("findings", queryset=Finding.objects.order_by("index"))
    source = (
        sources_for_study(study).prefetch_related(sentences, findings).filter(uuid=source_uuid).first()
        if source_uuid
        else None
    )
    if source is None:
        raise Http404("No such source.")
    return source


def summaries_for_study(study: Study, **filters: Any) -> QuerySet[Summary]:
    """The study's summaries through selectors.filter_summaries (same filters as a batch)."""
    return selectors.filter_summaries(study=study, **filters).select_related("parent")


def get_summary(study: Study, summary_uuid) -> Summary:
    summary = summaries_for_study(study).filter(uuid=summary_uuid).first()
    if summary is None:
        raise Http404("No such summary.")
    return summary


def claims_for_summary(summary: Summary) -> QuerySet[Claim]:
    return Claim.objects.filter(summary=summary).order_by("index")


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


def get_batch(study: Study, batch_uuid) -> Batch:
    batch = batches_for_study(study).filter(uuid=batch_uuid).first()
    if batch is None:
        raise Http404("No such batch.")
    return batch


def batch_assignments(
    batch: Batch, *, rater: str | None = None, state: str | None = None, summary=None
) -> QuerySet[Assignment]:
    assignments = (
        Assignment.objects.filter(batch=batch)
        .select_related("rater", "summary", "moved_to")
        .order_by("summary__key", "rater__username", "pk")
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


def get_user_by_username(username: str):
    return get_user_model().objects.filter(username=username, is_active=True).first()


def users_by_username(usernames: list[str]) -> dict[str, Any]:
    return {u.username: u for u in get_user_model().objects.filter(username__in=usernames, is_active=True)}


@dataclass(frozen=True)
class AnswerRow:
    """One rater's answers that count for one item of a batch (admins only)."""

    summary: Summary
    rater: str
    assignment: Any
    revision: int
    phase: str
    submitted_at: datetime | None
    rubric_version: int
    answers: dict
    rationales: dict


def batch_answer_rows(
    batch: Batch, *, phase: str = "initial", summary: Summary | None = None, rater: str | None = None
) -> list[AnswerRow]:
    """selectors.batch_answers flattened: one row per (item, rater), by item then rater."""
    by_summary = selectors.batch_answers(batch, phase=phase, summary=summary)
    summaries = Summary.objects.in_bulk(list(by_summary))
    rows = []
    for summary_id, by_rater in by_summary.items():
        for user, (answers, rationales, revision) in by_rater.items():
            if rater and user.get_username() != rater:
                continue
            rows.append(
                AnswerRow(
                    summary=summaries[summary_id],
                    rater=user.get_username(),
                    assignment=revision.assignment.uuid,
                    revision=revision.number,
                    phase=revision.phase,
                    submitted_at=revision.submitted_at,
                    rubric_version=revision.rubric.version,
                    answers=answers,
                    rationales=rationales,
                )
            )
    rows.sort(key=lambda r: (r.summary.key, r.rater))
    return rows


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
