"""The qualification gate (docs/qualification.md).

A study with a pass rule (QualificationRule) gates its raters: until a rater passes, only
the items of the study's qualification batches (and of training batches) reach them; the
main batches stay out of their queue (annotate.selectors.queue.visible_to_rater, which
says the same thing in SQL). When a rater has finished every qualification item, the
attempt is scored against the gold answers and recorded (QualificationAttempt, with the
rule version it was scored under). A failed attempt with attempts left reopens the
qualification items, empty, for the next attempt; with none left the rater is screened
out until a study admin allows a retry (QualificationRetry, recorded).

`qualification_state` is the one decision every caller asks (the queue, the completion
page, the recruitment app's screen-out code).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction
from django.db.models import F, Min

from annotate.models import (
    Assignment,
    Batch,
    ExpectedAnswer,
    QualificationAttempt,
    QualificationRetry,
    QualificationRule,
    Revision,
    Study,
)
from annotate.rubrics import RubricDefinition
from annotate.selectors.batches import answer_matches
from annotate.selectors.contents import rubric_definition
from annotate.selectors.queue import revision_answers, revisions_with_answers
from core.exceptions import ApplicationError

NOT_REQUIRED = "not_required"
PENDING = "pending"
PASSED = "passed"
FAILED = "failed"
State = Literal["not_required", "pending", "passed", "failed"]

MAX_ATTEMPTS = 20


# --- the pass rule, pure ---------------------------------------------------------------------


@dataclass(frozen=True)
class Agreement:
    """How many (item, question) pairs were compared with gold, and how many matched."""

    matched: int
    compared: int

    @property
    def score(self) -> float:
        return self.matched / self.compared if self.compared else 0.0


def _within(expected: Any, given: Any, tolerance: int) -> bool:
    """A scale answer matches when it is within `tolerance` of the gold one; N/A (or any
    answer that is not a number) only matches itself. A per-finding answer (finding ->
    score) matches when every finding's does."""
    if isinstance(expected, dict) and "preferred" not in expected:
        given = given if isinstance(given, dict) else {}
        return all(_within(v, given.get(k), tolerance) for k, v in expected.items())
    if isinstance(expected, int) and isinstance(given, int) and not isinstance(given, bool):
        return abs(expected - given) <= tolerance
    return answer_matches(expected, given)


def agreement_with_gold(
    items: Iterable[tuple[Mapping[str, Any], Mapping[str, Any]]],
    *,
    questions: Iterable[str],
    tolerances: Mapping[str, int],
) -> Agreement:
    """Agreement of a rater's answers with gold: over every item, every chosen question
    that the item's gold answers cover is one comparison; it matches when the answer
    equals the gold one (tickboxes as a set), or, for a question with a tolerance, is
    within that distance of it. An unanswered (or skipped) item's comparisons do not
    match. `items` are (gold answers, given answers) pairs."""
    chosen = list(questions)
    matched = compared = 0
    for expected, given in items:
        for key in chosen:
            if key not in expected:
                continue
            compared += 1
            if key in given and _within(expected[key], given[key], int(tolerances.get(key, 0))):
                matched += 1
    return Agreement(matched=matched, compared=compared)


def matches_gold(expected: Any, given: Any, *, tolerance: int = 0) -> bool:
    """One answer against its gold answer, as the pass rule counts it (the feedback page
    says "same" on the same terms)."""
    return given is not None and _within(expected, given, tolerance)


def scorable(q) -> bool:
    """Questions a pass rule can score: the comparable ones with one answer per item (not
    free text, highlights or per-claim answers)."""
    return q.comparable and not q.highlights and not q.per_claim


# --- reads ------------------------------------------------------------------------------------


def current_rule(study: Study) -> QualificationRule | None:
    return QualificationRule.objects.filter(study=study).order_by("-version").first()


@dataclass(frozen=True)
class Status:
    state: str
    rule: QualificationRule | None
    attempts: list[QualificationAttempt]
    retries: int
    allowed: int

    @property
    def latest(self) -> QualificationAttempt | None:
        return self.attempts[-1] if self.attempts else None

    @property
    def attempts_left(self) -> int:
        return max(0, self.allowed - len(self.attempts))


def qualification_status(*, study: Study, rater) -> Status:
    """The rater's standing at the study's qualification, with what the pages show."""
    rule = current_rule(study)
    if rule is None:
        return Status(NOT_REQUIRED, None, [], 0, 0)
    attempts = list(QualificationAttempt.objects.filter(study=study, rater=rater).order_by("number"))
    retries = QualificationRetry.objects.filter(study=study, rater=rater).count()
    allowed = rule.attempts_allowed + retries
    if any(a.passed for a in attempts):
        state = PASSED  # passing is kept, whatever the rule becomes later
    elif len(attempts) >= allowed:
        state = FAILED
    else:
        state = PENDING
    return Status(state, rule, attempts, retries, allowed)


