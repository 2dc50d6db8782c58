"""Orientation on the rating page: Item k of N, previous/next from links and
keys, shortcuts for any rubric's scale and choice questions, the shortcut list, RTL text."""

import re

import pytest
from playwright.sync_api import expect

from annotate.selectors.queue import latest_revision, revision_answers
from tests.browser.conftest import log_in
from tests.factories import PASSWORD, AssignmentFactory, StudyFactory, SummaryFactory, UserFactory

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

ARABIC = "ملخص الدراسة: الدواء أ خفض النوبات."


@pytest.fixture
def three_items():
    rater = UserFactory(username="rater1")
    study = StudyFactory(title="Orientation study")
    items = [
        AssignmentFactory(
            summary=SummaryFactory(source__study=study, text=ARABIC if i == 1 else f"Summary {i}."),
            rater=rater,
            position=i,
        )
        for i in range(3)
    ]
    return rater, items


def test_item_k_of_n_and_previous_next_by_link_and_key(page, three_items):
    rater, items = three_items
    log_in(page, rater.username, PASSWORD)
    page.goto(f"/rate/{items[0].uuid}/")
    expect(page.locator("#queue-place")).to_have_text("Item 1 of 3")
    assert page.locator("#previous-item").count() == 0
    page.locator("#next-item").click()
    page.wait_for_url(f"**/rate/{items[1].uuid}/")
    expect(page.locator("#queue-place")).to_have_text("Item 2 of 3")
    page.locator("body").press("]")
    page.wait_for_url(f"**/rate/{items[2].uuid}/")
    expect(page.locator("#queue-place")).to_have_text("Item 3 of 3")
    assert page.locator("#next-item").count() == 0
    page.locator("body").press("[")
    page.wait_for_url(f"**/rate/{items[1].uuid}/")
    # Right-to-left summary text reads right to left.
    summary = page.locator("#summary-text")
    assert summary.get_attribute("dir") == "auto"
    assert summary.evaluate("e => getComputedStyle(e).direction") == "rtl"
    assert page.locator("#q-feedback").evaluate("e => e.dir") == "auto"


def test_shortcut_list_and_digits_for_a_choice_question_of_another_rubric(page, factpico_item):
    assignment = factpico_item
    page.locator("body").press("?")
    expect(page.locator("#shortcut-help")).to_be_visible()
    expect(page.locator("#shortcut-help")).to_be_focused()
    page.keyboard.press("Escape")
    expect(page.locator("#shortcut-help")).to_be_hidden()
    # Focus a choice question, then answer it by the place of the option.
    page.locator("#question-outcome_exhaustive input[type=radio]").first.focus()
    page.keyboard.press("2")
    second = page.locator("#question-outcome_exhaustive input[type=radio]").nth(1)
    expect(second).to_be_checked()
    # Typing a digit into a rationale types it, and answers nothing.
    page.locator("#q-population-rationale").fill("")
    page.locator("#q-population-rationale").press("3")
    assert page.locator("#q-population-rationale").input_value() == "3"
    expect(page.locator("#question-population input[type=radio]:checked")).to_have_count(0)
    expect(page.locator("#save-status")).to_have_text(re.compile("^Draft saved"), timeout=15000)
    value = second.get_attribute("value")
    answers, rationales = revision_answers(latest_revision(assignment))
    assert answers["outcome_exhaustive"] == value
    assert rationales["population"] == "3"
