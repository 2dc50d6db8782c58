"""The ask page's services and status API: a question in, the steps written on the job as
they run, the cited answer out, and added to the study only when the admin asks. The real
`openai` client against the scripted server; the job runs off the request as it would."""

import html
import json

import pytest
from django.urls import reverse

from annotate.models import Source, StudyMembership, Summary
from annotate.services.members import add_study_member
from core.background import QUEUE_UNAVAILABLE, wait_for_pool
from generation.models import AnswerJob
from generation.tasks import ASK_POOL
from literature.models import Question
from tests.core import test_queue_unavailable
from tests.factories import StudyFactory, UserFactory
from tests.generation.scripted_server import Reply
from tests.generation.test_question_pipeline import CORPUS, VERIFY, article_summary, queries, relevance_by_keyword

pytestmark = pytest.mark.django_db(transaction=True)

broker_down = test_queue_unavailable.broker_down  # the fixture: the broker's URL at a closed port

HOSTILE = 'Aspirin helps [1]. <script>alert("x")</script><img src=x onerror=alert(1)>'


@pytest.fixture
def study():
    study = StudyFactory(slug="ask")
    for key, (title, text) in CORPUS.items():
        Source.objects.create(study=study, key=key, title=title, text=text, licence="CC BY 4.0")
    return study


@pytest.fixture
def admin(study):
    user = UserFactory(username="pi")
    add_study_member(study=study, user=user, role=StudyMembership.Role.ADMIN)
    return user


def steps(synthesis=HOSTILE):
    return {
        "factored_verify": VERIFY,
        "question_queries": [queries("aspirin stroke")],
        "question_relevance": [relevance_by_keyword("aspirin")],
        "question_article": [article_summary],
        "question_synthesis": [Reply(json.dumps({"synthesis": synthesis, "tldr": "Yes [1]."}))],
    }


def ask(client, study, text="Does aspirin prevent recurrent stroke?", **extra):
    return client.post(
        reverse("generation:ask", args=[study.slug]),
        {"question": text, "engine": "local", "regime": "unrestricted", **extra},
    )


def status(client, study, job):
    response = client.get(reverse("api:ask-status", args=[study.slug, job.uuid]))
    assert response.status_code == 200
    return response.json()


def test_a_question_asked_is_answered_and_added_only_when_asked(serve, client, study, admin):
    serve(steps=steps())
    client.force_login(admin)
    response = ask(client, study)
    job = AnswerJob.objects.get()
    assert response.status_code == 302 and response["Location"].endswith(f"/ask/{job.uuid}/")
    wait_for_pool(ASK_POOL, timeout=300)
    s = status(client, study, job)
    assert s["status"] == "ok" and s["finished"] and s["question"] == "Does aspirin prevent recurrent stroke?"
    assert s["queries"] == [{"query": "aspirin stroke", "hits": 2}]
    assert {r["identifier"]: r["relevant"] for r in s["relevance"]} == {"PMC1": True, "PMC2": True}
    assert s["relevance"][0]["reason"] == "mentions aspirin" and s["relevance"][0]["title"] == "Aspirin after stroke"
    assert [a["number"] for a in s["article_summaries"]] == [1, 2]
    assert s["article_summaries"][0]["reference"].startswith("Aspirin after stroke")
    assert s["answer"] == {"synthesis": HOSTILE, "tldr": "Yes [1]."}
    assert s["added"] is False and s["summary"] is None
    # Not in the study yet: no answer to rate, no verification made.
    assert not Summary.objects.filter(study=study).exists()
    question = Question.objects.get(study=study)
    assert question.key.startswith("ask-") and question.metadata == {"asked_by": "pi"}

    # The page shows model text as text, never as markup.
    page = client.get(reverse("generation:asked", args=[study.slug, job.uuid])).content.decode()
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in page
    assert "<script>alert" not in page and "<img src=x" not in page
    assert 'id="ask-add"' in page

    response = client.post(reverse("generation:add-asked", args=[study.slug, job.uuid]))
    assert response.status_code == 302
    wait_for_pool(ASK_POOL, timeout=300)  # the answer's Factored Verification
    summary = Summary.objects.get(study=study)
    assert summary.text == f"{HOSTILE}\n\nTL;DR: Yes [1]."
    assert summary.metadata["answer_job"] == str(job.uuid) and summary.metadata["asked_by"] == "pi"
    assert [c["identifier"] for c in summary.metadata["citations"]] == ["PMC1", "PMC2"]
    assert summary.claims.exists() and summary.metadata["factored"]["claims"] == summary.claims.count()
    s = status(client, study, job)
    assert s["added"] is True and s["summary"] == str(summary.uuid)
    # Adding again changes nothing and says why.
    page = client.post(reverse("generation:add-asked", args=[study.slug, job.uuid]), follow=True).content.decode()
    assert "already in the study" in page and Summary.objects.filter(study=study).count() == 1


