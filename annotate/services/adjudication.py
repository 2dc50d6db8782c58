"""Answers that are not one rater's own: discussion notes and consensus answers on a
batch's items, the re-rating round after discussion, and the expected answers of gold
items, attention checks and training items."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from annotate.models import Assignment, Batch, ConsensusAnswer, DiscussionNote, ExpectedAnswer, Revision, Study, Summary
from annotate.rubrics import AnswerValidationError
from annotate.selectors.contents import rubric_definition
from annotate.selectors.queue import latest_revision, revision_answers
from annotate.services.ratings import answer_context, write_draft_answers
from core.exceptions import ApplicationError
from core.text_validation import MAX_EXPLANATION_CHARS, MAX_NOTE_CHARS, MAX_RATIONALE_CHARS, check_limit, check_text


def _invalid(field: str, message: str) -> ApplicationError:
    return ApplicationError(f"{field}: {message}", extra={"fields": {field: message}})


# --- discussion, consensus and re-rating -------------------------------------------------


def add_discussion_note(
    *, batch: Batch, summary: Summary, author, text: str, question: str = "", shared: bool = False
) -> DiscussionNote:
    """A note on an item of the batch, about the item (`question` blank) or one of the
    rubric's questions. A `shared` note is shown to the item's raters (without its
    author) when the item is reopened for the re-rating round; others stay with the panel."""
    check_text(text, "text")
    check_text(question, "question")
    check_limit(text, "text", MAX_NOTE_CHARS)
    text = (text or "").strip()
    if not text:
        raise ApplicationError("The note is empty.", extra={"fields": {"text": "required"}})
    if summary.study_id != batch.study_id:
        raise ApplicationError("The summary is not in this batch's study.")
    question = question or ""
    if question and question not in {q.key for q in rubric_definition(batch.study.rubric).questions}:
        raise _invalid("question", "is not a question of the study's rubric (leave it blank for the whole item)")
    return DiscussionNote.objects.create(
        batch=batch, summary=summary, author=author, text=text, question=question, shared=bool(shared)
    )


@transaction.atomic
def record_consensus(
    *, batch: Batch, summary: Summary, question: str, value: Any, rationale: str, decided_by
) -> ConsensusAnswer:
    """Store the adjudicated answer to one question, validated like a rater's answer.
    It is its own record: the raters' answers are untouched."""
    if summary.study_id != batch.study_id:
        raise ApplicationError("The summary is not in this batch's study.")
    check_text(rationale, "rationale")
    check_limit(rationale, "rationale", MAX_RATIONALE_CHARS)
    rubric = batch.study.rubric
    definition = rubric_definition(rubric)
    try:
        q = definition.question(question)
    except KeyError:
        raise ApplicationError(f"{question!r} is not a question of this rubric.") from None
    if not q.adjudicable:
        raise ApplicationError(
            f"{question!r} takes no consensus answer: per-finding and highlight questions are settled by "
            "discussion notes and the re-rating round."
        )
    clean = definition.validate(
        {question: value},
        {question: rationale} if rationale and definition.question(question).rationale != "none" else None,
        final=False,
        context=answer_context(summary, definition=definition),
    )
    if question not in clean.values:
        raise AnswerValidationError({question: "choose the consensus answer"})
    return ConsensusAnswer.objects.create(
        batch=batch,
        summary=summary,
        question=question,
        value=clean.values[question],
        rationale=(rationale or "").strip(),
        decided_by=decided_by,
        rubric=rubric,
    )


@transaction.atomic
def open_rerating(*, batch: Batch, summaries: Sequence[Summary] | None = None) -> int:
    """Start the re-rating round after discussion: every submitted assignment of the
    batch (or of the given summaries) gets a new draft revision in phase
    `post_discussion`, starting from the rater's own initial answers. The initial
    revisions stay as they were, so analysis can compare both phases."""
    assignments = Assignment.objects.filter(batch=batch, state=Assignment.State.SUBMITTED).select_related(
        "summary__source", "study__rubric"
    )
    if summaries is not None:
        assignments = assignments.filter(summary__in=summaries)
    opened = 0
    for assignment in assignments:
        previous = latest_revision(assignment)
        if previous is None or previous.phase == Revision.Phase.POST_DISCUSSION:
            continue
        Assignment.objects.filter(pk=assignment.pk).update(
            state=Assignment.State.IN_PROGRESS, version=F("version") + 1, updated_at=timezone.now()
        )
        draft = Revision.objects.create(
            assignment=assignment,
            number=previous.number + 1,
            rubric=assignment.study.rubric,
            phase=Revision.Phase.POST_DISCUSSION,
            assisted=assignment.study.assisted,
            shown_order=assignment.shown_order,
        )
        answers, rationales = revision_answers(previous)
        definition = rubric_definition(assignment.study.rubric)
        write_draft_answers(
            draft,
            definition.validate(
                answers, rationales, final=False, context=answer_context(assignment.summary, definition=definition)
            ),
            definition,
        )
        opened += 1
    return opened


# --- quality control --------------------------------------------------------------------


@transaction.atomic
def record_expected_answer(
    *, study: Study, summary: Summary, purpose: str, answers: dict, explanation: str = "", created_by=None
) -> ExpectedAnswer:
    """Store (or replace) the expected answers for one summary; they must be valid
    answers of the study's rubric (a subset of its questions)."""
    if summary.study_id != study.pk:
        raise ApplicationError("The summary is not in this study.")
    if purpose not in ExpectedAnswer.Purpose.values:
        raise ApplicationError(f"purpose must be one of {', '.join(ExpectedAnswer.Purpose.values)}")
    check_text(explanation, "explanation")
    check_limit(explanation, "explanation", MAX_EXPLANATION_CHARS)
    definition = rubric_definition(study.rubric)
    clean = definition.validate(answers, None, final=False, context=answer_context(summary, definition=definition))
    if not clean.values:
        raise AnswerValidationError({"answers": "give at least one expected answer"})
    if ExpectedAnswer.objects.filter(study=study, summary=summary).exclude(purpose=purpose).exists() and (
        Assignment.objects.filter(summary=summary, batch__isnull=False).exists()
    ):
        raise ApplicationError("This summary is already used in batches with another purpose.")
    expected, _ = ExpectedAnswer.objects.update_or_create(
        study=study,
        summary=summary,
        defaults={
            "purpose": purpose,
            "answers": clean.values,
            "explanation": (explanation or "").strip(),
            "rubric": study.rubric,
            "created_by": created_by,
        },
    )
    return expected
