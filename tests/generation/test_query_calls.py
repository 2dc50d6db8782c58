"""Clinfo.ai writes its search queries in separate calls, each with its own seed
(QUESTIONS_QUERY_CALLS=separate); the default is one call asking for all of them. The
option is part of the answer pipeline's version. The real `openai` client against the
scripted server."""

import pytest
from django.core.management import call_command

from generation.models import AnswerJob, LLMCall
from generation.questions import question_settings
from tests.generation import test_question_pipeline as pipeline
from tests.generation.test_question_pipeline import VERIFY, article_summary, queries, relevance_by_keyword, synthesis

question = pipeline.question  # the fixture: a study with a small corpus and one question

pytestmark = pytest.mark.django_db(transaction=True)


def one_query(request):
    """A query that names the seed it was asked with."""
    return queries(f"aspirin stroke {request.body.get('seed')}")


def model(queries_reply):
    return {
        "factored_verify": VERIFY,
        "question_queries": [queries_reply],
        "question_relevance": [relevance_by_keyword("aspirin")],
        "question_article": [article_summary],
        "question_synthesis": [synthesis("Aspirin reduced recurrent stroke [1].", "Yes [1].")],
    }


def test_three_query_calls_with_different_seeds(serve, question, monkeypatch):
    monkeypatch.setenv("QUESTIONS_QUERY_CALLS", "separate")
    server = serve(steps=model(one_query))
    call_command("answer_questions", "--study", "clinq")
    asked = [r for r in server.requests if r.step == "question_queries"]
    assert [r.body.get("seed") for r in asked] == [1, 2, 3]
    assert all("Write 1 search queries" in r.prompt for r in asked)
    job = AnswerJob.objects.get()
    assert job.status == "ok"
    assert [q["query"] for q in job.retrieval.queries] == ["aspirin stroke 1", "aspirin stroke 2", "aspirin stroke 3"]
    steps = set(LLMCall.objects.filter(prompt_id="question_queries").values_list("step", flat=True))
    assert steps == {"queries:1:1", "queries:1:2", "queries:1:3"}


def test_the_default_is_one_call_and_the_option_is_part_of_the_version(serve, question, monkeypatch):
    server = serve(steps=model(queries("aspirin stroke", "aspirin recurrent")))
    call_command("answer_questions", "--study", "clinq")
    asked = [r for r in server.requests if r.step == "question_queries"]
    assert len(asked) == 1 and "seed" not in asked[0].body and "Write 3 search queries" in asked[0].prompt
    one = question_settings()
    assert "query_calls" not in one.config()  # answers made before the option keep their version
    monkeypatch.setenv("QUESTIONS_QUERY_CALLS", "separate")
    assert question_settings().version != one.version
