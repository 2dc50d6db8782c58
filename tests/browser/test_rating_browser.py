"""A rater rates in a real browser; the database must hold exactly what they chose."""

import re

import pytest

from annotate.models import Assignment
from annotate.selectors.queue import revision_answers
from tests.browser.conftest import log_in
from tests.factories import PASSWORD, AssignmentFactory, StudyFactory, SummaryFactory, UserFactory, revision_history

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

HOSTILE = 'Fine text <script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2"> [PMC1].'


@pytest.fixture
def queue():
    rater = UserFactory(username="rater1")
    other = UserFactory(username="rater2")
    study = StudyFactory(title="Browser study")
    items = [
        AssignmentFactory(
            summary=SummaryFactory(source__study=study, text=HOSTILE if i == 0 else f"Summary number {i} [PMC1]."),
            rater=rater,
            position=i,
        )
        for i in range(3)
    ]
    AssignmentFactory(summary=items[0].summary, rater=other, position=0)
    return rater, items


def first_item(page):
    page.get_by_role("link", name="Item 1", exact=True).click()
    page.wait_for_url(re.compile(r".*/rate/[0-9a-f-]{36}/$"))


def test_rater_rates_with_the_mouse(page, queue):
    rater, items = queue
    log_in(page, rater.username, PASSWORD)
    first_item(page)
    # The hostile summary is shown as text and none of it ran.
    assert "<script>window.__pwned = 1</script>" in page.locator("#summary-text").inner_text()
    assert page.evaluate("window.__pwned") is None

    page.locator("label", has_text=re.compile(r"^\s*4\b")).click()
    assert page.get_by_role("radio", name=re.compile(r"^4\b")).is_checked()
    for other in ("1", "2", "3", "5"):
        assert not page.get_by_role("radio", name=re.compile(rf"^{other}\b")).is_checked()
    page.get_by_label("Overly specific").check()
    page.get_by_label("Feedback").fill("Drop the dosing detail.")
    page.get_by_role("button", name="Submit").click()
    page.wait_for_url(f"**/rate/{items[1].uuid}/")

    items[0].refresh_from_db()
    assert items[0].state == Assignment.State.SUBMITTED
    revisions = revision_history(items[0])
    assert [r.status for r in revisions] == ["submitted"]
    assert revision_answers(revisions[0])[0] == {
        "overall": 4,
        "failure_modes": ["overly_specific"],
        "feedback": "Drop the dosing detail.",
    }


def test_rater_rates_with_the_keyboard_only(page, queue):
    rater, items = queue
    log_in(page, rater.username, PASSWORD)
    first_item(page)
    page.locator("body").press("2")
    assert page.get_by_role("radio", name=re.compile(r"^2\b")).is_checked()
    page.keyboard.press("5")
    assert page.get_by_role("radio", name=re.compile(r"^5\b")).is_checked()
    # Tab to the failure modes and tick one with the space bar.
    for _ in range(30):
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement.id") == "q-failure_modes-unsupported":
            break
    assert page.evaluate("document.activeElement.id") == "q-failure_modes-unsupported"
    page.keyboard.press("Space")
    for _ in range(30):
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement.id") == "q-feedback":
            break
    page.keyboard.type("Cite the trial for every sentence.")
    # Digits typed into the feedback box are text, not scores.
    page.keyboard.type(" 3 times.")
    page.keyboard.press("Control+Enter")
    page.wait_for_url(f"**/rate/{items[1].uuid}/")
    answers = revision_answers(revision_history(items[0])[0])[0]
    assert answers == {
        "overall": 5,
        "failure_modes": ["unsupported"],
        "feedback": "Cite the trial for every sentence. 3 times.",
    }


def test_draft_autosaves_and_survives_a_reload(page, queue):
    rater, items = queue
    log_in(page, rater.username, PASSWORD)
    first_item(page)
    page.locator("label", has_text=re.compile(r"^\s*3\b")).click()
    page.get_by_label("Feedback").fill("Half done")
    page.wait_for_function("() => document.getElementById('save-status').textContent.startsWith('Draft saved')")
    page.reload()
    assert page.get_by_role("radio", name=re.compile(r"^3\b")).is_checked()
    assert page.get_by_label("Feedback").input_value() == "Half done"
    items[0].refresh_from_db()
    assert items[0].state == Assignment.State.IN_PROGRESS
    assert [r.status for r in revision_history(items[0])] == ["draft"]


def test_submit_without_score_is_refused_with_a_message(page, queue):
    rater, items = queue
    log_in(page, rater.username, PASSWORD)
    first_item(page)
    page.get_by_role("button", name="Submit").click()
    assert page.locator("#q-overall-error").inner_text() == "an answer is required"
    items[0].refresh_from_db()
    assert items[0].state != Assignment.State.SUBMITTED


def test_changing_a_submitted_rating_keeps_the_first_answer(page, queue):
    rater, items = queue
    log_in(page, rater.username, PASSWORD)
    first_item(page)
    page.locator("label", has_text=re.compile(r"^\s*5\b")).click()
    page.get_by_role("button", name="Submit").click()
    page.wait_for_url(f"**/rate/{items[1].uuid}/")
    page.goto(f"/rate/{items[0].uuid}/")
    page.get_by_role("button", name="Change my answer").click()
    page.locator("label", has_text=re.compile(r"^\s*2\b")).click()
    page.get_by_role("button", name="Submit").click()
    page.wait_for_url(f"**/rate/{items[1].uuid}/")
    history = [(r.number, revision_answers(r)[0]["overall"]) for r in revision_history(items[0])]
    assert history == [(1, 5), (2, 2)]


def test_consistency_rule_message_is_shown_next_to_the_question(page, queue):
    rater, items = queue
    log_in(page, rater.username, PASSWORD)
    first_item(page)
    page.locator("label", has_text=re.compile(r"^\s*5\b")).click()
    page.get_by_label("Contains hallucinations").check()
    page.get_by_role("button", name="Submit").click()
    message = page.locator("#q-overall-error")
    assert "with a hallucination ticked, choose 3 or lower" in message.inner_text()
    # What the rater chose is still on the page, and nothing was submitted.
    assert page.get_by_label("Contains hallucinations").is_checked()
    items[0].refresh_from_db()
    assert items[0].state != Assignment.State.SUBMITTED
