"""The rating page's papercuts of a new user's first hour, in a real Chromium:
every problem of a per-finding and per-claim question listed at once, a keyboard hint
true to the rubric, `n` through every finding and claim, digits on tickboxes, Esc giving
focus back, the skip link first, opening an item not starting it, skip moving on like
submit, and source and summary on one 800x600 screen."""

import re

import pytest
from playwright.sync_api import expect

from annotate.models import Assignment, Claim
from annotate.services.rubrics import load_builtin_rubric
from tests.annotate.factpico import add_finding, make_factpico_assignment
from tests.browser.conftest import log_in, open_item
from tests.factories import PASSWORD, AssignmentFactory, SourceFactory, StudyFactory, SummaryFactory, UserFactory

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

CLAIMS = ("Drug A halved asthma attacks in adults.", "It cured asthma in children.", "Side effects were mild.")


def claims_item(rater):
    """An item of the built-in claims rubric (per-claim answers, then a 1-4 scale) whose
    summary has three recorded claims."""
    study = StudyFactory(rubric=load_builtin_rubric(key="claims"))
    source = SourceFactory(study=study, text="Adults with asthma took drug A or a placebo. Attacks fell.")
    summary = SummaryFactory(study=study, source=source, text=" ".join(CLAIMS))
    for i, text in enumerate(CLAIMS):
        Claim.objects.create(summary=summary, index=i, text=text, verdict="supported")
    return AssignmentFactory(summary=summary, rater=rater, position=0)


def focused_id(page) -> str:
    return page.evaluate("document.activeElement ? document.activeElement.id : ''")


def test_a_refused_submit_lists_every_finding_and_claim_problem_at_once(page):
    rater = UserFactory(username="rater1")
    factpico, first = make_factpico_assignment(rater)
    second = add_finding(factpico.summary.source, "Café visits were ≥ 3.", outcome="café visits")
    log_in(page, rater.username, PASSWORD)
    open_item(page, factpico)
    # Result 1 scored without its rationale; result 2 not answered at all.
    page.locator(f"label[for='q-evidence-{first.uuid}-4']").click()
    page.get_by_role("button", name="Submit").click()
    summary = page.locator("#error-summary")
    expect(summary).to_be_focused(timeout=15_000)
    text = summary.inner_text()
    assert "Result 1: a rationale is required" in text and "Result 2: an answer is required" in text
    # Each is shown at its own result, and its link leads there.
    expect(page.locator(f"#q-evidence-part-{first.uuid}-error")).to_have_text("Result 1: a rationale is required")
    expect(page.locator(f"#q-evidence-part-{second.uuid}-error")).to_have_text("Result 2: an answer is required")
    summary.get_by_role("link").filter(has_text="VI. Evidence inference").nth(1).click()
    expect(page).to_have_url(re.compile(f"#q-evidence-part-{second.uuid}$"))

    claims = claims_item(rater)
    open_item(page, claims)
    items = page.locator("fieldset[data-question='claims_supported'] .claim-item")
    items.nth(0).locator("input[value='supported']").check()
    items.nth(1).locator("input[value='not_supported']").check()
    items.nth(1).locator("textarea").fill("Only adults took part.")
    items.nth(2).locator("input[value='supported']").check()
    page.get_by_role("button", name="Submit").click()
    expect(page.locator("#error-summary")).to_be_focused(timeout=15_000)
    listed = page.locator("#error-summary li").all_inner_texts()
    # Claim 1's and claim 3's missing rationales side by side, and the overall score.
    assert [t for t in listed if "Claim" in t] == [
        "Is each claim of the summary supported by the source?: Claim 1: a rationale is required",
        "Is each claim of the summary supported by the source?: Claim 3: a rationale is required",
    ]
    assert any(t.startswith("Overall, how far can a reader trust this summary?") for t in listed)
    assert Assignment.objects.get(pk=claims.pk).state != Assignment.State.SUBMITTED


def test_the_keyboard_reaches_every_claim_and_tickbox_and_gives_focus_back(page):
    rater = UserFactory(username="rater1")
    claims = claims_item(rater)
    log_in(page, rater.username, PASSWORD)
    open_item(page, claims)
    # The claims rubric's scale is 1-4: the hint says so (it said "1–5 set the score").
    hint = page.locator("#keys-hint").inner_text()
    assert "1–4" in hint and "1–5" not in hint

    # The skip link is the first Tab stop, and it leads past the source to the summary.
    page.keyboard.press("Tab")
    skip = page.locator("a.skip-link")
    expect(skip).to_be_focused()
    assert skip.is_visible()
    page.keyboard.press("Enter")
    expect(page.locator("#summary-heading")).to_be_focused()

    # n goes claim by claim, then to the overall score; digits answer where focus is.
    items = page.locator("fieldset[data-question='claims_supported'] .claim-item")
    items.nth(0).locator("input[value='supported']").focus()
    for number in (2, 3):
        page.keyboard.press("n")
        here = page.evaluate("document.activeElement.closest('.claim-item')?.dataset.claim")
        assert here == items.nth(number - 1).get_attribute("data-claim")
        page.keyboard.press("2")  # "Not supported", the second option
        expect(items.nth(number - 1).locator("input[value='not_supported']")).to_be_checked()
    page.keyboard.press("n")
    assert page.evaluate("document.activeElement.closest('fieldset').dataset.question") == "overall"
    page.keyboard.press("4")
    expect(page.locator("#q-overall-4")).to_be_checked()

    # ? opens the list; Esc closes it and gives focus back to where it was.
    page.keyboard.press("?")
    expect(page.locator("#shortcut-help")).to_be_focused()
    page.keyboard.press("Escape")
    expect(page.locator("#shortcut-help")).to_be_hidden()
    assert focused_id(page) == "q-overall-4"
    # So does the Close button, when the list was opened with nothing focused.
    page.evaluate("document.activeElement.blur()")
    page.keyboard.press("?")
    page.locator("#shortcut-help").get_by_role("button", name="Close").click()
    assert page.evaluate("document.activeElement !== document.body")