def qualification_state(*, study: Study, rater) -> State:
    """ "not_required" (the study has no pass rule), "pending" (not passed yet, attempts
    left), "passed" or "failed" (every allowed attempt used and none passed; screened
    out until a study admin allows a retry)."""
    return qualification_status(study=study, rater=rater).state


def qualification_assignments(*, study: Study, rater):
    return Assignment.objects.filter(study=study, rater=rater, batch__kind=Batch.Kind.QUALIFICATION).exclude(
        state=Assignment.State.WITHDRAWN
    )


def is_qualification_item(assignment: Assignment) -> bool:
    return assignment.batch_id is not None and assignment.batch.kind == Batch.Kind.QUALIFICATION


# --- writes -----------------------------------------------------------------------------------


@transaction.atomic
def enrol_in_qualification(*, study: Study, rater) -> list[Assignment]:
    """Give a rater who joined after the qualification batch was built (a panel participant
    arriving through a recruitment link, docs/recruitment.md) the study's qualification
    items, first in their queue. Nothing when the study has no pass rule or the rater
    already has qualification items (their attempts and retries stay as they are)."""
    if (
        current_rule(study) is None
        or Assignment.objects.filter(study=study, rater=rater, batch__kind=Batch.Kind.QUALIFICATION).exists()
    ):
        return []
    items: dict[int, int] = {}  # summary -> its first qualification batch (one live item per summary)
    for batch_id, design in (
        Batch.objects.filter(study=study, kind=Batch.Kind.QUALIFICATION).order_by("pk").values_list("pk", "design")
    ):
        for summary_id in sorted((design or {}).get("gold") or []):
            items.setdefault(summary_id, batch_id)
    # Batches made before their gold items were kept in the design: their live items.
    for batch_id, summary_id in (
        Assignment.objects.filter(study=study, batch__kind=Batch.Kind.QUALIFICATION)
        .exclude(state=Assignment.State.WITHDRAWN)
        .order_by("batch_id", "summary_id")
        .values_list("batch_id", "summary_id")
        .distinct()
    ):
        items.setdefault(summary_id, batch_id)
    first = Assignment.objects.filter(study=study, rater=rater).aggregate(m=Min("position"))["m"]
    start = 0 if first is None else first  # shift the rater's other items after these
    if first is not None:
        Assignment.objects.filter(study=study, rater=rater).update(position=F("position") + len(items))
    return Assignment.objects.bulk_create(
        [
            Assignment(study=study, batch_id=batch_id, summary_id=summary_id, rater=rater, position=start + i)
            for i, (summary_id, batch_id) in enumerate(items.items())
        ]
    )


def _rule_problems(definition: RubricDefinition, questions, tolerances) -> dict[str, str]:
    by_key = {q.key: q for q in definition.questions}
    problems: dict[str, str] = {}
    if not questions:
        problems["questions"] = "choose at least one question to score"
    for key in questions:
        if key not in by_key or not scorable(by_key[key]):
            problems["questions"] = f"{key!r} is not a question this rule can score"
    for key, tolerance in tolerances.items():
        q = by_key.get(key)
        if q is None or not q.is_scale:
            problems[f"tolerance_{key}"] = "a tolerance is for scale questions only"
            continue
        low, high = q.scale_bounds
        if not isinstance(tolerance, int) or isinstance(tolerance, bool) or not 0 <= tolerance <= high - low:
            problems[f"tolerance_{key}"] = f"must be a whole number from 0 to {high - low}"
    return problems


@transaction.atomic
def set_qualification_rule(
    *,
    study: Study,
    threshold: float,
    questions: list[str],
    tolerances: dict[str, int],
    attempts_allowed: int,
    created_by=None,
) -> QualificationRule:
    """Store the study's pass rule as a new version (or return the current one when
    nothing changed). Tolerances of 0 are dropped: an exact match is the default."""
    definition = rubric_definition(study.rubric)
    tolerances = {k: v for k, v in tolerances.items() if v != 0}
    problems = _rule_problems(definition, questions, tolerances)
    if not isinstance(threshold, (int, float)) or not 0 <= threshold <= 1:
        problems["threshold"] = "must be from 0 to 100 %"
    if not isinstance(attempts_allowed, int) or not 1 <= attempts_allowed <= MAX_ATTEMPTS:
        problems["attempts_allowed"] = f"must be from 1 to {MAX_ATTEMPTS}"
    if problems:
        raise ApplicationError(
            "The pass rule is not valid: " + "; ".join(f"{k}: {v}" for k, v in problems.items()),
            extra={"fields": problems},
        )
    # Locks the study's rule rows so two admins saving at once get versions n+1 and n+2.
    current = QualificationRule.objects.select_for_update().filter(study=study).order_by("-version").first()
    wanted = {
        "threshold": float(threshold),
        "questions": sorted(questions),
        "tolerances": dict(sorted(tolerances.items())),
        "attempts_allowed": attempts_allowed,
    }
    if current is not None and all(getattr(current, k) == v for k, v in wanted.items()):
        return current
    rule = QualificationRule.objects.create(
        study=study, version=(current.version + 1) if current else 1, created_by=created_by, **wanted
    )
    _settle_after_rule_change(study)
    return rule


