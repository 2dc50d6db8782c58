"""Comparison items: one source, two or more summaries, preference questions
whose answers name the preferred summary, the side shown stored with every revision."""

import pytest

from annotate.models import Comparison, Revision, Span, Summary
from annotate.rubrics import AnswerValidationError, RubricDefinition, RubricDefinitionError
from annotate.selectors.contents import rubric_definition
from annotate.selectors.queue import latest_revision, revision_answers
from annotate.services.ratings import reopen_rating, submit_rating
from annotate.services.rubrics import load_builtin_rubric
from annotate.services.summaries import create_comparison
from core.exceptions import ApplicationError
from tests.factories import AssignmentFactory, SourceFactory, StudyFactory, SummaryFactory


@pytest.fixture
def pairwise_study(db):
    return StudyFactory(rubric=load_builtin_rubric(key="pairwise"))


@pytest.fixture
def comparison(pairwise_study):
    source = SourceFactory(study=pairwise_study)
    a = SummaryFactory(source=source, generator="model-a", text="Drug A lowered blood pressure.")
    b = SummaryFactory(source=source, generator="model-b", text="Drug A was well tolerated.")
    return create_comparison(study=pairwise_study, key="cmp-1", summaries=[a, b])


def members(comparison):
    return [m.summary for m in comparison.member_rows.order_by("index")]


def test_comparison_item_stands_for_the_comparison(comparison):
    item = comparison.item
    assert item.generator == Comparison.ITEM_GENERATOR
    assert item.key == "cmp-1"
    assert [m.generator for m in members(comparison)] == ["model-a", "model-b"]


@pytest.mark.parametrize(
    "problem",
    ["one", "two sources", "same generator", "key taken"],
)
def test_create_comparison_refuses_what_cannot_be_compared(pairwise_study, problem):
    source = SourceFactory(study=pairwise_study)
    a = SummaryFactory(source=source, generator="model-a")
    b = SummaryFactory(source=source, generator="model-b")
    key = "cmp"
    if problem == "one":
        summaries = [a]
    elif problem == "two sources":
        summaries = [a, SummaryFactory(study=pairwise_study, generator="model-c")]
    elif problem == "same generator":
        summaries = [a, SummaryFactory(source=source, generator="model-a")]
    else:
        summaries, key = [a, b], a.key
    with pytest.raises(ApplicationError):
        create_comparison(study=pairwise_study, key=key, summaries=summaries)
    assert not Comparison.objects.exists()
    assert not Summary.objects.filter(generator=Comparison.ITEM_GENERATOR).exists()


def _answers(left, right, choice="left", strength="much"):
    preferred = {"left": str(left.uuid), "right": str(right.uuid), "tie": "tie"}[choice]
    value = {"preferred": preferred} | ({"strength": strength} if choice != "tie" else {})
    return {
        "overall": value,
        "faithfulness": value,
        "completeness": {"preferred": "tie"},
        "problems": [
            {
                "summary": str(right.uuid),
                "start": 0,
                "end": 6,
                "text": right.text[:6],
                "answers": {"problem": "misleading"},
            }
        ],
    }


def test_submitted_preference_keeps_side_and_names_the_summary(comparison, rater_a):
    left, right = members(comparison)[::-1]
    assignment = AssignmentFactory(
        summary=comparison.item, rater=rater_a, shown_order=[str(left.uuid), str(right.uuid)]
    )
    submit_rating(assignment=assignment, rater=rater_a, answers=_answers(left, right), version=assignment.version)
    revision = Revision.objects.get(assignment=assignment)
    assert revision.shown_order == [str(left.uuid), str(right.uuid)]
    answers, _ = revision_answers(latest_revision(assignment))
    assert answers["overall"] == {"preferred": str(left.uuid), "strength": "much"}
    assert answers["completeness"] == {"preferred": "tie"}
    span = Span.objects.get(revision=revision)
    assert str(span.summary_uuid) == str(right.uuid) and span.text == right.text[:6]
    assert answers["problems"][0]["summary"] == str(right.uuid)
    # Changing the answer opens a new draft in the same order (the side is kept with it).
    assignment.refresh_from_db()
    draft = reopen_rating(assignment=assignment, rater=rater_a, version=assignment.version)
    assert draft.shown_order == revision.shown_order


@pytest.mark.parametrize(
    "answers, key",
    [
        ({"overall": {"preferred": "someone-else"}}, "overall"),
        ({"overall": {"preferred": "tie", "strength": "much"}}, "overall"),
        ({"overall": {"preferred": "LEFT", "strength": "a lot"}}, "overall"),
        ({"problems": [{"summary": "nope", "start": 0, "end": 2, "text": "Dr"}]}, "problems"),
    ],
)
def test_invalid_preferences_are_refused_naming_the_question(comparison, rater_a, answers, key):
    left, right = members(comparison)
    answers = {
        k: (
            {"preferred": str(left.uuid), "strength": "a lot"} if v == {"preferred": "LEFT", "strength": "a lot"} else v
        )
        for k, v in answers.items()
    }
    assignment = AssignmentFactory(
        summary=comparison.item, rater=rater_a, shown_order=[str(left.uuid), str(right.uuid)]
    )
    with pytest.raises(AnswerValidationError) as caught:
        submit_rating(assignment=assignment, rater=rater_a, answers=answers, version=assignment.version)
    assert key in caught.value.errors
    assert not Revision.objects.filter(assignment=assignment).exists()


def test_required_preferences_are_required_of_comparisons_only(comparison, pairwise_study, rater_a):
    definition = rubric_definition(pairwise_study.rubric)
    left, right = members(comparison)
    assignment = AssignmentFactory(summary=comparison.item, rater=rater_a)
    with pytest.raises(AnswerValidationError) as caught:
        submit_rating(assignment=assignment, rater=rater_a, answers={}, version=assignment.version)
    assert {"overall", "faithfulness", "completeness"} <= set(caught.value.errors)
    # A preference about a summary rated alone is refused: there is nothing to compare.
    single = AssignmentFactory(summary=left, rater=rater_a)
    with pytest.raises(AnswerValidationError) as caught:
        submit_rating(
            assignment=single, rater=rater_a, answers={"overall": {"preferred": "tie"}}, version=single.version
        )
    assert caught.value.errors["overall"] == "is asked of comparisons only"
    assert definition.compares


def test_rubric_refuses_strength_outside_preferences():
    with pytest.raises(RubricDefinitionError):
        RubricDefinition.from_dict(
            {
                "key": "x",
                "title": "X",
                "questions": [
                    {
                        "key": "q",
                        "kind": "choice",
                        "prompt": "P",
                        "strength": True,
                        "options": [{"value": "a", "label": "A"}, {"value": "b", "label": "B"}],
                    }
                ],
            }
        )


def test_summaries_are_protected_by_their_comparison(comparison):
    from django.db.models import ProtectedError

    with pytest.raises(ProtectedError):
        members(comparison)[0].delete()
