"""Clinfo.ai's pipeline end to end: the real `openai` client against the scripted server,
the local BM25 engine over a small corpus, answers stored as rateable summaries."""

import json
import re

import pytest
from django.core.management import CommandError, call_command

from annotate.models import Summary
from generation.models import AnswerJob, LLMCall
from generation.reference_checks import check_references
from literature.answers import cited_numbers
from literature.models import Question, RetrievedArticle
from tests.factories import StudyFactory
from tests.generation.scripted_server import Reply

pytestmark = pytest.mark.django_db(transaction=True)

CORPUS = {
    "PMC1": ("Aspirin after stroke", "Aspirin reduced recurrent stroke in 2000 adults. Bleeding rose slightly."),
    "PMC2": ("Aspirin dose trial", "Low-dose aspirin was as effective as high-dose aspirin for stroke prevention."),
    "PMC3": ("Metformin in diabetes", "Metformin lowered HbA1c in adults with type 2 diabetes."),
    "PMC4": ("Exercise and mood", "Exercise improved depression scores in older adults."),
}


@pytest.fixture
def question():
    from annotate.models import Source

    study = StudyFactory(slug="clinq")
    for key, (title, text) in CORPUS.items():
        Source.objects.create(study=study, key=key, title=title, text=text, licence="CC BY 4.0")
    return Question.objects.create(
        study=study, key="q1", text="Does aspirin prevent recurrent stroke?", reference_ids=["PMC1", "PMC2"]
    )


def queries(*qs):
    return Reply(json.dumps({"queries": list(qs)}))


def relevance_by_keyword(word):
    def reply(request):
        article = request.section("Article")
        yes = word in article.lower()
        return Reply(
            json.dumps({"reason": f"{'mentions' if yes else 'no'} {word}", "relevant": "yes" if yes else "no"})
        )

    return reply


def article_summary(request):
    return Reply("Randomised trial; population adults; result as reported; risk of bias not reported.")


def synthesis(text, tldr):
    return Reply(json.dumps({"synthesis": text, "tldr": tldr}))


def verify(request):
    """Factored Verification's judge: a claim about aspirin is supported, others not."""
    claim = request.section("Claim")
    supported = "aspirin" in claim.lower()
    return Reply(
        json.dumps(
            {"critique": "checked", "quotes": [], "revised_claim": "N/A", "supported": "yes" if supported else "no"}
        )
    )


VERIFY = [verify]


def run(*args):
    call_command("answer_questions", "--study", "clinq", *args)


