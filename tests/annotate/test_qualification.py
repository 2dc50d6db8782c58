"""The qualification gate (annotate/services/qualification.py, docs/qualification.md): the pass
rule, attempts, retries, and main items kept from raters until they pass."""

import pytest
from django.http import Http404

from annotate.models import Assignment, QualificationAttempt, QualificationRetry, Revision
from annotate.selectors.queue import (
    assignments_for_rater,
    get_assignment_for_rater,
    next_assignment_for_rater,
    queue_progress,
    training_feedback,
)
from annotate.services.adjudication import record_expected_answer
from annotate.services.batches import create_batch
from annotate.services.qualification import (
    agreement_with_gold,
    allow_qualification_retry,
    qualification_state,
    set_qualification_rule,
)
from annotate.services.ratings import reopen_rating, skip_assignment, submit_rating
from core.exceptions import ApplicationError, InvalidStateError
from tests.factories import SummaryFactory, UserFactory

GOLD = [
    {"overall": 4, "failure_modes": ["hallucination"]},
    {"overall": 2, "failure_modes": ["unsupported"]},
    {"overall": 5},
]


def test_the_pass_rule_worked_by_hand():
    """Three gold items; the rater's answers:

    item  gold                          given                             overall (±1)     failure_modes
    1     overall 4, fm {hallucination} overall 3, fm {hallucination}     |3-4| = 1: yes   same set: yes
    2     overall 2, fm {unsupported}   overall 4, fm {hallucination}     |4-2| = 2: no    no
    3     overall 5 (no fm gold)        skipped: nothing                  no               not compared

    Both questions, tolerance 1 on overall: compared = 2 + 2 + 1 = 5, matched = 2 + 0 + 0 = 2,
    agreement 2/5 = 0.4, so a pass mark of 40 % is met (≥) and one of 41 % is not.
    Tolerance 0: item 1's overall (3 against 4) no longer matches: 1/5 = 0.2.
    Overall only (±1): compared 3 (one per item), matched 1 (item 1): 1/3.
    Failure modes only: compared 2 (item 3 has no gold for it), matched 1: 1/2.
    Tickboxes are a set: the same options in another order match."""
    given = [
        {"overall": 3, "failure_modes": ["hallucination"]},
        {"overall": 4, "failure_modes": ["hallucination"]},
        {},
    ]
    items = list(zip(GOLD, given, strict=True))
    both = agreement_with_gold(items, questions=["overall", "failure_modes"], tolerances={"overall": 1})
    assert (both.matched, both.compared, both.score) == (2, 5, 0.4)
    exact = agreement_with_gold(items, questions=["overall", "failure_modes"], tolerances={})
    assert (exact.matched, exact.compared) == (1, 5)
    overall = agreement_with_gold(items, questions=["overall"], tolerances={"overall": 1})
    assert (overall.matched, overall.compared) == (1, 3)
    modes = agreement_with_gold(items, questions=["failure_modes"], tolerances={})
    assert (modes.matched, modes.compared) == (1, 2)
    reordered = agreement_with_gold(
        [({"failure_modes": ["a", "b"]}, {"failure_modes": ["b", "a"]})], questions=["failure_modes"], tolerances={}
    )
    assert reordered.score == 1.0
    assert agreement_with_gold([], questions=["overall"], tolerances={}).score == 0.0


@pytest.fixture
def gated(study, rater_a, admin_user):
    """A study with two gold items in a qualification batch and three main items; the
    rule: overall within ±1 on at least 50 % of the items, two attempts."""
    gold = [SummaryFactory(source__study=study, key=f"gold-{i}") for i in range(2)]
    for summary, answers in zip(gold, GOLD, strict=False):
        record_expected_answer(
            study=study, summary=summary, purpose="gold", answers=answers, explanation=f"Why {summary.key}."
        )
    main_items = [SummaryFactory(source__study=study, key=f"main-{i}") for i in range(3)]
    # Gold items are never sampled into a main batch: it gets the three main items.
    main = create_batch(study=study, name="main", raters=[rater_a], design="k_raters", k=1, seed=1)
    qual = create_batch(
        study=study, name="screen", kind="qualification", raters=[rater_a], design="k_raters", k=1, seed=2, gold=gold
    )
    set_qualification_rule(
        study=study, threshold=0.5, questions=["overall"], tolerances={"overall": 1}, attempts_allowed=2
    )
    return study, qual, main, main_items


