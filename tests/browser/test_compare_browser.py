"""The comparison page in Chromium, keyboard only, at 1280 px (the source and
both summaries side by side) and at 800 px (stacked, with a sticky source toggle)."""

import re

import pytest
from playwright.sync_api import expect

from annotate.models import Assignment, Span
from annotate.selectors.queue import latest_revision, revision_answers
from annotate.services import batches
from annotate.services.rubrics import load_builtin_rubric
from tests.browser.conftest import log_in
from tests.factories import PASSWORD, SourceFactory, StudyFactory, SummaryFactory, UserFactory

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _batch():
    study = StudyFactory(rubric=load_builtin_rubric(key="pairwise"))
    for s in range(2):
        source = SourceFactory(
            study=study, key=f"SRC{s}", text="Drug A lowered blood pressure. It was well tolerated.", ref="PMC7"
        )
        for g in ("sys-one", "sys-two"):
            SummaryFactory(source=source, key=f"{g}-{s}", generator=g, text=f"Summary by {g[-3:]} says [PMC7] ok.")
    rater = UserFactory(username="kbd")
    batch = batches.create_batch(study=study, name="b", raters=[rater], design="comparisons", seed=2, k=1)
    return rater, list(batch.assignments.order_by("position"))


def _box(page, selector):
    return page.locator(selector).bounding_box()


@pytest.mark.parametrize("width", [1280, 800])
def test_keyboard_only_comparison(page, width):
    page.set_viewport_size({"width": width, "height": 900})
    rater, assignments = _batch()
    first, second = assignments
    log_in(page, rater.username, PASSWORD)
    page.goto(f"/rate/{first.uuid}/")
    page.wait_for_load_state("load")
    source, a, b = _box(page, "#compare-source"), _box(page, "#summary-a"), _box(page, "#summary-b")
    if width == 1280:
        # Side by side: three columns on one row.
        assert source["x"] + source["width"] <= a["x"] + 1 and a["x"] + a["width"] <= b["x"] + 1
        assert abs(a["y"] - b["y"]) < 2
        assert page.locator("#source-toggle").is_hidden()
    else:
        # Stacked: A above B, the source tucked behind a toggle that stays in view.
        assert b["y"] >= a["y"] + a["height"] - 1
        toggle = page.locator("#source-toggle")
        expect(toggle).to_be_visible()
        expect(page.locator("#compare-source")).to_be_hidden()
        toggle.focus()
        page.keyboard.press("Enter")
        expect(page.locator("#compare-source")).to_be_visible()
        page.mouse.wheel(0, 600)
        # The wheel scrolls after it returns: wait for the page to have scrolled, then the
        # toggle must be held near the top (sticky), not scrolled away with the page.
        page.wait_for_function("() => window.scrollY > 0")
        page.wait_for_function(
            "() => { const top = document.getElementById('source-toggle').getBoundingClientRect().top;"
            " return top >= 0 && top < 60; }"
        )
        page.keyboard.press("Enter")
        expect(page.locator("#compare-source")).to_be_hidden()
    # A citation in a summary lights its source sentence when focused (wide layout shows it).
    if width == 1280:
        page.locator("#summary-a .cite").first.focus()
        expect(page.locator(".sentences li.cited").first).to_be_visible()

    # Keyboard: b much better overall, t (tie) on faithfulness, a slightly on completeness.
    page.locator("#question-overall input[type=radio]").first.focus()
    page.keyboard.press("b")
    page.keyboard.press("1")
    page.keyboard.press("n")
    page.keyboard.press("t")
    page.keyboard.press("n")
    page.keyboard.press("a")
    page.keyboard.press("2")
    left, right = first.shown_order
    expect(page.locator(f"#question-overall input[value='{right}']")).to_be_checked()
    expect(page.locator("#q-overall-much")).to_be_checked()
    expect(page.locator("#q-faithfulness-t")).to_be_checked()
    expect(page.locator("#q-completeness-slightly")).to_be_checked()
    expect(page.locator("#save-status")).to_have_text(re.compile("^Draft saved"), timeout=30000)

    # A highlight in summary B, selected with the keyboard.
    page.get_by_role("button", name="Select summary B text with the keyboard").focus()
    page.keyboard.press("Enter")
    expect(page.locator("#kbd-b")).to_be_focused()
    page.keyboard.press("Control+Home")
    for _ in range(7):
        page.keyboard.press("Shift+ArrowRight")
    page.get_by_role("button", name="Mark selection: Problems").focus()
    page.keyboard.press("Enter")
    page.locator("#q-problems-panel input[type=radio]").first.focus()
    page.keyboard.press("Space")
    page.get_by_role("button", name="Save highlight").focus()
    page.keyboard.press("Enter")
    expect(page.locator("#q-problems-list li")).to_have_count(1)

    page.keyboard.press("Control+Enter")
    page.wait_for_url(re.compile(f"/rate/{second.uuid}/"), timeout=30000)
    first.refresh_from_db()
    assert first.state == Assignment.State.SUBMITTED
    revision = latest_revision(first)
    answers, _ = revision_answers(revision)
    assert revision.shown_order == [left, right]
    assert answers["overall"] == {"preferred": right, "strength": "much"}
    assert answers["faithfulness"] == {"preferred": "tie"}
    assert answers["completeness"] == {"preferred": left, "strength": "slightly"}
    span = Span.objects.get(revision=revision)
    assert str(span.summary_uuid) == right and span.text == "Summary"
    # [ goes back to the previous item.
    page.locator("body").focus()
    page.keyboard.press("[")
    page.wait_for_url(re.compile(f"/rate/{first.uuid}/"))