def test_a_question_is_answered_end_to_end(serve, question, capsys):
    server = serve(
        steps={
            "factored_verify": VERIFY,
            "question_queries": [queries("aspirin stroke", "aspirin recurrent")],
            "question_relevance": [relevance_by_keyword("aspirin")],
            "question_article": [article_summary],
            "question_synthesis": [
                synthesis("Aspirin reduced recurrent stroke [1]. Low doses work too [2].", "Yes [1].")
            ],
        }
    )
    run()
    assert "1 question, local engine, unrestricted: 1 ok" in capsys.readouterr().out
    job = AnswerJob.objects.get()
    assert job.status == "ok" and job.summary is not None
    # Retrieval: both queries recorded, the aspirin trials ranked first, relevance with reasons.
    assert [q["query"] for q in job.retrieval.queries] == ["aspirin stroke", "aspirin recurrent"]
    articles = list(job.retrieval.articles.order_by("rank"))
    assert {a.identifier for a in articles if a.relevant} == {"PMC1", "PMC2"}
    assert all(a.reason for a in articles)
    # Citations numbered by retrieval rank and all resolving to the evidence.
    answer = job.summary
    relevant_by_rank = [a.identifier for a in articles if a.relevant]
    assert [c["identifier"] for c in answer.metadata["citations"]] == relevant_by_rank
    refs = {s.ref for s in answer.source.sentences}
    assert {str(n) for n in cited_numbers(answer.text)} <= refs == {"1", "2"}
    assert check_references(answer.text, refs).checks["real"]
    # Every call traced on the job; the synthesis prompt shows numbered article summaries.
    assert set(LLMCall.objects.filter(answer_job=job).values_list("step", flat=True)) >= {
        "queries:1",
        "synthesis:1",
        "relevance:1",
        "article:1",
    }
    prompt = [r for r in server.requests if r.step == "question_synthesis"][0].prompt
    assert "[1] " in prompt and "[2] " in prompt
    # Blinding: the rater's answer text names no model or pipeline.
    assert "scripted-model" not in answer.text and answer.generator.startswith("scripted-model/clinfo@")
    # Factored Verification of the stored answer: each cited sentence checked against the
    # article(s) it cites only; "Low doses work too" is not about aspirin: unsupported.
    claims = {c.text: c for c in answer.claims.all()}
    assert claims["Aspirin reduced recurrent stroke [1]."].verdict == "supported"
    assert claims["Low doses work too [2]."].verdict == "not_supported"
    verify_prompts = [r for r in server.requests if r.step == "factored_verify"]
    low = next(r for r in verify_prompts if "Low doses" in r.section("Claim"))
    cited = articles[1].source  # [2] is the second relevant article by rank
    assert cited.text.split(".")[0] in low.prompt and articles[0].source.text.split(".")[0] not in low.prompt
    answer.refresh_from_db()
    # "TL;DR: Yes [1]." does not name aspirin either: the scripted judge says unsupported.
    assert claims["TL;DR: Yes [1]."].verdict == "not_supported"
    assert answer.metadata["factored"]["unsupported"] == 2 and answer.metadata["factored"]["claims"] == 3
    assert answer.metadata["factored"]["p_summary"] == 0.0
    assert LLMCall.objects.filter(answer_job=job, step="verify_claim").count() == len(verify_prompts)
    # Running again answers nothing new.
    run()
    assert Summary.objects.filter(study__slug="clinq").count() == 1


def test_zero_hit_queries_are_fed_back_and_results_of_every_try_unioned(serve, question):
    server = serve(
        steps={
            "factored_verify": VERIFY,
            "question_queries": [queries("zzzz qqqq"), queries("aspirin stroke")],
            "question_relevance": [relevance_by_keyword("aspirin")],
            "question_article": [article_summary],
            "question_synthesis": [synthesis("Aspirin helps [1].", "Yes [1].")],
        }
    )
    run()
    second = [r for r in server.requests if r.step == "question_queries"][1].prompt
    assert "These queries found nothing" in second and "- zzzz qqqq" in second
    job = AnswerJob.objects.get()
    assert [(q["query"], q["hits"]) for q in job.retrieval.queries][0] == ("zzzz qqqq", 0)
    assert job.status == "ok"


def test_relevance_fails_closed_by_default_and_open_when_asked(serve, question, monkeypatch):
    serve(
        steps={
            "factored_verify": VERIFY,
            "question_queries": [queries("aspirin stroke")],
            "question_relevance": [Reply("I think so, probably.")],  # no JSON verdict
            "question_article": [article_summary],
            "question_synthesis": [synthesis("Aspirin helps [1].", "Yes [1].")],
        }
    )
    run()
    job = AnswerJob.objects.get()
    assert job.status == "skipped" and job.skip_reason == "no retrieved article was relevant"
    reasons = list(RetrievedArticle.objects.filter(retrieval=job.retrieval).values_list("relevant", "reason"))
    assert reasons and all(r is False and r_.startswith("no usable answer (left out)") for r, r_ in reasons)
    monkeypatch.setenv("QUESTIONS_RELEVANCE_FAIL_OPEN", "1")  # a new pipeline version: a new job
    run()
    opened = AnswerJob.objects.exclude(pk=job.pk).get()
    assert opened.status == "ok"
    assert all(a.relevant for a in opened.retrieval.articles.all())


