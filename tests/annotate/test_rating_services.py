"""The rater's answers: drafts, submission, revisions, skipping and stale writes."""

import pytest
from django.db import IntegrityError, transaction
from django.db.models import ProtectedError

from annotate.models import Assignment, Rating, Rationale, Revision
from annotate.rubrics import AnswerValidationError
from annotate.selectors.queue import revision_answers
from annotate.services.ratings import reopen_rating, save_draft, skip_assignment, submit_rating
from core.exceptions import ApplicationError, InvalidStateError, StaleWriteError
from tests.conftest import GOOD_ANSWERS
from tests.factories import let_time_pass, revision_history


def stored(assignment):
    return [(r.number, r.status, revision_answers(r)[0]) for r in revision_history(assignment)]


@pytest.mark.django_db
def test_draft_then_submit_stores_one_submitted_revision(assignment_a, rater_a):
    let_time_pass(assignment_a, 60)
    save_draft(assignment=assignment_a, rater=rater_a, answers={"overall": 2}, version=1, active_seconds=30)
    let_time_pass(assignment_a, 60)
    save_draft(
        assignment=assignment_a, rater=rater_a, answers={"overall": 3, "feedback": "x"}, version=2, active_seconds=15
    )
    let_time_pass(assignment_a, 60)
    submit_rating(assignment=assignment_a, rater=rater_a, answers=GOOD_ANSWERS, version=3, active_seconds=5)
    assignment_a.refresh_from_db()
    assert assignment_a.state == Assignment.State.SUBMITTED
    assert assignment_a.submitted_at is not None
    assert assignment_a.active_seconds == 50
    assert assignment_a.version == 4
    assert stored(assignment_a) == [(1, "submitted", GOOD_ANSWERS)]
    rating = Rating.objects.get(revision__assignment=assignment_a, question="overall")
    assert (rating.score, rating.scale_min, rating.scale_max) == (4, 1, 5)
    assert Revision.objects.get(assignment=assignment_a).rubric == assignment_a.study.rubric


@pytest.mark.django_db
def test_submit_requires_a_score_and_stores_nothing(assignment_a, rater_a):
    with pytest.raises(AnswerValidationError) as excinfo:
        submit_rating(assignment=assignment_a, rater=rater_a, answers={"feedback": "fine"}, version=1)
    assert excinfo.value.errors == {"overall": "an answer is required"}
    assignment_a.refresh_from_db()
    assert assignment_a.version == 1 and assignment_a.state == Assignment.State.PENDING
    assert not Revision.objects.exists()


@pytest.mark.django_db
@pytest.mark.parametrize(
    "answers,key",
    [
        ({"overall": 6}, "overall"),
        ({"overall": "four"}, "overall"),
        ({"overall": True}, "overall"),
        ({"overall": 4, "failure_modes": ["made_up"]}, "failure_modes"),
        ({"overall": 4, "failure_modes": "hallucination"}, "failure_modes"),
        ({"overall": 4, "feedback": ["x"]}, "feedback"),
        ({"overall": 4, "colour": "blue"}, "colour"),
    ],
)
def test_invalid_values_are_refused_even_in_drafts(assignment_a, rater_a, answers, key):
    with pytest.raises(AnswerValidationError) as excinfo:
        save_draft(assignment=assignment_a, rater=rater_a, answers=answers, version=1)
    assert key in excinfo.value.errors
    assert not Rating.objects.exists()


@pytest.mark.django_db
def test_reopening_keeps_the_submitted_revision_and_adds_a_new_one(assignment_a, rater_a):
    submit_rating(assignment=assignment_a, rater=rater_a, answers=GOOD_ANSWERS, version=1)
    draft = reopen_rating(assignment=assignment_a, rater=rater_a, version=2)
    # The draft starts from the submitted answers.
    assert revision_answers(draft)[0] == GOOD_ANSWERS
    changed = {"overall": 2, "failure_modes": ["hallucination"], "feedback": "Remove the invented dose."}
    submit_rating(assignment=assignment_a, rater=rater_a, answers=changed, version=3)
    assert stored(assignment_a) == [(1, "submitted", GOOD_ANSWERS), (2, "submitted", changed)]


@pytest.mark.django_db
def test_submitted_answers_cannot_be_changed_without_reopening(assignment_a, rater_a):
    submit_rating(assignment=assignment_a, rater=rater_a, answers=GOOD_ANSWERS, version=1)
    with pytest.raises(InvalidStateError):
        save_draft(assignment=assignment_a, rater=rater_a, answers={"overall": 1}, version=2)
    with pytest.raises(InvalidStateError):
        submit_rating(assignment=assignment_a, rater=rater_a, answers={"overall": 1}, version=2)
    assert stored(assignment_a) == [(1, "submitted", GOOD_ANSWERS)]