def test_the_trace_is_written_while_the_job_runs(serve, client, study, admin):
    """Each step is on the job before the next starts: the synthesis request sees the
    article summaries already in the status API."""
    seen = {}

    def synthesis_after_looking(request):
        from django.db import connection

        try:
            job = AnswerJob.objects.get()
            seen["status"] = status(client, study, job)
        finally:
            connection.close()  # this is the scripted server's thread: leave no session open
        return Reply(json.dumps({"synthesis": "Aspirin helps [1].", "tldr": "Yes [1]."}))

    serve(steps={**steps(), "question_synthesis": [synthesis_after_looking]})
    client.force_login(admin)
    ask(client, study)
    wait_for_pool(ASK_POOL, timeout=300)
    during = seen["status"]
    assert during["status"] == "running" and not during["finished"] and during["answer"] is None
    assert len(during["relevance"]) == 2 and len(during["article_summaries"]) == 2
    assert during["steps_done"] < status(client, study, AnswerJob.objects.get())["steps_done"]


def test_bad_questions_are_refused_with_a_message_and_change_nothing(serve, client, study, admin):
    serve(steps=steps())
    client.force_login(admin)
    for extra, message in (
        ({"question": "   "}, "write a question"),
        ({"question": "x" * 2001}, "at most 2000 characters"),
        ({"engine": "google"}, 'field "engine"'),
        ({"regime": "any"}, 'field "regime"'),
    ):
        response = ask(client, study, **({"text": extra.pop("question")} if "question" in extra else {}), **extra)
        assert response.status_code == 400 and message in html.unescape(response.content.decode())
    assert not Question.objects.exists() and not AnswerJob.objects.exists()


def test_only_the_study_s_admins_ask_and_read(serve, client, study, admin):
    serve(steps=steps())
    client.force_login(admin)
    ask(client, study)
    wait_for_pool(ASK_POOL, timeout=300)
    job = AnswerJob.objects.get()
    rater = UserFactory(username="rater")
    add_study_member(study=study, user=rater, role=StudyMembership.Role.RATER)
    for user in (rater, UserFactory(username="outsider")):
        client.force_login(user)
        assert ask(client, study).status_code == 404
        assert client.get(reverse("generation:asked", args=[study.slug, job.uuid])).status_code == 404
        assert client.get(reverse("api:ask-status", args=[study.slug, job.uuid])).status_code == 404
        assert client.post(reverse("generation:add-asked", args=[study.slug, job.uuid])).status_code == 404
    client.logout()
    assert client.get(reverse("api:ask-status", args=[study.slug, job.uuid])).status_code in (401, 403)
    assert AnswerJob.objects.count() == 1 and not Summary.objects.exists()
    # Another study's admin cannot reach this study's asked question through their own study.
    other = StudyFactory(slug="other")
    add_study_member(study=other, user=admin, role=StudyMembership.Role.ADMIN)
    client.force_login(admin)
    assert client.get(reverse("api:ask-status", args=[other.slug, job.uuid])).status_code == 404


def test_the_add_button_needs_the_csrf_token(serve, study, admin):
    from django.test import Client

    serve(steps=steps())
    client = Client(enforce_csrf_checks=True)
    client.force_login(admin)
    assert ask(client, study).status_code == 403
    assert not AnswerJob.objects.exists()


@pytest.mark.usefixtures("broker_down")
def test_a_question_asked_while_the_queue_is_down_is_a_503_and_a_failed_job(serve, client, study, admin):
    """For the ask page: the broker cannot be reached, so the page says so
    (503, never 500) and the question's job is failed, not left pending for ever."""
    serve(steps=steps())
    client.force_login(admin)
    response = ask(client, study)
    assert response.status_code == 503, response.content[:300]
    assert QUEUE_UNAVAILABLE in response.content.decode().lower()
    job = AnswerJob.objects.get()
    assert job.status == AnswerJob.Status.FAILED and QUEUE_UNAVAILABLE in job.error.lower()
