"""Gold items, attention checks and the training round."""

from collections import Counter

import pytest
from django.core.management import CommandError, call_command

from annotate.models import ExpectedAnswer
from annotate.rubrics import AnswerValidationError
from annotate.selectors.batches import quality_report
from annotate.selectors.queue import assignments_for_rater
from annotate.services.adjudication import record_expected_answer
from annotate.services.batches import create_batch
from annotate.services.ratings import reopen_rating, submit_rating
from core.exceptions import ApplicationError
from tests.factories import SummaryFactory


@pytest.fixture
def items(study):
    return [SummaryFactory(source__study=study) for _ in range(12)]


@pytest.mark.django_db
def test_expected_answers_are_validated_against_the_rubric(study, items):
    with pytest.raises(AnswerValidationError):
        record_expected_answer(study=study, summary=items[0], purpose="gold", answers={"overall": 7})
    with pytest.raises(AnswerValidationError):
        record_expected_answer(study=study, summary=items[0], purpose="gold", answers={})
    with pytest.raises(ApplicationError, match="purpose must be one of"):
        record_expected_answer(study=study, summary=items[0], purpose="quiz", answers={"overall": 2})
    e = record_expected_answer(study=study, summary=items[0], purpose="gold", answers={"overall": 2})
    assert e.answers == {"overall": 2} and e.rubric == study.rubric


@pytest.mark.django_db
def test_gold_items_reach_every_rater_and_accuracy_is_tracked(study, items, rater_a, rater_b):
    gold = items[0]
    record_expected_answer(
        study=study, summary=gold, purpose="gold", answers={"overall": 2, "failure_modes": ["hallucination"]}
    )
    batch = create_batch(
        study=study,
        name="b",
        raters=[rater_a, rater_b],
        design="k_raters",
        k=1,
        seed=1,
        gold=[gold],
        filters={"generator": "secret-model-x"},
    )
    for rater in (rater_a, rater_b):
        assert batch.assignments.filter(rater=rater, summary=gold).count() == 1
    answers = {rater_a: {"overall": 2, "failure_modes": ["hallucination"]}, rater_b: {"overall": 3}}
    for rater, given in answers.items():
        a = batch.assignments.get(rater=rater, summary=gold)
        submit_rating(assignment=a, rater=rater, answers=given, version=a.version)
    report = {r.rater: (r.items, r.compared, r.correct, r.accuracy) for r in quality_report(batch)}
    assert report == {rater_a: (1, 2, 2, 1.0), rater_b: (1, 2, 0, 0.0)}


@pytest.mark.django_db
def test_attention_checks_are_mixed_into_each_queue(study, items, rater_a, rater_b):
    checks = [SummaryFactory(source__study=study, key=f"check-{i}") for i in range(2)]
    for c in checks:
        record_expected_answer(
            study=study,
            summary=c,
            purpose="attention",
            answers={"overall": 1},
            explanation="This item asks you to choose 1.",
        )
    regular = [s for s in items]
    batch = create_batch(
        study=study,
        name="att",
        raters=[rater_a, rater_b],
        design="k_raters",
        k=2,
        seed=4,
        attention_every=4,
        filters={"generator": "secret-model-x"},
    )
    for rater in (rater_a, rater_b):
        queue = [a.summary.key for a in assignments_for_rater(rater)]
        positions = [i for i, key in enumerate(queue) if key.startswith("check-")]
        assert len(positions) == 2 and positions[0] > 0  # 12 items / every 4 -> 3 slots, 2 distinct checks
        assert len(set(queue)) == len(queue)  # a check is never given twice to one rater
        assert Counter(k.startswith("check-") for k in queue)[False] == len(regular)
    assert batch.attention_every == 4
    with pytest.raises(ApplicationError, match="no attention checks"):
        ExpectedAnswer.objects.all().delete()
        create_batch(study=study, name="att2", raters=[rater_a], design="k_raters", k=1, seed=4, attention_every=3)


@pytest.mark.django_db
def test_training_round_shows_the_expected_answers_after_submit(client, study, items, rater_a):
    record_expected_answer(
        study=study,
        summary=items[0],
        purpose="training",
        answers={"overall": 2},
        explanation="The second sentence cites a paper not in the context.",
    )
    batch = create_batch(study=study, name="train", raters=[rater_a], design="k_raters", k=1, seed=2, training=True)
    a = batch.assignments.get(summary=items[0])
    client.force_login(rater_a)
    response = client.post(f"/rate/{a.uuid}/", {"action": "submit", "version": a.version, "overall": "4"})
    assert response.status_code == 302 and response["Location"] == f"/rate/{a.uuid}/feedback/"
    page = client.get(response["Location"]).content.decode()
    assert "The second sentence cites a paper not in the context." in page and "different" in page
    other = batch.assignments.exclude(pk=a.pk).first()
    response = client.post(f"/rate/{other.uuid}/", {"action": "submit", "version": other.version, "overall": "4"})
    assert response["Location"] != f"/rate/{other.uuid}/feedback/"  # no expected answers: no feedback page
    assert client.get(f"/rate/{other.uuid}/feedback/").status_code == 404


@pytest.mark.django_db
def test_record_expected_command(study, items, capsys):
    call_command(
        "record_expected",
        "--study",
        study.slug,
        "--summary",
        items[1].key,
        "--purpose",
        "attention",
        "--answers",
        '{"overall": 1}',
    )
    assert "Attention check recorded" in capsys.readouterr().out
    with pytest.raises(CommandError, match="overall: must be one of"):
        call_command("record_expected", "--study", study.slug, "--summary", items[1].key, "--answers", '{"overall": 0}')
    with pytest.raises(CommandError, match="not valid JSON"):
        call_command("record_expected", "--study", study.slug, "--summary", items[1].key, "--answers", "{")