@pytest.mark.django_db
def test_stale_version_is_refused_and_changes_nothing(assignment_a, rater_a):
    save_draft(assignment=assignment_a, rater=rater_a, answers={"overall": 3}, version=1)
    # A second tab still holds version 1.
    with pytest.raises(StaleWriteError) as excinfo:
        submit_rating(assignment=assignment_a, rater=rater_a, answers={"overall": 5}, version=1)
    assert excinfo.value.extra == {"current_version": 2}
    assert stored(assignment_a) == [(1, "draft", {"overall": 3})]
    with pytest.raises(ApplicationError, match="version is required"):
        save_draft(assignment=assignment_a, rater=rater_a, answers={"overall": 5}, version=None)


@pytest.mark.django_db
def test_skip_needs_a_reason_and_can_be_reopened(assignment_a, rater_a):
    with pytest.raises(ApplicationError, match="Say why"):
        skip_assignment(assignment=assignment_a, rater=rater_a, reason="  ", version=1)
    skip_assignment(assignment=assignment_a, rater=rater_a, reason="Context is in German", version=1)
    assignment_a.refresh_from_db()
    assert (assignment_a.state, assignment_a.skip_reason) == ("skipped", "Context is in German")
    reopen_rating(assignment=assignment_a, rater=rater_a, version=2)
    assignment_a.refresh_from_db()
    assert assignment_a.state == "in_progress"


@pytest.mark.django_db
def test_a_rater_cannot_write_another_raters_assignment(assignment_a, rater_b):
    with pytest.raises(ApplicationError, match="another rater"):
        save_draft(assignment=assignment_a, rater=rater_b, answers={"overall": 1}, version=1)
    assert not Revision.objects.exists()


@pytest.mark.django_db
def test_active_seconds_per_write_are_bounded(assignment_a, rater_a):
    let_time_pass(assignment_a, 2 * 3600)
    save_draft(assignment=assignment_a, rater=rater_a, answers={}, version=1, active_seconds=10**9)
    save_draft(assignment=assignment_a, rater=rater_a, answers={}, version=2, active_seconds=-50)
    assignment_a.refresh_from_db()
    assert assignment_a.active_seconds == 3600


@pytest.mark.django_db
def test_rationales_are_stored_with_their_rating(assignment_a, rater_a, settings):
    from annotate.services.rubrics import load_rubric

    rubric = load_rubric(
        definition={
            "key": "with-rationale",
            "title": "T",
            "questions": [
                {
                    "key": "overall",
                    "kind": "scale",
                    "prompt": "Score",
                    "required": True,
                    "rationale": "required",
                    "options": [{"value": 1, "label": "bad"}, {"value": 2, "label": "ok"}],
                }
            ],
        }
    )
    study = assignment_a.study
    study.rubric = rubric
    study.save()
    with pytest.raises(AnswerValidationError) as excinfo:
        submit_rating(assignment=assignment_a, rater=rater_a, answers={"overall": 1}, version=1)
    assert excinfo.value.errors == {"overall": "a rationale is required"}
    submit_rating(
        assignment=assignment_a,
        rater=rater_a,
        answers={"overall": 1},
        rationales={"overall": "The dose is invented."},
        version=1,
    )
    rationale = Rationale.objects.get()
    assert rationale.rating.question == "overall" and rationale.text == "The dose is invented."
    assert rationale.rating.revision.rubric == rubric


@pytest.mark.django_db
def test_database_refuses_a_score_outside_its_scale(assignment_a, rater_a):
    revision = Revision.objects.create(assignment=assignment_a, number=1, rubric=assignment_a.study.rubric)
    with pytest.raises(IntegrityError), transaction.atomic():
        Rating.objects.create(revision=revision, question="overall", score=7, scale_min=1, scale_max=5)


@pytest.mark.django_db
def test_human_work_is_protected_from_cascading_deletes(assignment_a, rater_a):
    submit_rating(assignment=assignment_a, rater=rater_a, answers=GOOD_ANSWERS, version=1)
    for obj in (assignment_a.summary, assignment_a.summary.source, assignment_a, rater_a):
        with pytest.raises(ProtectedError), transaction.atomic():
            obj.delete()
    assert Rating.objects.count() == 3