def test_digits_tick_the_boxes_of_a_tickbox_question(page):
    rater = UserFactory(username="rater1")
    item = AssignmentFactory(summary=SummaryFactory(), rater=rater, position=0)  # the LitSumm rubric
    log_in(page, rater.username, PASSWORD)
    open_item(page, item)
    assert "1–5" in page.locator("#keys-hint").inner_text()
    boxes = page.locator("fieldset[data-question='failure_modes'] input[type=checkbox]")
    boxes.first.focus()
    page.keyboard.press("3")
    expect(boxes.nth(2)).to_be_checked()
    page.keyboard.press("3")  # again: unticked
    expect(boxes.nth(2)).not_to_be_checked()
    page.keyboard.press("2")
    expect(boxes.nth(1)).to_be_checked()
    assert boxes.evaluate_all("bs => bs.filter(b => b.checked).map(b => b.value)") == ["hallucination"]


def test_opening_an_item_does_not_start_it_and_skip_moves_on_like_submit(page):
    rater = UserFactory(username="rater1")
    study = StudyFactory()
    items = [AssignmentFactory(summary=SummaryFactory(source__study=study), rater=rater, position=i) for i in range(3)]
    log_in(page, rater.username, PASSWORD)
    open_item(page, items[0])
    page.keyboard.press("]")  # paging through the queue
    page.wait_for_url(f"**/rate/{items[1].uuid}/")
    expect(page.locator(".rate-head .state strong")).to_have_text("Not started")
    for a in items[:2]:
        a.refresh_from_db()
        assert a.state == Assignment.State.PENDING and a.first_opened_at is not None
    page.goto("/rate/")
    assert page.locator("ol.queue .state").all_inner_texts() == ["Not started"] * 3

    # Skip leads to the next item, as Submit does, not back to the queue.
    open_item(page, items[1])
    page.locator("details.skip summary").click()
    page.get_by_label("Reason for skipping").fill("Not my field")
    page.get_by_role("button", name="Skip", exact=True).click()
    page.wait_for_url(f"**/rate/{items[2].uuid}/")
    expect(page.locator(".messages")).to_contain_text("Item skipped")
    # The skipped item says so, and offers to rate it after all (not "Change my answer").
    open_item(page, items[1])
    expect(page.locator(".skipped-note")).to_contain_text("Not my field")
    assert page.get_by_role("button", name="Change my answer").count() == 0
    page.get_by_role("button", name="Rate this item after all").click()
    expect(page.get_by_role("button", name="Submit")).to_be_visible()
    items[1].refresh_from_db()
    assert items[1].state == Assignment.State.IN_PROGRESS


ABSTRACT_SENTENCE = (
    "In a randomised, double-blind trial of {} adults with moderate asthma, drug A taken twice a day "
    "for twelve weeks reduced the rate of attacks compared with placebo"
)


@pytest.mark.parametrize("sentences", [12, 90])
def test_at_800x600_source_and_summary_share_the_screen(page, sentences):
    """A demo-sized abstract (12 sentences) and a context as long as the questions
    study's (88 sentences)."""
    page.set_viewport_size({"width": 800, "height": 600})
    rater = UserFactory(username="rater1")
    text = ". ".join(ABSTRACT_SENTENCE.format(100 + i) for i in range(sentences)) + "."
    item = AssignmentFactory(summary=SummaryFactory(source=SourceFactory(text=text)), rater=rater, position=0)
    log_in(page, rater.username, PASSWORD)
    open_item(page, item)
    box = page.evaluate(
        """() => {
          const top = e => e.getBoundingClientRect().top + window.scrollY;
          const source = document.querySelector('.source');
          return {source: top(source), height: source.getBoundingClientRect().height,
                  summary: top(document.getElementById('summary-text')),
                  form: top(document.getElementById('rating-form')),
                  width: document.documentElement.scrollWidth};
        }"""
    )
    # The context scrolls in a box of its own: scrolled to it, the summary is on screen too,
    # and the form follows within two screens (it started 1,517 to 5,874 px down).
    assert box["height"] <= 0.5 * 600
    assert box["summary"] - box["source"] < 600
    assert box["form"] < 2 * 600
    assert box["width"] <= 800
    assert page.evaluate("document.querySelector('.source').scrollHeight") > box["height"]