def answer_all(qual, rater, score):
    for a in qual.assignments.filter(rater=rater).order_by("position"):
        a.refresh_from_db()
        submit_rating(assignment=a, rater=rater, answers={"overall": score}, version=a.version)


@pytest.mark.django_db
def test_a_study_without_a_rule_needs_no_qualification(study, rater_a):
    assert qualification_state(study=study, rater=rater_a) == "not_required"


@pytest.mark.django_db
def test_a_qualification_batch_is_its_gold_items_for_every_rater(gated, rater_a):
    study, qual, main, _ = gated
    assert sorted(qual.assignments.values_list("summary__key", flat=True)) == ["gold-0", "gold-1"]
    with pytest.raises(ApplicationError, match="gold"):
        create_batch(study=study, name="empty", kind="qualification", raters=[rater_a], design="k_raters", seed=3)


@pytest.mark.django_db
def test_main_items_stay_hidden_until_the_rater_passes(gated, rater_a, admin_user):
    study, qual, main, _ = gated
    assert qualification_state(study=study, rater=rater_a) == "pending"
    assert {a.batch for a in assignments_for_rater(rater_a)} == {qual}
    hidden = main.assignments.filter(rater=rater_a).first()
    with pytest.raises(Http404):
        get_assignment_for_rater(rater_a, hidden.uuid)
    assert [p.total for p in queue_progress(rater_a)] == [2]

    # Attempt 1: 1 on gold 4 (|1-4| = 3: no) and 5 on gold 2 (|5-2| = 3: no): 0/2, a fail.
    first, second = qual.assignments.filter(rater=rater_a).order_by("position")
    g = {a.summary.key: a for a in (first, second)}
    submit_rating(assignment=g["gold-0"], rater=rater_a, answers={"overall": 1}, version=g["gold-0"].version)
    assert not QualificationAttempt.objects.exists()  # one item left: nothing scored yet
    # A qualification answer is final: it cannot be reopened.
    g["gold-0"].refresh_from_db()
    with pytest.raises(InvalidStateError):
        reopen_rating(assignment=g["gold-0"], rater=rater_a, version=g["gold-0"].version)
    submit_rating(assignment=g["gold-1"], rater=rater_a, answers={"overall": 5}, version=g["gold-1"].version)
    attempt = QualificationAttempt.objects.get()
    assert (attempt.number, attempt.matched, attempt.compared, attempt.passed) == (1, 0, 2, False)
    assert attempt.rule.version == 1
    # One attempt left: the items are back, empty, and the earlier answers kept.
    assert qualification_state(study=study, rater=rater_a) == "pending"
    for a in qual.assignments.all():
        assert a.state == Assignment.State.PENDING
        assert [r.status for r in a.revisions.order_by("number")] == ["submitted", "draft"]
        assert not a.revisions.get(status="draft").ratings.exists()

    # Attempt 2: skip one, answer the other wrongly: 0/2, and no attempts left.
    a0 = qual.assignments.get(summary__key="gold-0")
    skip_assignment(assignment=a0, rater=rater_a, reason="Unsure", version=a0.version)
    a1 = qual.assignments.get(summary__key="gold-1")
    submit_rating(assignment=a1, rater=rater_a, answers={"overall": 5}, version=a1.version)
    assert qualification_state(study=study, rater=rater_a) == "failed"
    assert list(QualificationAttempt.objects.values_list("number", "matched", "passed")) == [
        (1, 0, False),
        (2, 0, False),
    ]
    assert {a.batch for a in assignments_for_rater(rater_a)} == {qual}
    assert next_assignment_for_rater(rater_a, after=a1) is None

    # The admin allows a retry: recorded, and the items reopen.
    retry = allow_qualification_retry(study=study, rater=rater_a, granted_by=admin_user)
    assert QualificationRetry.objects.get() == retry and retry.granted_by == admin_user
    assert qualification_state(study=study, rater=rater_a) == "pending"
    with pytest.raises(ApplicationError, match="failed"):
        allow_qualification_retry(study=study, rater=rater_a, granted_by=admin_user)

    # Attempt 3: 3 on gold 4 (±1: yes) and 3 on gold 2 (±1: yes): 2/2, a pass.
    answer_all(qual, rater_a, 3)
    assert qualification_state(study=study, rater=rater_a) == "passed"
    last = QualificationAttempt.objects.get(number=3)
    assert (last.matched, last.compared, last.score, last.passed) == (2, 2, 1.0, True)
    assert {a.batch for a in assignments_for_rater(rater_a)} == {qual, main}
    assert get_assignment_for_rater(rater_a, hidden.uuid) == hidden
    # The answers that count stay in the history: three submitted revisions per item, at most.
    assert Revision.objects.filter(assignment__batch=qual, status="submitted").count() == 5


