"""The rating page and the comparison page (one item of a rater's queue: a summary rated
alone, or a comparison's summaries side by side), and the page a rater asks the study
admin about an item on. Built from the rater's own assignment, which the view got
through `annotate.selectors.queue.get_assignment_for_rater`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.urls import reverse
from django.utils.html import escape
from django.utils.safestring import mark_safe
from django.utils.translation import get_language, gettext

from annotate.models import Assignment, ItemFlag, Revision, Source, Study, Summary
from annotate.pages import page_context
from annotate.pages.questions import COMPARISON_KEYS_HINT, error_summary, keys_hint, question_views
from annotate.selectors.claims import claims_asked
from annotate.selectors.contents import claims_for_summary, rubric_definition
from annotate.selectors.monitor import item_flags
from annotate.selectors.queue import (
    QueuePlace,
    ShownSummary,
    latest_revision,
    latest_revision_phase,
    queue_place,
    revision_answers,
    shared_notes,
    shown_summaries,
)
from annotate.services import qualification, ratings


@dataclass(frozen=True)
class RefusedPost:
    """A rating post the page refused: the answers as the rater sent them, shown again
    with the problems (`part_errors`: per finding or claim, AnswerValidationError.parts)
    and the status of the answer (400, or 409 for a stale write)."""

    answers: dict[str, Any]
    rationales: dict[str, Any]
    errors: dict[str, str]
    part_errors: dict[str, list[tuple[str, str]]] = field(default_factory=dict)
    status: int = 400


@dataclass(frozen=True)
class ItemFlags:
    """What the item pages and the flag page show of the rater's questions to the admin:
    their own flags on the item, the answers shared with every rater as guideline notes,
    and the flag form (as posted, when it was refused)."""

    item_flags: list[ItemFlag]
    guideline_notes: list[ItemFlag]
    flag_kinds: list[tuple[str, str]]
    flag_kind: str = ""
    flag_note: str = ""
    flag_error: str = ""


def item_flags_shown(assignment: Assignment, *, kind: str = "", note: str = "", error: str = "") -> ItemFlags:
    own, shared = item_flags(assignment)
    return ItemFlags(own, shared, ItemFlag.Kind.choices, kind, note, error)


@dataclass(frozen=True)
class RatingPage:
    """Everything the rating page (rate.html) or, for a comparison item, the comparison
    page (compare.html) shows, and the JSON its script works from (`client_data`)."""

    template_name: str
    assignment: Assignment
    study: Study
    summary_text: str
    source: Source
    sentence_count: int
    sentences_html: str
    findings: list
    claims: list  # assisted condition only: the pipeline's verdict per claim (never the generator)
    article_summaries: list[tuple[str, str]]
    questions: list[dict[str, Any]]
    client_data: dict[str, Any]
    place: QueuePlace
    rerating: bool  # reopened for a re-rating round after a discussion (docs/batches.md)
    shared_notes: list[dict]
    form_error: str
    error_summary: list[dict]
    has_errors: bool
    editable: bool
    locked: bool  # a qualification item: submitted once, never reopened
    api_url: str
    digit_question: str
    keys_hint: str
    flags: ItemFlags
    paused: bool
    paused_message: str
    compared: list[ShownSummary] | None  # a comparison's summaries, in this rater's order

    def context(self) -> dict[str, Any]:
        """The template's context: the fields, with the flags' fields at the top level
        (the item templates share them with the flag page)."""
        return page_context(self) | page_context(self.flags)


def rating_page(user, assignment: Assignment, *, refused: RefusedPost | None = None) -> RatingPage:
    """The rater's item page: their latest answers (or, after a refused post, what they
    sent with the problems), the source, the questions asked of this item and where the
    item sits in their queue. The rubric's texts are in the page's language where the
    rubric translates them (docs/rubric-format.md#translations)."""
    original = rubric_definition(assignment.study.rubric)
    definition = original.translated(get_language())
    if refused is None:
        revision = latest_revision(assignment)
        answers, rationales = revision_answers(revision)
        phase = revision.phase if revision is not None else None
        errors, part_errors = {}, {}
    else:
        answers, rationales = refused.answers, refused.rationales
        errors, part_errors = _shown_errors(original, definition, refused.errors), refused.part_errors
        phase = latest_revision_phase(assignment)
    paused = assignment.rater_paused
    editable = assignment.state in (Assignment.State.PENDING, Assignment.State.IN_PROGRESS) and not paused
    rerating = editable and phase == Revision.Phase.POST_DISCUSSION
    compared = shown_summaries(assignment)
    summary, source = assignment.summary, assignment.summary.source
    # Tuples (annotate.models.Sentence), and the list built here, not in a template loop:
    # a source at the size limit can hold ~8,000 sentences (tests/bench/bench_rating_page.py).
    sentences = source.sentences
    findings = list(source.findings.all())
    claims = claims_asked(definition, summary)
    return RatingPage(
        template_name="annotate/rate.html" if compared is None else "annotate/compare.html",
        assignment=assignment,
        study=assignment.study,
        summary_text=summary.text,
        source=source,
        sentence_count=len(sentences),
        sentences_html=sentences_html(sentences),
        findings=findings,
        claims=list(claims_for_summary(summary)) if assignment.study.assisted else [],
        article_summaries=article_summaries(summary, source),
        questions=question_views(
            definition,
            answers,
            rationales,
            errors,
            findings,
            claims,
            show_answers=not editable,
            part_errors=part_errors,
            compared=compared,
        ),
        client_data=client_data(assignment, definition, answers, sentences, findings, compared),
        place=queue_place(user, assignment=assignment),
        rerating=rerating,
        # With the notes the admin chose to share with the raters (never their author).
        shared_notes=shared_notes(assignment) if rerating else [],
        form_error=errors.get("__all__", ""),
        error_summary=error_summary(definition, errors, part_errors),
        has_errors=bool(errors),
        editable=editable,
        locked=qualification.is_qualification_item(assignment),
        api_url=reverse("api:assignment-rating", kwargs={"assignment_uuid": assignment.uuid}),
        digit_question=next((q.key for q in definition.questions if q.shortcut_digits), ""),
        keys_hint=keys_hint(definition, findings, claims) if compared is None else COMPARISON_KEYS_HINT,
        flags=item_flags_shown(assignment),
        paused=paused,
        paused_message=gettext(ratings.PAUSED_MESSAGE),
        compared=compared,
    )


def _shown_errors(original, shown, errors: dict) -> dict:
    """A refused post's messages in the page's language: a broken rule's message as the
    rubric translates it, and the messages the catalogue has (gettext leaves others)."""
    rules = zip(original.rules, shown.rules, strict=True)
    rule_messages = {rule.message: translated.message for rule, translated in rules}
    # gettext("") is the catalogue's header, never a message.
    return {key: gettext(rule_messages.get(m, m)) if isinstance(m, str) and m else m for key, m in errors.items()}


def sentences_html(sentences) -> str:
    """The source's sentences as list items. Every text is escaped (`escape`); offsets
    are integers from the database. Plain string building: format_html per sentence
    is slow on a source of thousands of sentences."""
    items = []
    for _, start, end, text, ref in sentences:
        cite = f' <span class="ref">[{escape(ref)}]</span>' if ref else ""
        items.append(
            f'<li dir="auto" data-ref="{escape(ref)}"><span class="sent-text" data-start="{int(start)}" '
            f'data-end="{int(end)}">{escape(text)}</span>{cite}</li>'
        )
    return mark_safe("".join(items))  # noqa: S308 - every piece above is escaped


def article_summaries(summary: Summary, source: Source) -> list[tuple[str, str]]:
    """An answer to a clinical question (its source is the evidence of literature.answers):
    the pipeline's summary of each cited article, [(n, text)], and nothing else of the
    answer's metadata (the model and pipeline never reach the rater)."""
    if (source.metadata or {}).get("kind") != "evidence":
        return []
    raw = (summary.metadata or {}).get("article_summaries") or {}
    if not isinstance(raw, dict):
        return []
    rows = [(str(n), str(text)) for n, text in raw.items() if str(n).isdigit() and isinstance(text, str)]
    return sorted(rows, key=lambda row: int(row[0]))


def client_data(assignment, definition, answers, sentences, findings, compared=None) -> dict:
    """The JSON the rating page's script works from (rendered with json_script). For a
    comparison, its summaries' uuids and texts as shown (never their generators)."""
    extra = {"compared": [{"uuid": c.uuid, "label": c.label, "text": c.text} for c in compared or ()]}
    return extra | {
        "summary_text": assignment.summary.text,
        "source_text": assignment.summary.source.text,
        "sentences": [{"start": start, "end": end, "ref": ref} for _, start, end, _, ref in sentences],
        "findings": [{"id": str(f.uuid), "start": f.start, "end": f.end} for f in findings],
        "span_questions": {q.key: _span_question(q) for q in definition.questions if q.highlights},
        "spans": {q.key: answers.get(q.key) or [] for q in definition.questions if q.highlights},
    }


def _span_question(q) -> dict:
    return {
        "target": q.target,
        "prompt": q.prompt,
        "rationale": q.rationale,
        "sub": [
            {
                "key": sq.key,
                "kind": sq.kind,
                "prompt": sq.prompt,
                "required": sq.required,
                "options": [{"value": o.value, "label": o.label} for o in sq.options],
            }
            for sq in q.span_questions
        ],
    }


@dataclass(frozen=True)
class FlagPage:
    """The page a rater asks the study admin about an item on (flag.html)."""

    assignment: Assignment
    study: Study
    flags: ItemFlags

    def context(self) -> dict[str, Any]:
        return {"assignment": self.assignment, "study": self.study} | page_context(self.flags)


def flag_page(user, assignment: Assignment, *, kind: str = "", note: str = "", error: str = "") -> FlagPage:
    """The flag page of the rater's own item; `kind`, `note` and `error` re-show a refused post."""
    return FlagPage(assignment, assignment.study, item_flags_shown(assignment, kind=kind, note=note, error=error))