def _settle_after_rule_change(study: Study) -> None:
    """A new rule can leave a rater pending with every qualification item finished: one
    who finished before there was a rule (scored now), or one screened out before the
    attempts allowed went up (the items reopen for the next attempt). Items are scored
    the moment the last one is finished, so finished items with an attempt on record
    were scored already."""
    raters = (
        Assignment.objects.filter(study=study, batch__kind=Batch.Kind.QUALIFICATION)
        .values_list("rater", flat=True)
        .distinct()
    )
    for rater in get_user_model().objects.filter(pk__in=raters):
        status = qualification_status(study=study, rater=rater)
        if status.state != PENDING:
            continue
        open_states = (Assignment.State.PENDING, Assignment.State.IN_PROGRESS)
        if qualification_assignments(study=study, rater=rater).filter(state__in=open_states).exists():
            continue
        if status.attempts:
            _reopen_for_attempt(study=study, rater=rater)
        else:
            score_attempt_if_complete(study=study, rater=rater)


def _given_answers(assignments: list[Assignment]) -> dict[int, dict[str, Any]]:
    """Per assignment id, the answers of this attempt: the newest revision if it is a
    submitted one (a skipped item, or one reopened for a new attempt and not submitted,
    gives none). Three queries for all the items, not three per item."""
    newest: dict[int, Revision] = {}
    revisions = revisions_with_answers().filter(assignment__in=[a.pk for a in assignments])
    for revision in revisions.order_by("assignment_id", "-number"):
        newest.setdefault(revision.assignment_id, revision)
    given = {}
    for a in assignments:
        revision = newest.get(a.pk)
        ok = a.state == Assignment.State.SUBMITTED and revision is not None
        given[a.pk] = revision_answers(revision)[0] if ok and revision.status == Revision.Status.SUBMITTED else {}
    return given


def score_attempt_if_complete(*, study: Study, rater) -> QualificationAttempt | None:
    """After a qualification item is submitted or skipped: when the rater has no
    qualification item left open, score the attempt and record it. A failed attempt with
    attempts left reopens the items for the next one. None when nothing was scored."""
    status = qualification_status(study=study, rater=rater)
    if status.state != PENDING:
        return None
    assignments = list(qualification_assignments(study=study, rater=rater).select_related("batch"))
    open_states = (Assignment.State.PENDING, Assignment.State.IN_PROGRESS)
    if not assignments or any(a.state in open_states for a in assignments):
        return None
    gold = {e.summary_id: e.answers for e in ExpectedAnswer.objects.filter(study=study)}
    given = _given_answers(assignments)
    items = [(gold[a.summary_id], given[a.pk]) for a in assignments if a.summary_id in gold]
    rule = status.rule
    result = agreement_with_gold(items, questions=rule.questions, tolerances=rule.tolerances)
    try:
        with transaction.atomic():
            attempt = QualificationAttempt.objects.create(
                study=study,
                rater=rater,
                number=len(status.attempts) + 1,
                rule=rule,
                matched=result.matched,
                compared=result.compared,
                score=result.score,
                passed=result.compared > 0 and result.score >= rule.threshold,
            )
    except IntegrityError:
        return None  # a concurrent submit of the last item scored this attempt already
    if not attempt.passed and len(status.attempts) + 1 < status.allowed:
        _reopen_for_attempt(study=study, rater=rater)
    return attempt


def _reopen_for_attempt(*, study: Study, rater) -> int:
    """Put every qualification item back in the rater's queue for a new attempt, with an
    empty draft: the earlier answers stay in the history (a new revision, never an edit)."""
    reopened = 0
    for assignment in qualification_assignments(study=study, rater=rater).select_related("study"):
        previous = assignment.revisions.order_by("-number").first()
        updated = Assignment.objects.filter(pk=assignment.pk, version=assignment.version).update(
            state=Assignment.State.PENDING, skip_reason="", version=F("version") + 1
        )
        if not updated:
            continue
        if previous is not None and previous.status == Revision.Status.SUBMITTED:
            Revision.objects.create(
                assignment=assignment,
                number=previous.number + 1,
                rubric=study.rubric,
                phase=previous.phase,
                assisted=study.assisted,
                shown_order=assignment.shown_order,
            )
        reopened += 1
    return reopened


@transaction.atomic
def allow_qualification_retry(*, study: Study, rater, granted_by) -> QualificationRetry:
    """A study admin gives a screened-out rater one more attempt: recorded, and the
    qualification items reopen in the rater's queue."""
    if qualification_state(study=study, rater=rater) != FAILED:
        raise ApplicationError("Only a rater who failed the qualification can be given a retry.")
    retry = QualificationRetry.objects.create(study=study, rater=rater, granted_by=granted_by)
    _reopen_for_attempt(study=study, rater=rater)
    return retry
