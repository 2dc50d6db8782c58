"""The rating page and the comparison page (one item of a rater's queue: a summary rated
alone, or a comparison's summaries side by side), and the page a rater asks the study
admin about an item on. An item page is built from the request's user and the item's
uuid: one call to `annotate.selectors.item.item_reads` makes every query it needs."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.urls import reverse
from django.utils.translation import get_language, gettext

from annotate.languages import activate_study_language
from annotate.models import Assignment, ItemFlag, Revision, Source, Study
from annotate.pages import page_context
from annotate.pages.item_parts import article_summaries, client_data, sentences_html, shown_errors
from annotate.pages.questions import question_parts
from annotate.selectors.item import item_reads
from annotate.selectors.monitor import item_flags
from annotate.selectors.queue import QueuePlace, ShownSummary
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
    """The flag page's flags (the item pages get theirs with the item's reads)."""
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


def rating_page(request, assignment_uuid, *, refused: RefusedPost | None = None) -> RatingPage:
    """The rater's item page, from the request's user and the item's uuid: their latest
    answers (or, after a refused post, what they sent with the problems), the source, the
    questions asked of this item and where the item sits in their queue. The page is in
    the study's language unless the rater picked one (annotate.languages); the rubric's
    texts are in the page's language where the rubric translates them
    (docs/rubric-format.md#translations)."""
    reads = item_reads(request.user, assignment_uuid, stored_answers=refused is None)
    assignment, compared = reads.assignment, reads.compared
    activate_study_language(request, assignment.study)
    definition = reads.definition.translated(get_language())
    if refused is None:
        answers, rationales, errors, part_errors = reads.answers, reads.rationales, {}, {}
    else:
        answers, rationales, part_errors = refused.answers, refused.rationales, refused.part_errors
        errors = shown_errors(reads.definition, definition, refused.errors)
    paused = assignment.rater_paused
    editable = assignment.state in (Assignment.State.PENDING, Assignment.State.IN_PROGRESS) and not paused
    rerating = editable and reads.phase == Revision.Phase.POST_DISCUSSION
    summary, source = assignment.summary, assignment.summary.source
    # Tuples (annotate.models.Sentence), and the list built here, not in a template loop:
    # a source at the size limit can hold ~8,000 sentences (tests/bench/bench_rating_page.py).
    sentences = source.sentences
    findings = list(source.findings.all())
    html = sentences_html(sentences)
    articles = article_summaries(summary, source)
    data = client_data(assignment, definition, answers, sentences, findings, compared)
    prompts = {q.key: q.prompt for q in definition.questions}
    return RatingPage(
        template_name="annotate/rate.html" if compared is None else "annotate/compare.html",
        assignment=assignment,
        study=assignment.study,
        summary_text=summary.text,
        source=source,
        sentence_count=len(sentences),
        sentences_html=html,
        findings=findings,
        claims=reads.recorded_claims,
        article_summaries=articles,
        client_data=data,
        place=reads.place,
        rerating=rerating,
        # With the notes the admin chose to share with the raters (never their author).
        shared_notes=[n | {"question_prompt": prompts.get(n["question"], n["question"])} for n in reads.notes]
        if rerating
        else [],
        form_error=errors.get("__all__", ""),
        has_errors=bool(errors),
        editable=editable,
        locked=qualification.is_qualification_item(assignment),
        api_url=reverse("api:assignment-rating", kwargs={"assignment_uuid": assignment.uuid}),
        digit_question=next((q.key for q in definition.questions if q.shortcut_digits), ""),
        flags=ItemFlags(reads.own_flags, reads.shared_flags, ItemFlag.Kind.choices),
        paused=paused,
        paused_message=gettext(ratings.PAUSED_MESSAGE),
        compared=compared,
        **question_parts(
            definition,
            answers,
            rationales,
            errors,
            findings,
            reads.claims,
            show_answers=not editable,
            part_errors=part_errors,
            compared=compared,
        ),
    )


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
