"""A rubric written right to left (Hebrew) reads right to left on the rating page in
Chromium, on an English page as on a Spanish one, while an English rubric stays left to
right (dir="auto" on each question: docs/languages.md)."""

from pathlib import Path

import pytest
import yaml

from annotate.services.rubrics import load_rubric
from tests.browser.conftest import log_in, open_item
from tests.factories import PASSWORD, AssignmentFactory, StudyFactory, SummaryFactory, UserFactory

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

RTL_RUBRIC = Path(__file__).parent.parent / "i18n" / "rtl_rubric.yaml"


def direction(page, selector: str) -> str:
    return page.locator(selector).evaluate("element => getComputedStyle(element).direction")


def test_a_hebrew_rubric_reads_right_to_left_and_an_english_one_left_to_right(page):
    rater = UserFactory(username="rater1")
    hebrew = StudyFactory(rubric=load_rubric(definition=yaml.safe_load(RTL_RUBRIC.read_text(encoding="utf-8"))))
    rtl_item = AssignmentFactory(summary=SummaryFactory(source__study=hebrew), rater=rater, position=0)
    ltr_item = AssignmentFactory(summary=SummaryFactory(), rater=rater, position=0)
    log_in(page, rater.username, PASSWORD)

    open_item(page, rtl_item)
    assert page.locator("html").get_attribute("dir") is None  # the page itself is English
    # The English translation gives the prompt; the checkboxes' texts are Hebrew only.
    assert direction(page, "#question-overall") == "ltr"
    assert direction(page, "#question-problems") == "rtl"
    assert direction(page, "#question-notes") == "rtl"
    box = page.locator("label[for=q-problems-invented]").bounding_box()
    tick = page.locator("#q-problems-invented").bounding_box()
    assert tick["x"] > box["x"]  # right to left: the tickbox on the right of its label

    open_item(page, ltr_item)
    assert direction(page, "#question-overall") == "ltr"
    assert direction(page, "#question-failure_modes") == "ltr"
