"""Drafts keep any partial state; a submit checks everything, all at once."""

import pytest

from annotate.models import Rating
from annotate.rubrics import AnswerValidationError
from annotate.selectors.queue import latest_revision, revision_answers
from annotate.services.ratings import draft_hints, save_draft, submit_rating
from tests.annotate.factpico import complete_answers, make_factpico_assignment


@pytest.mark.django_db
def test_a_rationale_typed_before_its_score_is_stored_on_a_rating_with_no_value(rater_a):
    assignment, finding = make_factpico_assignment(rater_a)
    save_draft(
        assignment=assignment,
        rater=rater_a,
        answers={},
        rationales={"population": "Typed first.", "evidence": {str(finding.uuid): "Also first."}},
        version=1,
    )
    rating = Rating.objects.get(revision__assignment=assignment, question="population")
    assert (rating.score, rating.value, rating.rationale.text) == (None, None, "Typed first.")
    answers, rationales = revision_answers(latest_revision(assignment))
    assert rationales == {"population": "Typed first.", "evidence": {str(finding.uuid): "Also first."}}
    assert answers == {"population": None, "evidence": {str(finding.uuid): None}}


@pytest.mark.django_db
def test_a_draft_never_raises_a_completeness_or_rule_error(rater_a):
    assignment, _ = make_factpico_assignment(rater_a)
    text = assignment.summary.text
    start = text.index("a dummy pill")
    partial = [
        ({}, {}),
        ({"population": 4}, {}),  # rationale required but missing
        ({}, {"outcome": "no score yet"}),
        ({"added_info": [{"start": start, "end": start + 12, "text": "a dummy pill", "answers": {}}]}, {}),
    ]
    version = 1
    for answers, rationales in partial:
        save_draft(assignment=assignment, rater=rater_a, answers=answers, rationales=rationales, version=version)
        version += 1
    spans = latest_revision(assignment).spans.all()
    assert [(s.text, s.answers) for s in spans] == [("a dummy pill", {})]


@pytest.mark.django_db
def test_a_submit_reports_every_problem_at_once(rater_a):
    assignment, finding = make_factpico_assignment(rater_a)
    answers, rationales = complete_answers(assignment, finding)
    del answers["population"]  # unanswered
    del rationales["intervention"]  # required rationale missing
    rationales["population"] = "A rationale with no answer."
    answers["added_info"][0]["answers"] = {}  # highlight without its sub-answer
    with pytest.raises(AnswerValidationError) as caught:
        submit_rating(assignment=assignment, rater=rater_a, answers=answers, rationales=rationales, version=1)
    assert set(caught.value.errors) == {"population", "intervention", "added_info"}
    assignment.refresh_from_db()
    assert assignment.version == 1  # nothing stored


@pytest.mark.django_db
def test_rule_problems_are_hints_on_a_draft_and_errors_on_submit_alongside_others(assignment_a, rater_a):
    # LitSumm's rule: a hallucination cannot be rated 4 or 5 overall.
    answers = {"overall": 5, "failure_modes": ["hallucination"]}
    save_draft(assignment=assignment_a, rater=rater_a, answers=answers, version=1)
    assert set(draft_hints(assignment=assignment_a, answers=answers)) == {"overall"}
    with pytest.raises(AnswerValidationError) as caught:
        submit_rating(assignment=assignment_a, rater=rater_a, answers={**answers, "feedback": 7}, version=2)
    # The rule is reported together with an unrelated question's problem, not after it.
    assert set(caught.value.errors) == {"overall", "feedback"}
    ok = {"overall": 2, "failure_modes": ["hallucination"], "feedback": "x"}
    assert draft_hints(assignment=assignment_a, answers=ok) == {}
    assert submit_rating(assignment=assignment_a, rater=rater_a, answers=ok, version=2) is not None