@pytest.mark.django_db
def test_gold_needs_recorded_answers(study, items, rater_a):
    with pytest.raises(ApplicationError, match="has no gold answers"):
        create_batch(study=study, name="g", raters=[rater_a], design="k_raters", k=1, seed=1, gold=[items[0]])


def _submit_on_page(client, assignment, overall: str):
    assignment.refresh_from_db()
    return client.post(
        f"/rate/{assignment.uuid}/", {"action": "submit", "version": assignment.version, "overall": overall}
    )


@pytest.mark.django_db
def test_a_training_batch_never_shows_the_answers_of_gold_items_or_attention_checks(client, study, items, rater_a):
    gold, training = items[0], items[1]
    check = SummaryFactory(source__study=study, key="check-0")
    record_expected_answer(study=study, summary=gold, purpose="gold", answers={"overall": 2}, explanation="GOLD-SECRET")
    record_expected_answer(study=study, summary=check, purpose="attention", answers={"overall": 1}, explanation="CHECK")
    record_expected_answer(
        study=study, summary=training, purpose="training", answers={"overall": 3}, explanation="TRAIN"
    )
    batch = create_batch(
        study=study,
        name="train",
        raters=[rater_a],
        design="k_raters",
        k=1,
        seed=2,
        training=True,
        gold=[gold],
        attention_every=3,
    )
    client.force_login(rater_a)
    for summary, secret in ((gold, "GOLD-SECRET"), (check, "CHECK")):
        a = batch.assignments.get(summary=summary)
        response = _submit_on_page(client, a, "5")
        assert response.status_code == 302 and response["Location"] != f"/rate/{a.uuid}/feedback/"
        assert client.get(f"/rate/{a.uuid}/feedback/").status_code == 404
        assert secret not in client.get(response["Location"], follow=True).content.decode()
    a = batch.assignments.get(summary=training)
    response = _submit_on_page(client, a, "5")
    assert response["Location"] == f"/rate/{a.uuid}/feedback/"
    assert "TRAIN" in client.get(response["Location"]).content.decode()


@pytest.mark.django_db
def test_a_training_item_cannot_become_a_gold_item_once_it_is_in_a_batch(study, items, rater_a):
    # training_feedback relies on this: a summary shown with its answers in training is
    # never a gold item or attention check of a scored batch.
    record_expected_answer(study=study, summary=items[0], purpose="training", answers={"overall": 3})
    create_batch(study=study, name="train", raters=[rater_a], design="k_raters", k=1, seed=2, training=True)
    for purpose in ("gold", "attention"):
        with pytest.raises(ApplicationError, match="already used in batches with another purpose"):
            record_expected_answer(study=study, summary=items[0], purpose=purpose, answers={"overall": 3})
    assert ExpectedAnswer.objects.get(summary=items[0]).purpose == "training"


@pytest.mark.django_db
def test_changing_a_gold_answer_afterwards_does_not_raise_accuracy(client, admin_user, study, items, rater_a):
    gold = items[0]
    record_expected_answer(study=study, summary=gold, purpose="gold", answers={"overall": 2})
    batch = create_batch(
        study=study,
        name="main",
        raters=[rater_a],
        design="k_raters",
        k=1,
        seed=1,
        gold=[gold],
        filters={"generator": "secret-model-x"},
    )
    a = batch.assignments.get(summary=gold)
    client.force_login(rater_a)
    assert _submit_on_page(client, a, "5").status_code == 302  # wrong
    a.refresh_from_db()
    reopened = client.post(f"/rate/{a.uuid}/", {"action": "reopen", "version": a.version})  # "Change my answer"
    assert reopened.status_code == 302
    assert _submit_on_page(client, a, "2").status_code == 302  # corrected to the gold answer
    a.refresh_from_db()
    assert a.state == "submitted" and a.revisions.filter(status="submitted").count() == 2

    [row] = quality_report(batch)
    assert (row.rater, row.items, row.compared, row.correct, row.accuracy) == (rater_a, 1, 1, 0, 0.0)
    client.force_login(admin_user)
    page = client.get(f"/studies/{study.slug}/batches/{batch.uuid}/").content.decode()
    assert "Accuracy on gold items and attention checks" in page
    assert "<td>0%</td>" in page.replace("\n", "").replace("    ", "")


@pytest.mark.django_db
def test_accuracy_counts_the_first_answer_of_each_rater_not_the_latest(study, items, rater_a, rater_b):
    # The reverse case: right first, changed to wrong afterwards, still counts as right.
    gold = items[0]
    record_expected_answer(study=study, summary=gold, purpose="gold", answers={"overall": 2})
    batch = create_batch(
        study=study, name="main", raters=[rater_a, rater_b], design="k_raters", k=1, seed=1, gold=[gold],
        filters={"generator": "secret-model-x"},
    )  # fmt: skip
    a = batch.assignments.get(summary=gold, rater=rater_a)
    submit_rating(assignment=a, rater=rater_a, answers={"overall": 2}, version=a.version)
    a.refresh_from_db()
    reopen_rating(assignment=a, rater=rater_a, version=a.version)
    a.refresh_from_db()
    submit_rating(assignment=a, rater=rater_a, answers={"overall": 4}, version=a.version)
    report = {r.rater: (r.compared, r.correct) for r in quality_report(batch)}
    assert report == {rater_a: (1, 1)}  # rater_b has not submitted: not in the report
