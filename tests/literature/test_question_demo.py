"""The question demo of `make run`: built offline, idempotent, seen by an admin with
retrieval scores, rateable by a rater who sees the question but not who answered."""

import json

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.utils.html import escape

from analysis.services import compute_study_report
from annotate.models import Assignment, Revision, Source, Study, Summary
from literature.demo import QUESTION_STUDY, QUESTIONS, demo_ratings, question_text
from literature.models import Question, Retrieval, RetrievedArticle

pytestmark = pytest.mark.django_db


@pytest.fixture
def demo(settings):
    settings.DEBUG, settings.DEMO_PASSWORD = True, ""
    call_command("load_question_demo", "--with-answers")
    return Study.objects.get(slug=QUESTION_STUDY)


def snapshot():
    return {
        model.__name__: sorted(model.objects.values_list("pk", flat=True))
        for model in (Question, Retrieval, RetrievedArticle, Source, Summary, Assignment, Revision)
    }


def test_the_demo_is_built_offline_and_loading_twice_changes_nothing(demo, capsys):
    assert demo.rubric.key == "clinfo"
    assert Question.objects.filter(study=demo).count() == QUESTIONS
    assert Source.objects.filter(study=demo, metadata__kind="evidence").count() == QUESTIONS
    # Every answer is labelled as the template's, never as a model's.
    assert set(Summary.objects.filter(study=demo).values_list("generator", flat=True)) == {"demo-template"}
    assert all("not by a model" in s.metadata["demo"] for s in Summary.objects.filter(study=demo))
    before = snapshot()
    call_command("load_question_demo", "--with-answers")
    assert "Question demo already loaded" in capsys.readouterr().out
    assert snapshot() == before
    call_command("load_question_demo", "--with-answers", "--reload")
    assert snapshot() == before
    assert f"{QUESTIONS} questions, 0 new answers, 0 new assignments" in capsys.readouterr().out


def test_demo_questions_come_from_evidence_inference_prompts(demo):
    from django.conf import settings

    path = settings.BASE_DIR / "fixtures" / "evidence_inference" / "abstracts.jsonl"
    first = json.loads(path.open(encoding="utf-8").readline())
    prompt = first["prompts"][0]
    question = Question.objects.get(study=demo, key=f"ei-{prompt['prompt_id']}")
    assert question.text == question_text(prompt)
    assert question.reference_ids == [first["pmcid"]]
    assert prompt["outcome"] in question.gold_answer
    # Its answer quotes the annotated evidence and cites the abstract the quote is from.
    answer = Summary.objects.get(study=demo, metadata__question=str(question.uuid))
    cited = {c["number"]: c["identifier"] for c in answer.metadata["citations"]}
    if first["pmcid"] in cited.values():
        n = next(k for k, v in cited.items() if v == first["pmcid"])
        assert f'"{prompt["evidence"].strip()}" [{n}]' in answer.text


def test_the_admin_sees_answers_retrieval_and_scores(demo, client):
    client.force_login(get_user_model().objects.get(username="admin"))
    dashboard = client.get(f"/studies/{QUESTION_STUDY}/")
    assert b"Questions, retrieval and answers" in dashboard.content
    page = client.get(f"/studies/{QUESTION_STUDY}/questions/")
    assert page.status_code == 200
    text = page.content.decode()
    assert 'id="retrieval-scores"' in text and "unrestricted" in text
    assert text.count('class="card question-card"') == QUESTIONS
    assert "demo-template" in text  # the admin may see who wrote an answer
    # The scores on the page are the retrieval's own: recall of the references retrieved.
    found = sum(
        RetrievedArticle.objects.filter(retrieval__question=q, identifier__in=q.reference_ids).exists()
        for q in Question.objects.filter(study=demo)
    )
    assert f"{found / QUESTIONS:.3f}" in text


def test_a_rater_sees_the_question_and_the_answer_but_not_who_wrote_it(demo, client):
    rater = get_user_model().objects.get(username="rater1")
    client.force_login(rater)
    assert client.get(f"/studies/{QUESTION_STUDY}/questions/").status_code == 404
    assignment = Assignment.objects.filter(study=demo, rater=rater, state=Assignment.State.PENDING).first()
    page = client.get(f"/rate/{assignment.uuid}/").content.decode()
    question = Question.objects.get(uuid=assignment.summary.metadata["question"])
    assert 'id="question-heading"' in page
    assert escape(question.text) in page
    assert "demo-template" not in page and "not by a model" not in page
    assert "local" not in page.split('id="question-heading"')[1].split("</section>")[0]


def test_seeded_ratings_pass_the_rubric_and_the_report_computes(demo):
    submitted = Revision.objects.filter(assignment__study=demo, status=Revision.Status.SUBMITTED).count()
    assert submitted > 0
    report = compute_study_report(study=demo, n_resamples=50)
    assert report["study"] == QUESTION_STUDY
    summary = Summary.objects.filter(study=demo).first()
    answers, rationales = demo_ratings(summary, 0)
    assert set(rationales) == {k for k in answers if k != "feedback"}


def test_the_seeded_ratings_have_active_times(demo):
    # The loader submits them within a second (the service credits none of the reported
    # time): each gets a seeded one, as a rater's page would have reported it.
    seconds = list(Assignment.objects.filter(study=demo, state="submitted").values_list("active_seconds", flat=True))
    assert len(seconds) == 18
    assert min(seconds) >= 60 and max(seconds) < 210


def test_answers_are_scored_against_the_gold_answer_on_the_page(demo, client):
    from stats.answer_metrics import answer_scores, split_answer

    client.force_login(get_user_model().objects.get(username="admin"))
    text = client.get(f"/studies/{QUESTION_STUDY}/questions/").content.decode()
    answer = Summary.objects.filter(study=demo).order_by("key").first()
    question = Question.objects.get(uuid=answer.metadata["question"])
    expected = answer_scores(split_answer(answer.text)[1], question.gold_answer)
    assert text.count('class="data answer-scores"') == QUESTIONS
    assert f"<td>TL;DR</td><td>{expected.rougeL:.3f}</td><td>{expected.bleu:.1f}</td>" in text


def test_the_report_scores_answers_against_gold_and_correlates_with_raters(demo):
    from stats.answer_metrics import scores_by_part

    report = compute_study_report(study=demo, n_resamples=50)
    rows = {row["item"]: row for row in report["metrics"]}
    answer = Summary.objects.filter(study=demo).order_by("key").first()
    question = Question.objects.get(uuid=answer.metadata["question"])
    expected = scores_by_part(answer.text, question.gold_answer)
    assert rows[str(answer.uuid)]["gold_rougeL_tldr"] == pytest.approx(expected["tldr"].rougeL)
    assert rows[str(answer.uuid)]["gold_chrf"] == pytest.approx(expected["combined"].chrf)
    # Correlated with the first scale question of the rubric: is the TL;DR correct.
    assert report["correlation"]["human_question"] == "tldr_correct"
    assert "gold_rougeL_tldr" in report["correlation"]["metric_columns"]
    # And against every question of the clinfo rubric, and their average.
    meta = report["meta_evaluation"]
    assert meta["questions"] == ["tldr_correct", "citations_supported", "evidence_strength", "avg"]
    assert "gold_rougeL_tldr" in meta["summary_level"]
