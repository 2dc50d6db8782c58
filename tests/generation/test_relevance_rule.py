"""Clinfo.ai's relevance rule (§3.2.3): every retrieved article judged; above 35 relevant,
re-ranked with BM25 against the question and the 35 best kept. Today's top-ten cap is an
option (QUESTIONS_RELEVANCE=top). The real `openai` client against the scripted server."""

import json
import math

import pytest
from django.core.management import call_command

from annotate.models import Source
from generation.models import AnswerJob
from literature.engines import bm25_scores
from literature.models import Question
from tests.factories import StudyFactory
from tests.generation.scripted_server import Reply
from tests.generation.test_question_pipeline import VERIFY, article_summary, queries, synthesis

pytestmark = pytest.mark.django_db(transaction=True)

FILLER = " ".join(f"word{i}" for i in range(60))


def corpus(study, strong: int, weak: int):
    """`strong` articles with every term of the question; `weak` ones naming only
    aspirin, once, in a long text. BM25 gives every strong article a higher score than
    every weak one (more query terms, a shorter text): the weak are the ones to drop."""
    for i in range(strong):
        Source.objects.create(
            study=study,
            key=f"S{i:02d}",
            title=f"Aspirin trial {i}",
            text=f"Aspirin to prevent recurrent stroke: trial {i} of adults after stroke.",
        )
    for i in range(weak):
        Source.objects.create(
            study=study, key=f"W{i:02d}", title=f"Cohort {i}", text=f"Aspirin was among the drugs. {FILLER}"
        )
    return Question.objects.create(study=study, key="q1", text="Does aspirin prevent recurrent stroke?")


def everything_relevant(request):
    return Reply(json.dumps({"reason": "about aspirin", "relevant": "yes"}))


def steps():
    return {
        "factored_verify": VERIFY,
        "question_queries": [queries("aspirin")],
        "question_relevance": [everything_relevant],
        "question_article": [article_summary],
        "question_synthesis": [synthesis("Aspirin reduced recurrent stroke [1].", "Yes [1].")],
    }


def answer():
    call_command("answer_questions", "--study", "clinq")
    return AnswerJob.objects.get()


def test_every_article_is_judged_and_above_35_relevant_bm25_keeps_the_best_35(serve, monkeypatch, client):
    monkeypatch.setenv("QUESTIONS_RESULTS_PER_QUERY", "100")
    study = StudyFactory(slug="clinq")
    corpus(study, strong=37, weak=4)  # 41 relevant: 6 above the threshold of 35
    server = serve(steps=steps())
    job = answer()
    assert job.status == "ok"
    articles = list(job.retrieval.articles.all())
    assert len(articles) == 41
    # Every retrieved article judged (not only the best ten), each with its reason.
    assert len([r for r in server.requests if r.step == "question_relevance"]) == 41
    assert all(a.relevant is True and a.reason == "about aspirin" for a in articles)
    # 41 relevant > 35: BM25 against the question keeps 35; the 4 weak ones go first,
    # then the two strong ones ranked lowest (equal BM25 scores go by retrieval rank).
    rerank = job.retrieval.settings["rerank"]
    assert (rerank["relevant"], rerank["kept"]) == (41, 35)
    strong_by_rank = [a.identifier for a in articles if a.identifier.startswith("S")]
    assert set(rerank["dropped"]) == {"W00", "W01", "W02", "W03", *strong_by_rank[-2:]}
    assert max(rerank["scores"][f"W0{i}"] for i in range(4)) < min(rerank["scores"][s] for s in strong_by_rank)
    cited = [c["identifier"] for c in job.summary.metadata["citations"]]
    assert len(cited) == 35 and not set(cited) & set(rerank["dropped"])
    assert len([r for r in server.requests if r.step == "question_article"]) == 35
    assert job.result["rerank"]["dropped"] == rerank["dropped"]
    assert job.config["relevance"] == "all" and job.config["rerank_above"] == 35
    # The questions page says so.
    from annotate.models import Study, StudyMembership
    from annotate.services.members import add_study_member
    from tests.factories import UserFactory

    admin = UserFactory(username="pi")
    add_study_member(study=Study.objects.get(slug="clinq"), user=admin, role=StudyMembership.Role.ADMIN)
    client.force_login(admin)
    page = client.get("/studies/clinq/questions/").content.decode()
    assert "41 articles relevant: re-ranked by BM25 against the question, the 35 best kept; left out: " in page


def test_35_relevant_are_not_reranked(serve, monkeypatch):
    monkeypatch.setenv("QUESTIONS_RESULTS_PER_QUERY", "100")
    corpus(StudyFactory(slug="clinq"), strong=33, weak=2)
    serve(steps=steps())
    job = answer()
    assert "rerank" not in job.retrieval.settings and "rerank" not in job.result
    assert len(job.summary.metadata["citations"]) == 35


def test_the_top_ten_cap_is_an_option(serve, monkeypatch):
    monkeypatch.setenv("QUESTIONS_RESULTS_PER_QUERY", "100")
    monkeypatch.setenv("QUESTIONS_RELEVANCE", "top")
    corpus(StudyFactory(slug="clinq"), strong=12, weak=2)
    server = serve(steps=steps())
    job = answer()
    assert len([r for r in server.requests if r.step == "question_relevance"]) == 10
    decisions = [a.relevant for a in job.retrieval.articles.order_by("rank")]
    assert decisions == [True] * 10 + [None] * 4  # the four below rank ten are not judged
    assert job.config["relevance"] == "top" and job.config["max_articles"] == 10


def test_an_unknown_relevance_rule_is_refused(serve, monkeypatch):
    from django.core.exceptions import ImproperlyConfigured

    monkeypatch.setenv("QUESTIONS_RELEVANCE", "some")
    from generation.questions import question_settings

    with pytest.raises(ImproperlyConfigured, match="QUESTIONS_RELEVANCE must be one of all, top"):
        question_settings()


def test_bm25_scores_follow_lucenes_formula_over_the_articles_themselves():
    """Worked by hand (Lucene's BM25 as Kamphuis et al. define it, k1=1.5, b=0.75): the
    corpus is the articles given, so document frequencies count only them."""
    documents = ["aspirin stroke stroke", "aspirin cohort", "exercise mood"]
    # Stemmed terms: [aspirin, stroke, stroke], [aspirin, cohort], [exercis, mood]; avgdl 7/3.
    avgdl = 7 / 3

    def part(tf, df, dl):
        idf = math.log(1 + (3 - df + 0.5) / (df + 0.5))
        return idf * tf / (tf + 1.5 * (1 - 0.75 + 0.75 * dl / avgdl))

    expected = [part(1, 2, 3) + part(2, 1, 3), part(1, 2, 2), 0.0]
    assert bm25_scores("aspirin for stroke", documents) == pytest.approx(expected, rel=1e-6)
    assert bm25_scores("the of and", documents) == [0.0, 0.0, 0.0]
