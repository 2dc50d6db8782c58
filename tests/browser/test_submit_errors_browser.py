"""A refused submit lists every problem once, in the page's words, focused."""

import re

import pytest
from playwright.sync_api import expect

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_refused_submit_lists_every_problem_once_with_focus_on_the_summary(page, factpico_item):
    page.locator("label[for='q-population-4']").click()  # a score without its required rationale
    page.get_by_role("button", name="Submit").click()
    summary = page.locator("#error-summary")
    expect(summary).to_be_focused(timeout=15000)
    links = summary.locator("li a")
    hrefs = [links.nth(i).get_attribute("href") for i in range(links.count())]
    assert len(hrefs) == len(set(hrefs))  # each problem once
    # Every question still unanswered or incomplete is listed in one go.
    for key in ("population", "intervention", "comparator", "outcome", "outcome_exhaustive"):
        assert f"#question-{key}" in hrefs
    # A question asked per finding links each finding's problem to that finding.
    assert f"#q-evidence-part-{factpico_item.summary.source.findings.get().uuid}" in hrefs
    texts = summary.inner_text()
    assert "Intervention" in texts
    assert "outcome_exhaustive" not in texts and "population:" not in texts  # no internal keys
    # Each problem is also shown at its question, and the link leads there.
    expect(page.locator("#q-population-error")).to_have_text(re.compile("rationale is required"))
    summary.get_by_role("link", name=re.compile("Intervention")).click()
    expect(page).to_have_url(re.compile("#question-intervention$"))
