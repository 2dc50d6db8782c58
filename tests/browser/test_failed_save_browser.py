"""A failed save is shown at the question being worked on, announced, with Retry."""

import re

import pytest
from playwright.sync_api import expect

from annotate.selectors.queue import latest_revision, revision_answers
from tests.browser.conftest import log_in
from tests.factories import PASSWORD, AssignmentFactory, UserFactory

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_failed_save_is_shown_at_the_field_with_retry(page):
    rater = UserFactory(username="rater1")
    assignment = AssignmentFactory(rater=rater, position=0)
    log_in(page, rater.username, PASSWORD)
    page.goto(f"/rate/{assignment.uuid}/")
    page.wait_for_load_state("load")
    # The network drops the draft saves (the server is real; the route only cuts the line).
    page.route("**/api/assignments/**", lambda route: route.abort())
    page.locator("#q-feedback").fill("Typed while offline.")
    problem = page.locator("#question-feedback #save-problem")
    expect(problem).to_be_visible(timeout=15000)
    assert problem.get_attribute("role") == "alert"
    expect(problem).to_contain_text("Draft not saved")
    page.unroute("**/api/assignments/**")
    problem.get_by_role("button", name="Retry").click()
    expect(page.locator("#save-problem")).to_be_hidden(timeout=15000)
    expect(page.locator("#save-status")).to_have_text(re.compile("^Draft saved"))
    assert revision_answers(latest_revision(assignment))[0] == {"feedback": "Typed while offline."}
