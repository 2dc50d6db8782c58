"""Writes of the rater's answers: opening an item, drafts, submitting, skipping, reopening.

Every change to an assignment goes through `_claim_version`, a compare-and-set on
`Assignment.version`: the writer says which version it read, and a write based on
an older version is refused with StaleWriteError (HTTP 409) instead of overwriting.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone
from django.utils.translation import get_language, gettext, gettext_noop

from annotate.models import (
    Assignment,
    Comparison,
    ComparisonMember,
    Finding,
    RaterPause,
    Rating,
    Rationale,
    Revision,
    Span,
    Summary,
)
from annotate.rubrics import NA, AnswerContext, AnswerValidationError, CleanAnswers, RubricDefinition, stored_per_claim
from annotate.selectors.claims import claim_ids
from annotate.selectors.contents import rubric_definition
from annotate.selectors.queue import latest_revision, revision_answers
from annotate.services import qualification
from core.exceptions import ApplicationError, InvalidStateError, StaleWriteError
from core.text_validation import MAX_SKIP_REASON_CHARS, check_limit, check_text

# One write may add at most this much active time; the browser reports increments.
MAX_ACTIVE_SECONDS_PER_WRITE = 3600


def _check_rater(assignment: Assignment, rater) -> None:
    if assignment.rater_id != rater.pk:
        # Views look assignments up through the rater already; this guards services
        # called from elsewhere.
        raise ApplicationError("This assignment belongs to another rater.")


class PausedError(ApplicationError):
    """The study admin paused this rater (docs/monitoring.md): no answers until resumed."""

    http_status = 403


def _check_not_paused(assignment: Assignment) -> None:
    """Refuse a paused rater's write. get_assignment_for_rater read the pause with the
    assignment (`rater_paused`); an assignment from elsewhere costs one query."""
    paused = getattr(assignment, "rater_paused", None)
    if paused is not None:
        if paused:
            raise PausedError(gettext(PAUSED_MESSAGE))
        return
    if RaterPause.objects.filter(study_id=assignment.study_id, rater_id=assignment.rater_id, resumed_at=None).exists():
        raise PausedError(gettext(PAUSED_MESSAGE))


# In the request's language where it is raised (the API's message too); the pages that show
# it without a refusal translate it themselves.
PAUSED_MESSAGE = gettext_noop(
    "The study admin has paused your work on this study: your answers so far are kept, "
    "and you can go on when they resume you."
)


def _check_editable(assignment: Assignment, rater) -> None:
    _check_rater(assignment, rater)
    _check_not_paused(assignment)
    if assignment.state == Assignment.State.WITHDRAWN:
        raise InvalidStateError(gettext("This item was withdrawn from your queue."))
    if assignment.state in (Assignment.State.SUBMITTED, Assignment.State.SKIPPED):
        raise InvalidStateError(gettext("This item is finished; reopen it before changing your answers."))


def _clamp_active(assignment: Assignment, seconds: Any) -> int:
    """The active seconds one write may add: what the client reports, but never more
    than the wall-clock time since the assignment was last written (or first opened,
    whichever is later), so two tabs, a replayed request or a tampered counter cannot
    make the time on task grow faster than time itself; and at most
    MAX_ACTIVE_SECONDS_PER_WRITE. Whole seconds, rounded down, so that frequent
    autosaves cannot add a rounded-up second each."""
    try:
        value = int(seconds or 0)
    except (TypeError, ValueError, OverflowError):
        raise ApplicationError(
            gettext("active_seconds must be a whole number of seconds."),
            extra={"fields": {"active_seconds": gettext("must be a whole number of seconds")}},
        ) from None
    # Read now, not from `assignment`: the caller may hold an older copy. A write between
    # this read and the compare-and-set changes the version, so that write would fail.
    stamps = Assignment.objects.values_list("updated_at", "first_opened_at").get(pk=assignment.pk)
    since = max(t for t in stamps if t is not None)
    elapsed = int((timezone.now() - since).total_seconds())
    return max(0, min(value, elapsed, MAX_ACTIVE_SECONDS_PER_WRITE))


def _claim_version(
    assignment: Assignment, expected_version: Any, *, writer: tuple[str, int] | None = None, **changes: Any
) -> None:
    """Compare-and-set the assignment's version, applying `changes` in the same UPDATE.

    `writer` (a draft from the rating page: the page's id and the number of this write
    among its writes) also lets a write through when the current version is the same
    page's earlier write: a page may send a second write before the first one's answer
    (the save sent on leaving, then the reloaded page's resend of it), and its newer
    state replaces its own older one. A write from anyone else in between (another tab
    or device, a submit) still makes it stale; an older write of the page arriving last
    is stale too, so it never overwrites a newer one."""
    try:
        expected = int(expected_version)
    except (TypeError, ValueError):
        raise ApplicationError(gettext("version is required: send the version you last read.")) from None
    writer_id, seq = writer or ("", 0)
    claimable = Q(version=expected)
    if writer_id:
        claimable |= Q(draft_writer=writer_id, draft_seq__lt=seq, version=F("draft_version"))
    updated = Assignment.objects.filter(claimable, pk=assignment.pk).update(
        version=F("version") + 1,
        updated_at=timezone.now(),
        draft_writer=writer_id,
        draft_seq=seq,
        draft_version=F("version") + 1,
        **changes,
    )
    if updated != 1:
        current = Assignment.objects.values_list("version", flat=True).get(pk=assignment.pk)
        raise StaleWriteError(
            gettext(
                "This rating was changed elsewhere (another tab or device) since you opened it. "
                "Reload the page to see the stored answers."
            ),
            extra={"current_version": current},
        )
    # Only what the UPDATE changed: a full refresh would also drop the study, rubric,
    # summary and findings the caller fetched with the assignment.
    assignment.refresh_from_db(
        fields=sorted({"version", "updated_at", "draft_writer", "draft_seq", "draft_version", *changes})
    )


def _findings(summary: Summary) -> list[Finding]:
    """The source's findings in order: the prefetched ones when the caller has them
    (get_assignment_for_rater does), else one query."""
    return sorted(summary.source.findings.all(), key=lambda finding: finding.index)


def answer_context(
    summary: Summary, findings: Sequence[Finding] | None = None, definition: RubricDefinition | None = None
) -> AnswerContext:
    """The texts, findings and (when `definition` asks per-claim questions) claims that
    answers about a summary are validated against. Claims cost a query, so only a rubric
    that asks about them reads them."""
    source = summary.source
    findings = _findings(summary) if findings is None else findings
    asks_claims = definition is not None and definition.asks_claims
    return AnswerContext(
        summary_text=summary.text,
        source_text=source.text,
        finding_ids=tuple(str(f.uuid) for f in findings),
        claim_ids=claim_ids(summary) if asks_claims else (),
        compared=compared_texts(summary),
    )


def compared_texts(summary: Summary) -> tuple[tuple[str, str], ...]:
    """A comparison item's summaries as (uuid, text), in the comparison's order; () for a
    summary rated alone. Only an item summary (its generator says so, read without a
    query) costs a query: the submit path of single summaries stays as it was."""
    if summary.generator != Comparison.ITEM_GENERATOR:
        return ()
    rows = ComparisonMember.objects.filter(comparison__item=summary).order_by("index")
    return tuple((str(u), t) for u, t in rows.values_list("summary__uuid", "summary__text"))


def _rating_fields(q, value) -> dict[str, Any]:
    fields: dict[str, Any] = {"score": None, "scale_min": None, "scale_max": None, "value": None}
    if q.is_scale and value != NA:
        low, high = q.scale_bounds
        fields.update(score=value, scale_min=low, scale_max=high)
    else:
        fields["value"] = value
    return fields


_RATING_VALUE_FIELDS = ("score", "scale_min", "scale_max", "value")


Wanted = dict[tuple[str, int | None], tuple[Any, Any, str]]


def _wanted_ratings(clean: CleanAnswers, definition: RubricDefinition, findings: dict[str, int]) -> Wanted:
    """(question, finding id) -> (question, value, rationale text) of every rating `clean` asks for."""
    wanted: Wanted = {}
    for q in definition.questions:
        # A draft's rationale may come before its answer: it is stored on a rating
        # with no value (a submit never gets here with one, see _clean_rationale).
        if q.highlights or (q.key not in clean.values and q.key not in clean.rationales):
            continue
        if q.per_finding:
            values = clean.values.get(q.key) or {}
            texts = clean.rationales.get(q.key) or {}
            for finding_id in sorted(set(values) | set(texts)):
                wanted[(q.key, findings[finding_id])] = (q, values.get(finding_id), texts.get(finding_id, ""))
        elif q.per_claim:
            wanted[(q.key, None)] = (q, stored_per_claim(clean.values.get(q.key), clean.rationales.get(q.key)), "")
        else:
            wanted[(q.key, None)] = (q, clean.values.get(q.key), clean.rationales.get(q.key, ""))
    return wanted


def _stored_ratings(revision: Revision, *, new: bool) -> list[Rating]:
    if new:
        return []
    if "ratings" in getattr(revision, "_prefetched_objects_cache", {}):
        return list(revision.ratings.all())
    return list(Rating.objects.filter(revision=revision).select_related("rationale"))


def _write_ratings(revision: Revision, wanted: Wanted, existing: dict, now) -> dict[tuple[str, int | None], Rating]:
    """Create and update the wanted ratings, one statement each; returns them by key."""
    created: list[Rating] = []
    changed: list[Rating] = []
    ratings: dict[tuple[str, int | None], Rating] = {}
    for (key, finding_id), (q, value, _text) in wanted.items():
        fields = _rating_fields(q, value)
        rating = existing.get((key, finding_id))
        if rating is None:
            rating = Rating(revision=revision, question=key, finding_id=finding_id, **fields)
            created.append(rating)
        elif any(getattr(rating, name) != v for name, v in fields.items()):
            for name, v in fields.items():
                setattr(rating, name, v)
            rating.updated_at = now
            changed.append(rating)
        ratings[(key, finding_id)] = rating
    # The new rows get their ids back (PostgreSQL, and SQLite from 3.35), which the
    # rationales point at.
    Rating.objects.bulk_create(created)
    if changed:
        Rating.objects.bulk_update(changed, [*_RATING_VALUE_FIELDS, "updated_at"])
    return ratings


def _write_rationales(wanted: Wanted, existing: dict, ratings: dict, now) -> None:
    """Add, edit and drop the ratings' rationales, one statement each."""
    add: list[Rationale] = []
    edit: list[Rationale] = []
    drop: list[int] = []
    for key, (_q, _value, text) in wanted.items():
        rating = ratings[key]
        current = getattr(rating, "rationale", None) if key in existing else None
        if text and current is None:
            add.append(Rationale(rating=rating, text=text))
        elif text and current.text != text:
            current.text = text
            current.updated_at = now
            edit.append(current)
        elif not text and current is not None:
            drop.append(current.pk)
    if drop:
        Rationale.objects.filter(pk__in=drop).delete()
    Rationale.objects.bulk_create(add)
    if edit:
        Rationale.objects.bulk_update(edit, ["text", "updated_at"])


def _write_spans(revision: Revision, clean: CleanAnswers, definition: RubricDefinition, *, new: bool) -> None:
    # Spans of a draft are rewritten as a whole; submitted revisions are never touched.
    if not new:
        Span.objects.filter(revision=revision).delete()
    spans = []
    for q in definition.questions:
        if not q.highlights:
            continue
        for index, span in enumerate(clean.values.get(q.key) or []):
            spans.append(build_span(revision=revision, question=q.key, index=index, answer=span))
    Span.objects.bulk_create(spans)


def write_draft_answers(
    revision: Revision,
    clean: CleanAnswers,
    definition: RubricDefinition,
    *,
    findings: dict[str, int] | None = None,
    new: bool = False,
) -> None:
    """Make a draft revision's ratings, rationales and spans equal `clean` (drafts only).

    In a fixed number of queries, whatever the number of answers (the submit
    path does the minimum): the revision's ratings are read once (or not at all for a
    `new` revision; a revision from latest_revision has them prefetched), then each
    kind of change is one bulk statement. `findings` maps a finding's uuid to its id
    (read here when not given)."""
    if findings is None:
        rows = Finding.objects.filter(source__summaries__assignments__revisions=revision)
        findings = {str(f.uuid): f.pk for f in rows}
    wanted = _wanted_ratings(clean, definition, findings)
    existing = {(r.question, r.finding_id): r for r in _stored_ratings(revision, new=new)}
    stale = [r.pk for key, r in existing.items() if key not in wanted]
    if stale:
        Rationale.objects.filter(rating_id__in=stale).delete()
        Rating.objects.filter(pk__in=stale).delete()
    now = timezone.now()
    ratings = _write_ratings(revision, wanted, existing, now)
    _write_rationales(wanted, existing, ratings, now)
    _write_spans(revision, clean, definition, new=new)


def new_answer_rows(
    revision: Revision, clean: CleanAnswers, definition: RubricDefinition, *, findings: dict[str, int] | None = None
) -> tuple[list[Rating], list[Rationale], list[Span]]:
    """The unsaved ratings, rationales and spans of a new revision's `clean` answers, the
    rows write_draft_answers stores for it, for writers that store many revisions at once
    in bulk (datasets.large_study). The rationales refer to their ratings: store those first."""
    ratings: list[Rating] = []
    rationales: list[Rationale] = []
    for (key, finding_id), (q, value, text) in _wanted_ratings(clean, definition, findings or {}).items():
        rating = Rating(revision=revision, question=key, finding_id=finding_id, **_rating_fields(q, value))
        ratings.append(rating)
        if text:
            rationales.append(Rationale(rating=rating, text=text))
    spans = [
        build_span(revision=revision, question=q.key, index=index, answer=span)
        for q in definition.questions
        if q.highlights
        for index, span in enumerate(clean.values.get(q.key) or [])
    ]
    return ratings, rationales, spans


def build_span(*, revision: Revision, question: str, index: int, answer: dict) -> Span:
    """An unsaved Span row from a clean span answer (see RubricDefinition.validate)."""
    link = answer.get("link") or {}
    return Span(
        revision=revision,
        question=question,
        index=index,
        target=answer["target"],
        start=answer["start"],
        end=answer["end"],
        text=answer["text"],
        link_start=link.get("start"),
        link_end=link.get("end"),
        link_text=link.get("text", ""),
        answers=answer["answers"],
        rationale=answer["rationale"],
        summary_uuid=answer.get("summary"),
    )


def _draft_revision(assignment: Assignment) -> tuple[Revision, bool]:
    """The assignment's draft revision (with its answers prefetched), or a new one after
    the newest; and whether it is new."""
    revision = latest_revision(assignment)
    if revision is not None and revision.status == Revision.Status.DRAFT:
        return revision, False
    number = 1 if revision is None else revision.number + 1
    phase = revision.phase if revision is not None else Revision.Phase.INITIAL
    created = Revision.objects.create(
        assignment=assignment,
        number=number,
        rubric=assignment.study.rubric,
        phase=phase,
        assisted=assignment.study.assisted,
        shown_order=assignment.shown_order,
    )
    return created, True


def _write_answers(assignment: Assignment, clean: CleanAnswers, definition, findings: list[Finding]) -> Revision:
    revision, new = _draft_revision(assignment)
    write_draft_answers(revision, clean, definition, findings={str(f.uuid): f.pk for f in findings}, new=new)
    return revision


def open_assignment(*, assignment: Assignment) -> Assignment:
    """Record the first time the rater opened the item (not a change of answers, so
    the version stays). Opening is not starting: the item stays "Not started" until its
    first saved answer (save_draft), so paging through a queue with ] changes no state
    and no progress count."""
    if assignment.first_opened_at is None:
        now = timezone.now()
        Assignment.objects.filter(pk=assignment.pk, first_opened_at__isnull=True).update(first_opened_at=now)
        assignment.refresh_from_db(fields=["first_opened_at"])
    return assignment


def save_draft(
    *,
    assignment: Assignment,
    rater,
    answers: Any,
    rationales: Any = None,
    version: Any,
    active_seconds: Any = 0,
    writer: tuple[str, int] | None = None,
) -> Revision:
    """Store answers in progress, in any partial state: a rationale before its answer,
    a highlight without its sub-answers, unanswered questions. Each given value must
    still be one the rubric allows; completeness and the rubric's rules wait for submit
    (their problems are shown as hints, see draft_hints). `writer` is the rating page's
    (id, write number), see _claim_version.

    The answers are checked before the transaction opens (see submit_rating)."""
    _check_editable(assignment, rater)
    definition = rubric_definition(assignment.study.rubric)
    findings = _findings(assignment.summary)
    clean = definition.validate(
        answers, rationales, final=False, context=answer_context(assignment.summary, findings, definition)
    )
    active = _clamp_active(assignment, active_seconds)
    with transaction.atomic():
        _claim_version(
            assignment,
            version,
            writer=writer,
            state=Assignment.State.IN_PROGRESS,
            active_seconds=F("active_seconds") + active,
        )
        revision = _write_answers(assignment, clean, definition, findings)
        revision.save(update_fields=["updated_at"])
    return revision


def draft_hints(*, assignment: Assignment, answers: Any, rationales: Any = None) -> dict[str, str]:
    """The rubric rules a draft breaks, shown as hints while drafting (never a refusal), in
    the request's language where the rubric translates them (docs/rubric-format.md)."""
    definition = rubric_definition(assignment.study.rubric)
    try:
        clean = definition.validate(
            answers, rationales, final=False, context=answer_context(assignment.summary, definition=definition)
        )
    except AnswerValidationError:
        return {}
    return definition.translated(get_language()).draft_hints(clean)


def submit_rating(
    *, assignment: Assignment, rater, answers: Any, rationales: Any = None, version: Any, active_seconds: Any = 0
) -> Revision:
    """Submit the answers: they must satisfy the rubric in full. The submitted
    revision is never changed afterwards.

    The answers are validated, and the active time read, before the transaction opens:
    on SQLite a transaction holds the one write lock from its start, so only the version
    claim and the writes run under it. Nothing checked outside can go stale unseen: the
    claim is a compare-and-set on the version the rater read, so a write in between makes
    this one fail with StaleWriteError."""
    _check_editable(assignment, rater)
    definition = rubric_definition(assignment.study.rubric)
    findings = _findings(assignment.summary)
    clean = definition.validate(
        answers, rationales, final=True, context=answer_context(assignment.summary, findings, definition)
    )
    active = _clamp_active(assignment, active_seconds)
    now = timezone.now()
    with transaction.atomic():
        _claim_version(
            assignment,
            version,
            state=Assignment.State.SUBMITTED,
            submitted_at=now,
            active_seconds=F("active_seconds") + active,
        )
        revision = _write_answers(assignment, clean, definition, findings)
        revision.status = Revision.Status.SUBMITTED
        revision.submitted_at = now
        revision.save(update_fields=["status", "submitted_at", "updated_at"])
    _after_qualification_item(assignment, rater)
    return revision


def _after_qualification_item(assignment: Assignment, rater) -> None:
    """A finished qualification item may finish the rater's attempt: score it then."""
    if qualification.is_qualification_item(assignment):
        qualification.score_attempt_if_complete(study=assignment.study, rater=rater)


@transaction.atomic
def skip_assignment(*, assignment: Assignment, rater, reason: Any, version: Any) -> Assignment:
    _check_rater(assignment, rater)
    _check_not_paused(assignment)
    reason = reason.strip() if isinstance(reason, str) else ""
    check_text(reason, "reason")
    check_limit(reason, "reason", MAX_SKIP_REASON_CHARS)
    if not reason:
        raise ApplicationError(gettext("Say why you are skipping this item."), extra={"fields": {"reason": "required"}})
    if assignment.state in (Assignment.State.SUBMITTED, Assignment.State.SKIPPED, Assignment.State.WITHDRAWN):
        raise InvalidStateError(gettext("This item is already finished or withdrawn."))
    _claim_version(assignment, version, state=Assignment.State.SKIPPED, skip_reason=reason)
    _after_qualification_item(assignment, rater)
    return assignment


@transaction.atomic
def reopen_rating(*, assignment: Assignment, rater, version: Any) -> Revision | None:
    """Reopen a submitted or skipped item. A submitted rating is copied into a new
    draft revision, so the submitted one stays in the history unchanged."""
    _check_rater(assignment, rater)
    _check_not_paused(assignment)
    if assignment.state not in (Assignment.State.SUBMITTED, Assignment.State.SKIPPED):
        raise InvalidStateError(gettext("Only a submitted or skipped item can be reopened."))
    if qualification.is_qualification_item(assignment):
        # Scored when finished; a new attempt reopens the items itself (qualification.py).
        raise InvalidStateError(gettext("A qualification answer cannot be changed once it is finished."))
    was_submitted = assignment.state == Assignment.State.SUBMITTED
    _claim_version(assignment, version, state=Assignment.State.IN_PROGRESS)
    if not was_submitted:
        return None
    previous = latest_revision(assignment)
    draft = Revision.objects.create(
        assignment=assignment,
        number=previous.number + 1,
        rubric=assignment.study.rubric,
        phase=previous.phase,
        assisted=assignment.study.assisted,
        shown_order=assignment.shown_order,
    )
    answers, rationales = revision_answers(previous)
    definition = rubric_definition(assignment.study.rubric)
    try:
        clean = definition.validate(
            answers, rationales, final=False, context=answer_context(assignment.summary, definition=definition)
        )
    except ApplicationError:
        # The study's rubric changed since the earlier answer; start the draft empty
        # rather than carry over answers the new version would refuse.
        clean = CleanAnswers()
    write_draft_answers(draft, clean, definition, new=True)
    return draft
