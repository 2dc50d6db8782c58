"""Accessibility beyond the automated checks, as a keyboard and screen
reader user meets it in Chromium: the summary's citations are one Tab stop of toggle
buttons that answer Enter and Space; the Context heading is a heading outside the
disclosure; "Rating submitted." reaches a live region after the page is shown; the focus
ring is drawn in the colour the CSS gives. (The markup and contrast: tests/annotate/
test_accessibility_markup.py.)"""

import re

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import log_in
from tests.factories import PASSWORD, AssignmentFactory, SourceFactory, StudyFactory, SummaryFactory, UserFactory

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SUMMARY = "Pressure fell [PMC1]. It was tolerated [PMC2]. Again [PMC1]. And [PMC9]."


@pytest.fixture
def cited_item():
    rater = UserFactory(username="rater1")
    study = StudyFactory(title="Citations")
    source = SourceFactory(study=study, key="PMC1", text="Drug A lowered blood pressure. It was well tolerated.")
    source.sentence_spans[1][2] = "PMC2"
    source.save()
    items = [
        AssignmentFactory(summary=SummaryFactory(source=source, text=SUMMARY, key=f"s{i}"), rater=rater, position=i)
        for i in range(2)
    ]
    return rater, items


def active(page, script: str):
    return page.evaluate(f"(() => {{ const a = document.activeElement; return {script}; }})()")


def linked(page) -> list[str]:
    return page.eval_on_selector_all(".sentences li.ref-linked", "els => els.map(e => e.dataset.ref)")


def test_citations_are_one_tab_stop_of_buttons_that_answer_enter_and_space(page, cited_item):
    rater, items = cited_item
    log_in(page, rater.username, PASSWORD)
    page.goto(f"/rate/{items[0].uuid}/")
    page.wait_for_load_state("load")
    cites = page.locator("#summary-text .cite")
    expect(cites).to_have_count(4)
    assert page.locator("#summary-text .cite[tabindex='0']").count() == 1
    # Each has a name of its own: no run of same-name stops.
    names = [cites.nth(i).get_attribute("aria-label") for i in range(4)]
    assert len(set(names)) == 4 and names[0].startswith("citation 1 of 4, reference PMC1")

    # Tab from the control before the summary reaches the first citation, and one more Tab leaves them.
    page.locator("button.kbd-select[data-target=source]").focus()
    page.keyboard.press("Tab")
    assert active(page, "a.dataset.citeIndex") == "0"
    page.keyboard.press("Tab")
    assert active(page, "a.classList.contains('cite')") is False

    # Back into the group; the arrows move between citations, focus shows the cited sentences.
    page.keyboard.press("Shift+Tab")
    assert active(page, "a.dataset.citeIndex") == "0"
    page.keyboard.press("ArrowRight")
    assert active(page, "a.dataset.citeIndex") == "1"
    assert linked(page) == ["PMC2"]
    # Enter presses it: its sentences stay shown after the focus moves on.
    page.keyboard.press("Enter")
    expect(cites.nth(1)).to_have_attribute("aria-pressed", "true")
    page.keyboard.press("ArrowRight")
    assert active(page, "a.dataset.citeIndex") == "2"
    assert linked(page) == ["PMC1"]
    page.keyboard.press("Tab")
    assert linked(page) == ["PMC2"]
    # The group remembers the last citation; End and Home jump; Space un-presses.
    page.keyboard.press("Shift+Tab")
    assert active(page, "a.dataset.citeIndex") == "2"
    page.keyboard.press("End")
    assert active(page, "a.dataset.citeIndex") == "3"
    page.keyboard.press("Home")
    page.keyboard.press("ArrowRight")
    scroll = page.evaluate("window.scrollY")
    page.keyboard.press("Space")
    expect(cites.nth(1)).to_have_attribute("aria-pressed", "false")
    assert page.evaluate("window.scrollY") == scroll  # Space pressed the button, it did not scroll
    page.keyboard.press("Tab")
    assert linked(page) == []
    # A click presses too.
    cites.nth(0).click()
    expect(cites.nth(0)).to_have_attribute("aria-pressed", "true")


def test_the_context_heading_is_a_heading_outside_the_disclosure(page, cited_item):
    rater, items = cited_item
    log_in(page, rater.username, PASSWORD)
    page.goto(f"/rate/{items[0].uuid}/")
    heading = page.get_by_role("heading", name=re.compile(r"^Context \(2 sentences\)"))
    expect(heading).to_be_visible()
    assert page.locator("summary h1, summary h2, summary h3").count() == 0
    toggle = page.locator(".source details > summary")
    toggle.focus()
    page.keyboard.press("Enter")
    expect(page.locator(".source details")).not_to_have_attribute("open", "")
    expect(heading).to_be_visible()  # the heading stays in the page's outline when it is closed


def test_rating_submitted_is_announced_in_a_live_region(page, cited_item):
    rater, items = cited_item
    # What the live region held when the document was parsed: it must be empty then, and the
    # message arrive afterwards, or a screen reader does not announce it.
    page.add_init_script(
        "document.addEventListener('DOMContentLoaded', () => {"
        " const r = document.getElementById('announce');"
        " window.__announceAtLoad = r ? r.textContent : null; });"
    )
    log_in(page, rater.username, PASSWORD)
    page.goto(f"/rate/{items[0].uuid}/")
    page.locator("label", has_text=re.compile(r"^\s*4\b")).click()
    page.get_by_label("Feedback").fill("Fine.")
    page.get_by_role("button", name="Submit").click()
    page.wait_for_url(f"**/rate/{items[1].uuid}/")
    region = page.locator("#announce")
    expect(region).to_have_attribute("role", "status")
    expect(region).to_have_attribute("aria-live", "polite")
    expect(region).to_have_text("Rating submitted.", timeout=30_000)
    assert page.evaluate("window.__announceAtLoad") == ""
    expect(page.locator(".messages")).to_contain_text("Rating submitted.")  # still shown to everyone


def test_the_focus_ring_is_drawn_in_the_css_colour(page, cited_item):
    rater, items = cited_item
    log_in(page, rater.username, PASSWORD)
    page.goto(f"/rate/{items[0].uuid}/")
    page.locator("button.kbd-select[data-target=source]").focus()
    page.keyboard.press("Shift+Tab")
    page.keyboard.press("Tab")  # focus by keyboard: :focus-visible applies
    colour = active(page, "getComputedStyle(a).outlineColor")
    assert colour == "rgb(180, 83, 9)"  # #b45309, var(--focus): 5.0:1 on white
