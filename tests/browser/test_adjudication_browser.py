"""A study admin runs a double-annotation batch in the browser: build it, both demo
raters rate, the admin opens a disagreement and records a consensus."""

import re

import pytest
from django.core.management import call_command

from annotate.models import Batch, ConsensusAnswer
from tests.browser.conftest import log_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
PASSWORD = "rate-summaries-2026"


def rate_batch_items(page, rater, score):
    log_in(page, rater, PASSWORD)
    for _ in range(2):
        # The batch's items come last in the queue; open the last one not yet rated.
        page.goto("/rate/")
        page.locator("section", has_text="LitSumm").locator("li.state-pending a").last.click()
        page.wait_for_load_state("load")
        page.locator("label", has_text=re.compile(rf"^\s*{score}\b")).click()
        page.get_by_role("button", name="Submit").click()
        page.wait_for_load_state("load")
    page.get_by_role("button", name="Log out").click()


def test_admin_builds_batch_raters_rate_admin_adjudicates(page):
    call_command("load_demo")
    log_in(page, "admin", PASSWORD)
    page.goto("/studies/demo-litsumm/batches/new/")
    page.get_by_label("Name").fill("double")
    page.get_by_label("rater1").check()
    page.get_by_label("rater2").check()
    page.get_by_label("Design").select_option("k_raters")
    page.get_by_label("k (raters per item)").fill("2")
    page.get_by_label("Sample size (blank: all matching)").fill("2")
    page.get_by_label("Stratify by").fill("source.topic")
    page.get_by_label("Seed").fill("4")
    page.get_by_label("Assigned").select_option("no")  # the demo's batches hold the rest
    page.get_by_role("button", name="Preview").click()
    page.wait_for_load_state("load")
    assert "would create 4 assignments on 2 summaries" in " ".join(page.locator("#preview").inner_text().split())
    page.get_by_role("button", name="Create batch").click()
    page.wait_for_url(re.compile(r".*/batches/[0-9a-f-]{36}/$"))
    batch = Batch.objects.get(name="double")
    assert batch.assignments.count() == 4
    page.get_by_role("button", name="Log out").click()

    rate_batch_items(page, "rater1", 5)
    rate_batch_items(page, "rater2", 2)

    log_in(page, "admin", PASSWORD)
    page.goto(f"/studies/demo-litsumm/batches/{batch.uuid}/disagreements/?question=overall&threshold=2")
    assert "2 items with disagreement" in page.content()
    page.locator("table.data tbody a").first.click()
    page.wait_for_load_state("load")
    assert page.locator("table.side-by-side").first.inner_text().count("5") >= 1
    form = page.locator("form.consensus", has_text="Consensus: Overall quality")
    form.get_by_label("3 Adequate").check()
    form.get_by_label("Rationale").fill("Agreed after discussion: one unsupported claim.")
    form.get_by_role("button", name="Record consensus").click()
    page.wait_for_load_state("load")
    consensus = ConsensusAnswer.objects.get()
    assert (consensus.question, consensus.value, consensus.batch) == ("overall", 3, batch)
    assert "Agreed after discussion" in page.content()