def test_a_citation_that_does_not_resolve_is_asked_again_then_fails_the_job(serve, question):
    server = serve(
        steps={
            "factored_verify": VERIFY,
            "question_queries": [queries("aspirin stroke")],
            "question_relevance": [relevance_by_keyword("aspirin")],
            "question_article": [article_summary],
            "question_synthesis": [
                synthesis("Aspirin helps [7].", "Yes [1]."),
                synthesis("Aspirin helps [2].", "Yes [1]."),
            ],
        }
    )
    run()
    job = AnswerJob.objects.get()
    assert job.status == "ok" and cited_numbers(job.summary.text) == [2, 1]
    retry = [r for r in server.requests if r.step == "question_synthesis"][1].prompt
    assert re.search(r"citation \[7\] does not resolve", retry)


def test_a_synthesis_that_never_resolves_fails_and_the_next_run_resumes(serve, question, capsys, client):
    serve(
        steps={
            "factored_verify": VERIFY,
            "question_queries": [queries("aspirin stroke")],
            "question_relevance": [relevance_by_keyword("aspirin")],
            "question_article": [article_summary],
            "question_synthesis": [synthesis("Aspirin helps [9].", "Yes [9].")],
        }
    )
    with pytest.raises(CommandError, match="1 question failed"):
        run()
    job = AnswerJob.objects.get()
    assert job.status == "failed" and "[9]" in job.error
    assert not Summary.objects.filter(study__slug="clinq").exists()
    # The questions page says so.
    from django.contrib.auth import get_user_model

    client.force_login(get_user_model().objects.create_superuser("boss", "b@example.org", "pw-for-this-test"))
    page = client.get("/studies/clinq/questions/").content.decode()
    assert "local/unrestricted <strong>failed</strong>" in page and "does not resolve" in page
    serve(
        steps={
            "factored_verify": VERIFY,
            "question_queries": [queries("aspirin stroke")],
            "question_relevance": [relevance_by_keyword("aspirin")],
            "question_article": [article_summary],
            "question_synthesis": [synthesis("Aspirin helps [1].", "Yes [1].")],
        }
    )
    run()
    job.refresh_from_db()
    assert job.status == "ok" and job.tries == 2


def test_restricted_search_keeps_older_articles_and_drops_the_review(serve, question):
    from datetime import date

    from annotate.models import Source

    Source.objects.filter(key="PMC1").update(metadata={"year": 2010})
    Source.objects.filter(key="PMC2").update(metadata={"year": 2022}, external_ids={"pmid": "777"})
    question.published_on, question.exclude_ids = date(2020, 1, 1), ["777"]
    question.save()
    serve(
        steps={
            "factored_verify": VERIFY,
            "question_queries": [queries("aspirin stroke")],
            "question_relevance": [relevance_by_keyword("aspirin")],
            "question_article": [article_summary],
            "question_synthesis": [synthesis("Aspirin helps [1].", "Yes [1].")],
        }
    )
    run("--regime", "restricted")
    job = AnswerJob.objects.get()
    assert [a.identifier for a in job.retrieval.articles.all()] == ["PMC1"]
    run("--regime", "exclude-source")
    dropped = AnswerJob.objects.get(regime="exclude-source")
    assert "PMC2" not in {a.identifier for a in dropped.retrieval.articles.all()}
    assert dropped.retrieval.excluded_hits == ["PMC2"]


def test_the_trace_of_an_answer_job_is_in_the_admin(serve, question, client):
    from django.contrib.auth import get_user_model

    serve(
        steps={
            "factored_verify": VERIFY,
            "question_queries": [queries("aspirin stroke")],
            "question_relevance": [relevance_by_keyword("aspirin")],
            "question_article": [article_summary],
            "question_synthesis": [synthesis("Aspirin <b>helps</b> [1].", "Yes [1].")],
        }
    )
    run()
    job = AnswerJob.objects.get()
    admin = get_user_model().objects.create_superuser("boss", "boss@example.org", "pw-for-admin-test")
    client.force_login(admin)
    page = client.get(f"/admin/generation/answerjob/{job.pk}/change/")
    assert page.status_code == 200
    text = page.content.decode()
    assert "queries:1" in text and "relevance:1" in text  # every call, inline
    assert "<b>helps</b>" not in text  # model text escaped
    assert client.get("/admin/generation/answerjob/").status_code == 200