@pytest.mark.django_db
def test_raters_are_gated_each_on_their_own(gated, rater_a):
    study, qual, main, _ = gated
    rater_c = UserFactory(username="rater_c")
    create_batch(study=study, name="main-c", raters=[rater_c], design="k_raters", k=1, seed=5)
    # rater_c has no qualification items yet: pending, and sees nothing of the study.
    assert qualification_state(study=study, rater=rater_c) == "pending"
    assert not assignments_for_rater(rater_c).exists()
    answer_all(qual, rater_a, 3)
    assert qualification_state(study=study, rater=rater_a) == "passed"
    assert not assignments_for_rater(rater_c).exists()


@pytest.mark.django_db
def test_feedback_follows_every_qualification_item_with_its_explanation(gated, rater_a):
    study, qual, *_ = gated
    a = qual.assignments.get(summary__key="gold-0")
    expected = training_feedback(a)
    assert expected.answers == {"overall": 4, "failure_modes": ["hallucination"]}
    assert expected.explanation == "Why gold-0."


@pytest.mark.django_db
def test_the_rule_is_checked_and_versioned(gated):
    study, *_ = gated
    with pytest.raises(ApplicationError) as refused:
        set_qualification_rule(study=study, threshold=0.5, questions=["feedback"], tolerances={}, attempts_allowed=1)
    assert "questions" in refused.value.extra["fields"]
    with pytest.raises(ApplicationError) as refused:
        set_qualification_rule(
            study=study, threshold=0.5, questions=["overall"], tolerances={"failure_modes": 1}, attempts_allowed=1
        )
    assert "tolerance_failure_modes" in refused.value.extra["fields"]
    with pytest.raises(ApplicationError) as refused:
        set_qualification_rule(
            study=study, threshold=0.5, questions=["overall"], tolerances={"overall": 5}, attempts_allowed=1
        )
    assert refused.value.extra["fields"] == {"tolerance_overall": "must be a whole number from 0 to 4"}
    with pytest.raises(ApplicationError) as refused:
        set_qualification_rule(study=study, threshold=1.5, questions=["overall"], tolerances={}, attempts_allowed=0)
    assert set(refused.value.extra["fields"]) == {"threshold", "attempts_allowed"}
    same = set_qualification_rule(
        study=study, threshold=0.5, questions=["overall"], tolerances={"overall": 1}, attempts_allowed=2
    )
    assert same.version == 1
    changed = set_qualification_rule(
        study=study, threshold=0.8, questions=["overall", "failure_modes"], tolerances={}, attempts_allowed=2
    )
    assert changed.version == 2 and study.qualification_rules.count() == 2


@pytest.mark.django_db
def test_a_new_rule_settles_raters_who_finished_before_it(study, rater_a, rater_b):
    """rater_a finishes the qualification before there is a rule: the rule scores it at
    once. rater_b fails under one attempt; when the admin allows two, rater_b's items
    reopen for the second attempt (the finished answers are not scored twice)."""
    gold = SummaryFactory(source__study=study, key="gold")
    record_expected_answer(study=study, summary=gold, purpose="gold", answers={"overall": 4})
    qual = create_batch(
        study=study, name="q", kind="qualification", raters=[rater_a, rater_b], design="k_raters", seed=1, gold=[gold]
    )
    a = qual.assignments.get(rater=rater_a)
    submit_rating(assignment=a, rater=rater_a, answers={"overall": 4}, version=a.version)
    assert qualification_state(study=study, rater=rater_a) == "not_required"
    set_qualification_rule(study=study, threshold=1.0, questions=["overall"], tolerances={}, attempts_allowed=1)
    assert qualification_state(study=study, rater=rater_a) == "passed"
    b = qual.assignments.get(rater=rater_b)
    submit_rating(assignment=b, rater=rater_b, answers={"overall": 1}, version=b.version)
    assert qualification_state(study=study, rater=rater_b) == "failed"
    set_qualification_rule(study=study, threshold=1.0, questions=["overall"], tolerances={}, attempts_allowed=2)
    assert qualification_state(study=study, rater=rater_b) == "pending"
    b.refresh_from_db()
    assert b.state == Assignment.State.PENDING
    assert QualificationAttempt.objects.filter(rater=rater_b).count() == 1
    assert list(QualificationAttempt.objects.filter(rater=rater_a).values_list("passed", flat=True)) == [True]
