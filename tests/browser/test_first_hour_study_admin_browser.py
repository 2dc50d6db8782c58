"""A study admin's papercuts of a new user's first hour, on the demo as `make run`
loads it, in a real Chromium at 1280 and 800 px: the report's header counts summaries, the
report links back to its study and fits an 800 px screen, the study page links to the
report's downloads, and the batch builder is laid out, samples from the work the raters do
not have yet, names a duplicate name at its field and links its documentation."""

import re

import pytest
from django.core.management import call_command
from playwright.sync_api import expect

from analysis import services
from annotate.models import Batch, Revision, Study
from datasets.demo import FACTPICO_STUDY

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PASSWORD = "browser-demo-password"


@pytest.fixture
def demo(settings, page):
    settings.DEBUG, settings.DEMO_PASSWORD = True, PASSWORD
    call_command("load_demo", "--with-answers")
    page.goto("/accounts/login/")
    page.get_by_label("Username").fill("admin")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(lambda url: "/accounts/login/" not in url)
    return Study.objects.get(slug=FACTPICO_STUDY)


def test_the_report_counts_summaries_links_its_study_and_fits_800_px(page, demo, monkeypatch):
    monkeypatch.setattr(services, "BOOTSTRAP_RESAMPLES", 50)
    page.set_default_timeout(240_000)  # a generous wait for the background report on a loaded machine
    # Counted here from the rows: summaries of the main batch with a submitted answer.
    rated = (
        Revision.objects.filter(assignment__study=demo, status="submitted")
        .exclude(assignment__batch__kind=Batch.Kind.CALIBRATION)
        .values("assignment__summary")
        .distinct()
        .count()
    )
    total = demo.summaries.count()
    assert 0 < rated < total

    page.goto(f"/studies/{demo.slug}/")
    page.locator("#report-downloads").click()
    page.get_by_role("heading", name="Agreement", exact=True).wait_for()
    assert page.url.endswith("#h-downloads")
    # FactPICO asks per finding: the header counted summary:finding items ("24 of 20").
    expect(page.locator("#items-rated")).to_have_text(f"{rated} of {total} summaries rated by 2 raters")
    expect(page.get_by_role("heading", name="Downloads")).to_be_in_viewport()

    page.set_viewport_size({"width": 800, "height": 600})
    assert page.evaluate("document.documentElement.scrollWidth") <= 800
    page.get_by_role("link", name=f"← {demo.title}").click()
    page.wait_for_url(f"**/studies/{demo.slug}/")
    expect(page.get_by_role("heading", name=demo.title)).to_be_visible()


def test_the_batch_builder_is_laid_out_and_samples_work_the_raters_do_not_have(page, demo):
    page.goto(f"/studies/{demo.slug}/batches/new/")
    # Labels in one column, controls in the next: every text box and list of the filters
    # starts at the same x.
    lefts = page.locator("fieldset.form-section").nth(2).locator("input[type=text], input[type=number], select")
    xs = {round(box["x"]) for box in (lefts.nth(i).bounding_box() for i in range(lefts.count()))}
    assert lefts.count() == 8 and len(xs) == 1
    # The pipeline-flag filters are on the form, and the example fits the study's sources.
    expect(page.get_by_label("With pipeline flags")).to_be_visible()
    expect(page.get_by_label("Without pipeline flags")).to_be_visible()
    hint = page.locator("#id_source_field_help").inner_text()
    assert "rna_type" not in hint and re.search(r"e\.g\. (journal|year|origin)=\S", hint)

    # Sample size 6 with "Assigned: Any": six summaries the two raters do not have yet.
    page.get_by_label("Name").fill("second-round")
    page.get_by_label("rater1").check()
    page.get_by_label("rater2").check()
    page.get_by_label("Sample size").fill("6")
    page.get_by_role("button", name="Preview").click()
    preview = page.locator("#preview")
    expect(preview).to_contain_text("12 assignments on 6 summaries")
    expect(preview).to_contain_text("No rater gets a summary they already have.")

    # A name already taken is said at the Name field, not above the form.
    page.get_by_label("Name").fill("main")
    page.get_by_role("button", name="Create batch").click()
    expect(page.locator("[data-field='name'] .error")).to_have_text(re.compile("already has a batch named 'main'"))
    assert page.locator(".form-error").count() == 0
    assert Batch.objects.filter(study=demo).count() == 2

    page.set_viewport_size({"width": 800, "height": 600})
    assert page.evaluate("document.documentElement.scrollWidth") <= 800
    # The documentation the page names opens as a page.
    page.get_by_role("link", name=re.compile("How batches are built")).click()
    page.wait_for_url("**/docs/batches.md")
    expect(page.get_by_role("heading", name="Batches, progress and adjudication", level=1)).to_be_visible()