def test_a_question_is_answered_from_pubmed_end_to_end(serve, monkeypatch):
    """The Clinfo pipeline with the pubmed engine: the real openai client and the real NCBI
    client, each against its scripted server."""
    from tests.literature.ncbi_server import NcbiServer, esearch_xml
    from tests.literature.ncbi_server import Reply as NcbiReply
    from tests.literature.test_pubmed import library

    LLMReply = Reply

    study = StudyFactory(slug="pm-answer")
    Question.objects.create(study=study, key="q", text="Does aspirin prevent stroke?", reference_ids=["101"])
    serve(
        steps={
            "factored_verify": VERIFY,
            "question_queries": [LLMReply(json.dumps({"queries": ["aspirin[tiab] AND stroke[tiab]"]}))],
            "question_relevance": [
                lambda r: LLMReply(
                    json.dumps({"reason": "r", "relevant": "yes" if "Aspirin after" in r.prompt else "no"})
                )
            ],
            "question_article": [LLMReply("RCT, adults, aspirin reduced recurrence; bias not reported.")],
            "question_synthesis": [LLMReply(json.dumps({"synthesis": "Aspirin helps [1].", "tldr": "Yes [1]."}))],
        }
    )
    with NcbiServer(replies={"esearch.fcgi": [NcbiReply(esearch_xml(["103", "101"]))]}, **library()) as server:
        monkeypatch.setenv("NCBI_EUTILS_URL", server.base_url)
        call_command("answer_questions", "--study", "pm-answer", "--engine", "pubmed")
    job = AnswerJob.objects.get()
    assert job.status == "ok", job.error
    assert [(a.identifier, a.relevant) for a in job.retrieval.articles.order_by("rank")] == [
        ("103", False),
        ("101", True),
    ]
    citation = job.summary.metadata["citations"][0]
    assert citation["identifier"] == "101" and citation["reference"].startswith("Smith J, Doe A. Aspirin after stroke")


def test_a_verification_that_fails_is_recorded_and_the_answer_stays(serve, question):
    serve(
        steps={
            "factored_verify": [Reply(status=503, content="overloaded")],
            "question_queries": [queries("aspirin stroke")],
            "question_relevance": [relevance_by_keyword("aspirin")],
            "question_article": [article_summary],
            "question_synthesis": [synthesis("Aspirin helps [1].", "Yes [1].")],
        }
    )
    run()
    job = AnswerJob.objects.get()
    assert job.status == "ok" and job.summary is not None
    assert "verification_error" in job.result and "503" in job.result["verification_error"]
    assert not job.summary.claims.exists() and "factored" not in job.summary.metadata


def test_the_rater_sees_the_article_summaries_but_not_the_model(serve, question, client):
    from tests.factories import AssignmentFactory, UserFactory

    serve(
        steps={
            "factored_verify": VERIFY,
            "question_queries": [queries("aspirin stroke")],
            "question_relevance": [relevance_by_keyword("aspirin")],
            "question_article": [Reply("Trial of <em>aspirin</em> in 2000 adults.")],
            "question_synthesis": [synthesis("Aspirin helps [1].", "Yes [1].")],
        }
    )
    run()
    answer = AnswerJob.objects.get().summary
    rater = UserFactory(username="judge")
    assignment = AssignmentFactory(summary=answer, rater=rater)
    client.force_login(rater)
    page = client.get(f"/rate/{assignment.uuid}/").content.decode()
    assert "Summaries of the articles the answer was written from" in page
    assert "[1] Trial of &lt;em&gt;aspirin&lt;/em&gt; in 2000 adults." in page
    assert "scripted-model" not in page and "clinfo@" not in page and "unrestricted" not in page
