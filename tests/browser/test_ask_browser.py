"""A study admin asks a clinical question in a real browser and watches Clinfo.ai's
pipeline answer it: the queries, then each relevance decision with its reason, then the
article summaries appear while the job runs (the page polls the status API), then the cited
answer; model text shows as text, never as markup; a button adds question and answer to
the study for rating. The real openai client against the scripted LLM server and the real
NCBI client against the scripted E-utilities server."""

import json
import threading

import pytest
from playwright.sync_api import expect

from annotate.models import StudyMembership, Summary
from annotate.services.members import add_study_member
from core.background import wait_for_pool
from generation.models import AnswerJob
from generation.tasks import ASK_POOL
from tests.browser.conftest import log_in
from tests.factories import PASSWORD, UserFactory
from tests.generation.scripted_server import Reply
from tests.generation.test_question_pipeline import VERIFY
from tests.literature.ncbi_server import NcbiServer, esearch_xml
from tests.literature.ncbi_server import Reply as NcbiReply
from tests.literature.test_pubmed import library

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

HOSTILE_SYNTHESIS = "Aspirin reduced recurrence [1]. <b>Bold</b><img src=x onerror=\"document.title='pwned'\">"


def test_an_admin_asks_watches_the_steps_and_adds_the_answer(page, serve, monkeypatch, settings, request):
    from annotate.services.studies import ensure_study

    settings.DEBUG = True
    study, _ = ensure_study(slug="asking", title="Asking", rubric_key="clinfo")
    admin = UserFactory(username="pi")
    add_study_member(study=study, user=admin, role=StudyMembership.Role.ADMIN)
    summaries_shown = threading.Event()
    request.addfinalizer(summaries_shown.set)  # a failing test leaves no server thread waiting

    def synthesis(request):
        # The answer waits until the browser has shown the article summaries: the steps
        # are on the page while the job still runs.
        summaries_shown.wait(timeout=600)
        return Reply(json.dumps({"synthesis": HOSTILE_SYNTHESIS, "tldr": "Yes, <i>probably</i> [1]."}))

    serve(
        steps={
            "factored_verify": VERIFY,
            "question_queries": [Reply(json.dumps({"queries": ["aspirin[tiab] AND stroke[tiab]"]}))],
            "question_relevance": [
                lambda r: Reply(
                    json.dumps(
                        {
                            "reason": "a trial of aspirin <em>after</em> stroke"
                            if "Aspirin after" in r.prompt
                            else "a cohort, not about recurrence",
                            "relevant": "yes" if "Aspirin after" in r.prompt else "no",
                        }
                    )
                )
            ],
            "question_article": [Reply("RCT of <u>2000</u> adults; aspirin reduced recurrence.")],
            "question_synthesis": [synthesis],
        }
    )
    with NcbiServer(replies={"esearch.fcgi": [NcbiReply(esearch_xml(["103", "101"]))]}, **library()) as ncbi:
        monkeypatch.setenv("NCBI_EUTILS_URL", ncbi.base_url)
        log_in(page, "pi", PASSWORD)
        page.goto(f"/studies/{study.slug}/")
        page.get_by_role("link", name="Ask a question").click()
        page.get_by_label("Clinical question").fill("Does aspirin prevent recurrent stroke?")
        page.get_by_label("Search").select_option("pubmed")
        page.get_by_role("button", name="Ask").click()
        page.wait_for_url("**/ask/*/")
        page.evaluate("window.__sameDocument = true")  # gone if the page reloads

        # The steps appear while the job runs, without a reload.
        expect(page.locator("#ask-queries")).to_contain_text("aspirin[tiab] AND stroke[tiab]", timeout=120_000)
        expect(page.locator("#ask-queries")).to_contain_text("2 hits")
        relevance = page.locator("#ask-relevance tbody tr")
        expect(relevance).to_have_count(2, timeout=120_000)
        expect(relevance.nth(1)).to_contain_text("a trial of aspirin <em>after</em> stroke")
        expect(relevance.nth(0)).to_contain_text("a cohort, not about recurrence")
        expect(page.locator("#ask-summaries")).to_contain_text("RCT of <u>2000</u> adults", timeout=120_000)
        expect(page.locator("#ask-summaries")).to_contain_text("Smith J, Doe A. Aspirin after stroke")
        expect(page.locator("#ask-answer")).to_have_count(0)  # the synthesis is still being written
        assert page.evaluate("window.__sameDocument === true")
        summaries_shown.set()

        # The cited answer, its markup shown as text.
        synthesis_text = page.locator("#ask-synthesis")
        expect(synthesis_text).to_have_text(HOSTILE_SYNTHESIS, timeout=120_000)
        expect(page.locator("#ask-tldr")).to_have_text("TL;DR: Yes, <i>probably</i> [1].")
        assert page.locator("#ask-progress b, #ask-progress img, #ask-progress em, #ask-progress u").count() == 0
        assert page.title() != "pwned"
        expect(page.locator("#ask-references")).to_contain_text("[1] Smith J, Doe A. Aspirin after stroke")
        assert not Summary.objects.filter(study=study).exists()

        page.get_by_role("button", name="Add question and answer to the study for rating").click()
        expect(page.locator("#ask-added")).to_be_visible()
        wait_for_pool(ASK_POOL, timeout=600)
    summary = Summary.objects.get(study=study)
    job = AnswerJob.objects.get()
    assert summary.metadata["answer_job"] == str(job.uuid) and summary.text.startswith(HOSTILE_SYNTHESIS)
    # The question is listed on the ask page, added.
    page.goto(f"/studies/{study.slug}/ask/")
    expect(page.locator("#asked-questions tbody tr")).to_contain_text("Does aspirin prevent recurrent stroke?")
    expect(page.locator("#asked-questions tbody tr")).to_contain_text("yes")
