"""A highlight being made is kept when the rater leaves the page, and the keyboard goes to
the saved highlight's entry in the list (announced), never to the page's <body>."""

import re

import pytest
from playwright.sync_api import expect

from annotate.models import Span
from tests.annotate.factpico import make_factpico_assignment
from tests.browser.conftest import log_in, open_item
from tests.browser.selection import drag_select
from tests.browser.test_drafts_browser import until
from tests.factories import PASSWORD, UserFactory

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def item(page):
    rater = UserFactory(username="rater1")
    assignment, _ = make_factpico_assignment(rater, summary_text="Short text with words.")
    log_in(page, rater.username, PASSWORD)
    open_item(page, assignment)
    return assignment


def start_highlight(page):
    drag_select(page, "#summary-text", "text with")
    page.get_by_role("button", name="Mark selection: I. Added information").click()
    panel = page.locator("#q-added_info-panel")
    expect(panel).to_contain_text("“text with”")
    panel.locator("input[type=radio]").first.check()
    page.locator("#span-added_info-rationale").fill("Not in the source.")
    return panel


def test_a_highlight_being_made_is_there_after_leaving_and_coming_back(page, item):
    panel = start_highlight(page)
    chosen = panel.locator("input[type=radio]").first.get_attribute("value")
    page.get_by_role("link", name=re.compile("My queue")).first.click()
    page.wait_for_url(re.compile(r".*/queue/?$|.*/$"))

    open_item(page, item)
    expect(panel).to_be_visible()
    expect(panel).to_contain_text("“text with”")
    expect(panel).to_contain_text("Not saved yet")
    expect(panel.locator(f"input[type=radio][value='{chosen}']")).to_be_checked()
    expect(page.locator("#span-added_info-rationale")).to_have_value("Not in the source.")
    assert Span.objects.count() == 0  # kept in the browser, not stored as a saved highlight

    page.get_by_role("button", name="Save highlight").click()
    expect(page.locator("#q-added_info-list li")).to_have_count(1)
    until(page, lambda: Span.objects.exists())
    span = Span.objects.get()
    assert (span.text, span.rationale, span.answers) == ("text with", "Not in the source.", {"factual": chosen})

    # Saved, it is no longer a highlight in progress: a reload shows it listed, no panel.
    page.reload()
    page.wait_for_load_state("load")
    expect(page.locator("#q-added_info-list li")).to_have_count(1)
    expect(panel).to_be_hidden()


def test_a_cancelled_highlight_is_not_brought_back(page, item):
    panel = start_highlight(page)
    page.get_by_role("button", name="Cancel").click()
    expect(panel).to_be_hidden()
    expect(page.get_by_role("button", name="Mark selection: I. Added information")).to_be_focused()
    page.reload()
    page.wait_for_load_state("load")
    expect(panel).to_be_hidden()


def test_saving_a_highlight_puts_the_keyboard_on_its_entry_in_the_list(page, item):
    start_highlight(page)
    save = page.get_by_role("button", name="Save highlight")
    save.focus()
    page.keyboard.press("Enter")
    entry = page.locator("#q-added_info-list li").first
    expect(entry).to_be_focused()
    expect(entry).to_contain_text("text with")
    expect(page.locator("#announce")).to_have_text("Highlight 1 saved.")
    # Tab goes on from the entry (its Edit button), not from the top of the page.
    page.keyboard.press("Tab")
    expect(page.get_by_role("button", name="Edit highlight 1")).to_be_focused()
