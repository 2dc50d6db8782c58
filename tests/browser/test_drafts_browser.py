"""Nothing a rater types is lost (issue 14): a rationale typed before its score survives a
reload, and a change made just before leaving the page is stored."""

import re
import time

import pytest
from playwright.sync_api import expect

from annotate.models import Assignment
from annotate.selectors.queue import latest_revision, revision_answers

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def stored_rationales(assignment):
    return revision_answers(latest_revision(assignment))[1]


def wait_until(condition, timeout):
    """Poll a database condition (the browser cannot wait on it) until it holds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def test_a_rationale_typed_before_the_score_survives_a_reload(page, factpico_item):
    assignment = factpico_item
    page.locator("#q-population-rationale").fill("Adults, typed before any score.")
    expect(page.locator("#save-status")).to_have_text(re.compile("^Draft saved"), timeout=15000)
    assert page.locator("#save-problem:not([hidden])").count() == 0
    page.reload()
    page.wait_for_load_state("load")
    assert page.locator("#q-population-rationale").input_value() == "Adults, typed before any score."
    assert stored_rationales(assignment) == {"population": "Adults, typed before any score."}


def test_a_change_then_leaving_within_100ms_is_stored(page, factpico_item):
    assignment = factpico_item
    page.locator("#q-population-rationale").fill("Typed just before leaving.")
    # Well inside the 1.2 s autosave delay: only the flush on leaving can store it.
    page.get_by_role("link", name=re.compile("My queue")).first.click()
    page.wait_for_url(re.compile(r".*/queue/?$|.*/$"))
    # The keepalive flush may land just after the next page: wait for it, generously.
    wait_until(lambda: stored_rationales(assignment).get("population"), timeout=15)
    assert stored_rationales(assignment) == {"population": "Typed just before leaving."}
    assignment.refresh_from_db()
    assert assignment.state == Assignment.State.IN_PROGRESS
