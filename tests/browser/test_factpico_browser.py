"""The FactPICO rubric in a real browser: spans selected with the mouse, PICO items,
a finding, citation linking."""

import re

import pytest

from annotate.models import Assignment, Span
from annotate.selectors.queue import revision_answers
from tests.annotate.factpico import make_factpico_assignment
from tests.browser.conftest import log_in, open_item
from tests.browser.selection import drag_select
from tests.factories import (
    PASSWORD,
    AssignmentFactory,
    SourceFactory,
    StudyFactory,
    SummaryFactory,
    UserFactory,
    revision_history,
)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# Emoji (two UTF-16 units each) before the phrase: offsets must still be code points.
SUMMARY = "Grown-ups 😀😀 with asthma took <b>drug A</b> or a dummy pill. Attacks fell a lot."
PHRASE = "took <b>drug A</b> or a dummy"


def rate_pico(page, key, value, rationale):
    page.locator(f"label[for='q-{key}-{value}']").click()
    page.locator(f"#q-{key}-rationale").fill(rationale)


def test_rater_marks_a_span_rates_pico_and_a_finding(page):
    rater = UserFactory(username="rater1")
    assignment, finding = make_factpico_assignment(rater, summary_text=SUMMARY)
    log_in(page, rater.username, PASSWORD)
    open_item(page, assignment)

    drag_select(page, "#summary-text", PHRASE)
    page.get_by_role("button", name="Mark selection: I. Added information").click()
    page.get_by_label("Not factual").check()
    page.locator("#span-added_info-rationale").fill("The abstract never says how the drug was taken.")
    page.get_by_role("button", name="Save highlight").click()
    # The highlight is shown, listed, and its markup is text.
    item = page.locator("#q-added_info-list li").first
    assert item.locator("q").inner_text() == PHRASE
    assert page.locator("#summary-text b").count() == 0
    assert page.locator("#summary-text mark.hl-no").count() >= 1

    rate_pico(page, "population", 4, "Adults with asthma, correctly.")
    rate_pico(page, "intervention", 3, "Drug A, but dosing missing.")
    rate_pico(page, "comparator", 3, "A dummy pill is vague for placebo.")
    rate_pico(page, "outcome", 4, "Attacks.")
    page.get_by_label("All outcome measures mentioned").check()
    page.locator(f"label[for='q-evidence-{finding.uuid}-2']").click()
    page.locator(f"#q-evidence-{finding.uuid}-rationale").fill("Says 'a lot'; the abstract gives no size.")
    # Answering the finding highlights its evidence in the source.
    assert page.locator(".sent-text mark.finding-hl").first.inner_text().startswith("Drug A reduced attacks")
    page.get_by_role("button", name="Submit").click()
    page.wait_for_url("**/done/")

    assignment.refresh_from_db()
    assert assignment.state == Assignment.State.SUBMITTED
    answers, rationales = revision_answers(revision_history(assignment)[0])
    span = Span.objects.get()
    start = SUMMARY.index(PHRASE)
    assert (span.start, span.end, span.text) == (start, start + len(PHRASE), PHRASE)
    assert span.answers == {"factual": "no"} and span.rationale.startswith("The abstract never says")
    assert {k: answers[k] for k in ("population", "intervention", "comparator", "outcome")} == {
        "population": 4,
        "intervention": 3,
        "comparator": 3,
        "outcome": 4,
    }
    assert answers["evidence"] == {str(finding.uuid): 2}
    assert rationales["comparator"] == "A dummy pill is vague for placebo."


def test_span_can_be_edited_and_deleted(page):
    rater = UserFactory(username="rater1")
    assignment, _ = make_factpico_assignment(rater, summary_text=SUMMARY)
    log_in(page, rater.username, PASSWORD)
    open_item(page, assignment)
    drag_select(page, "#summary-text", "Attacks fell")
    page.get_by_role("button", name="Mark selection: I. Added information").click()
    page.get_by_label("Factual", exact=True).check()
    page.locator("#span-added_info-rationale").fill("first")
    page.get_by_role("button", name="Save highlight").click()
    drag_select(page, "#summary-text", "fell a lot")  # overlapping highlight
    page.get_by_role("button", name="Mark selection: I. Added information").click()
    page.get_by_label("Not factual").check()
    page.locator("#span-added_info-rationale").fill("second")
    page.get_by_role("button", name="Save highlight").click()
    assert page.locator("#q-added_info-list li").count() == 2
    page.get_by_role("button", name="Edit highlight 1").click()
    page.locator("#span-added_info-rationale").fill("first, edited")
    page.get_by_role("button", name="Save highlight").click()
    page.get_by_role("button", name="Delete highlight 2").click()
    page.wait_for_function("() => document.getElementById('save-status').textContent.startsWith('Draft saved')")
    page.wait_for_timeout(1500)  # the last edit's autosave
    page.reload()
    assert page.locator("#q-added_info-list li").count() == 1
    assert "first, edited" in page.locator("#q-added_info-list li").inner_text()
    [draft] = revision_history(assignment)
    assert [s["rationale"] for s in revision_answers(draft)[0]["added_info"]] == ["first, edited"]


def test_span_selected_with_the_keyboard(page):
    rater = UserFactory(username="rater1")
    assignment, _ = make_factpico_assignment(rater, summary_text="Short 😀 text with words.")
    log_in(page, rater.username, PASSWORD)
    open_item(page, assignment)
    page.get_by_role("button", name="Select summary text with the keyboard").click()
    area = page.locator("#kbd-summary")
    area.focus()
    page.keyboard.press("Control+Home")
    for _ in range(8):  # "Short ", the emoji (one key press, two UTF-16 units), a space
        page.keyboard.press("ArrowRight")
    for _ in range(4):
        page.keyboard.press("Shift+ArrowRight")
    page.get_by_role("button", name="Mark selection: I. Added information").click()
    assert "“text”" in page.locator("#q-added_info-panel").inner_text()
    page.keyboard.press("Tab")  # the panel's first control has focus: move on by keyboard
    page.get_by_label("Factual", exact=True).check()
    page.locator("#span-added_info-rationale").fill("Just a word.")
    page.get_by_role("button", name="Save highlight").press("Enter")
    page.wait_for_function("() => document.getElementById('save-status').textContent.startsWith('Draft saved')")
    span = Span.objects.get()
    assert (span.start, span.end, span.text) == (8, 12, "text")


def test_citations_link_to_their_sentences_and_unknown_ids_are_marked(page):
    rater = UserFactory(username="rater1")
    study = StudyFactory()
    source = SourceFactory(study=study, key="PMC1", text="First fact here. Second fact here.")
    summary = SummaryFactory(source=source, text="A fact [PMC1]. Another [PMC999].")
    assignment = AssignmentFactory(summary=summary, rater=rater)
    log_in(page, rater.username, PASSWORD)
    open_item(page, assignment)
    known = page.locator(".cite", has_text="PMC1]")
    unknown = page.locator(".cite", has_text="PMC999")
    assert "not found" in unknown.get_attribute("aria-label")
    assert "cite-missing" in unknown.get_attribute("class")
    assert "cite-missing" not in known.get_attribute("class")
    known.focus()
    linked = page.locator(".sentences li.ref-linked")
    assert linked.count() == 2  # both sentences carry PMC1
    known.blur()
    assert linked.count() == 0
    unknown.hover()
    assert page.locator(".sentences li.ref-linked").count() == 0
    assert re.search(
        "not in context", page.locator(".cite-missing").evaluate("e => getComputedStyle(e, '::after').content")
    )
