"""Keyboard-only rating of a FactPICO item, a highlight included; the
highlight panel checks its own sub-answers; Mark selection needs a live selection."""

import re

import pytest
from playwright.sync_api import expect

from annotate.models import Span
from annotate.selectors.queue import latest_revision, revision_answers
from tests.annotate.factpico import make_factpico_assignment
from tests.browser.conftest import log_in
from tests.factories import PASSWORD, UserFactory

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_keyboard_only_factpico_with_a_highlight(page):
    rater = UserFactory(username="rater1")
    assignment, _ = make_factpico_assignment(rater, summary_text="Short text with words.")
    log_in(page, rater.username, PASSWORD)
    page.goto(f"/rate/{assignment.uuid}/")
    page.wait_for_load_state("load")

    mark = page.get_by_role("button", name="Mark selection: I. Added information")
    # Nothing selected: said next to the button, no panel.
    mark.focus()
    page.keyboard.press("Enter")
    expect(page.locator("#q-added_info-tool-message")).to_have_text(re.compile("Nothing is selected"))
    assert page.locator("#q-added_info-panel").is_hidden()

    page.get_by_role("button", name="Select summary text with the keyboard").focus()
    page.keyboard.press("Enter")
    expect(page.locator("#kbd-summary")).to_be_focused()
    page.keyboard.press("Control+Home")
    for _ in range(6):
        page.keyboard.press("ArrowRight")
    for _ in range(4):
        page.keyboard.press("Shift+ArrowRight")
    mark.focus()
    page.keyboard.press("Enter")
    expect(page.locator("#q-added_info-panel")).to_contain_text("“text”")
    # Save highlight with nothing answered: the panel lists what is missing and keeps it open.
    save = page.get_by_role("button", name="Save highlight")
    save.focus()
    page.keyboard.press("Enter")
    message = page.locator("#q-added_info-panel p.error")
    expect(message).to_contain_text("Rationale")
    assert Span.objects.count() == 0 and page.locator("#q-added_info-panel").is_visible()
    page.locator("#span-added_info-rationale").focus()
    page.keyboard.type("A plain word.")
    page.locator("#q-added_info-panel input[type=radio]").first.focus()
    page.keyboard.press("Space")
    save.focus()
    page.keyboard.press("Enter")
    expect(page.locator("#q-added_info-list li")).to_have_count(1)

    # Scale questions by digits; n moves to the next question.
    page.locator("#question-population input[type=radio]").first.focus()
    page.keyboard.press("4")
    page.keyboard.press("n")
    page.keyboard.press("3")
    expect(page.locator("#q-population-4")).to_be_checked()
    expect(page.locator("#q-intervention-3")).to_be_checked()
    expect(page.locator("#save-status")).to_have_text(re.compile("^Draft saved"), timeout=15000)
    answers, _ = revision_answers(latest_revision(assignment))
    assert answers["population"] == 4 and answers["intervention"] == 3
    span = Span.objects.get()
    assert (span.text, span.rationale) == ("text", "A plain word.")
    assert span.answers  # the factual sub-answer chosen with the space bar
