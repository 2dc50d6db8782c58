"""The qualification gate in a real Chromium (docs/qualification.md): the admin records
gold answers with the rubric's own widgets and sets the pass rule; a rater fails, sees
why after each item and a clear message at the end; the admin allows a retry; the rater
passes and then sees the main items."""

import pytest
from playwright.sync_api import expect

from annotate.models import Assignment, QualificationAttempt, QualificationRetry, StudyMembership
from annotate.services.batches import create_batch
from annotate.services.members import add_study_member
from tests.browser.conftest import log_in
from tests.factories import PASSWORD, StudyFactory, SummaryFactory, UserFactory

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


GOLD = (5, 1)


def gold_here(page) -> int:
    """The gold answer of the item open in the page (its order in the queue is random)."""
    uuid = page.url.rstrip("/").rsplit("/", 1)[1]
    return {"gold-0": GOLD[0], "gold-1": GOLD[1]}[Assignment.objects.get(uuid=uuid).summary.key]


def answer_and_submit(page, score):
    page.locator(f"label[for='q-overall-{score}']").click()
    page.get_by_role("button", name="Submit").click()
    page.wait_for_url("**/feedback/")


def test_a_rater_fails_is_allowed_a_retry_passes_and_reaches_the_main_items(page, browser, live_server):
    study = StudyFactory(slug="gate", title="Gated study")
    admin = UserFactory(username="gatekeeper")
    add_study_member(study=study, user=admin, role=StudyMembership.Role.ADMIN)
    rater = UserFactory(username="newcomer")
    gold = [SummaryFactory(source__study=study, key=f"gold-{i}") for i in range(2)]
    SummaryFactory(source__study=study, key="main-0")

    # The admin records the gold answers on the gold form: the rubric's own radios.
    log_in(page, "gatekeeper", PASSWORD)
    for summary, score in zip(gold, GOLD, strict=True):
        page.goto(f"/studies/{study.slug}/gold/{summary.uuid}/")
        page.locator(f"label[for='q-overall-{score}']").click()
        page.locator("#gold-explanation").fill(f"{summary.key}: the references are right, the <b>flow</b> is not.")
        page.get_by_role("button", name="Save expected answers").click()
        expect(page.get_by_text(f"Expected answers for {summary.key} recorded.").first).to_be_visible()
    create_batch(study=study, name="Main round", raters=[rater], design="k_raters", k=1, seed=1)
    create_batch(
        study=study, name="Screening", kind="qualification", raters=[rater], design="k_raters", seed=2, gold=gold
    )
    # The pass rule: overall within ±1 of gold on every item, one attempt.
    page.goto(f"/studies/{study.slug}/qualification/")
    page.get_by_label("Pass mark (% of answers matching gold)").fill("100")
    page.get_by_role("checkbox", name="Overall quality of the summary").check()
    page.get_by_label("Tolerance on “Overall quality of the summary” (1–5)", exact=False).fill("1")
    page.get_by_label("Attempts allowed").fill("1")
    page.get_by_role("button", name="Save pass rule").click()
    expect(page.locator("#rule-current")).to_contain_text("at least 100 % of the answers to overall match gold")

    rater_context = browser.new_context(base_url=live_server.url, viewport={"width": 1400, "height": 1000})
    try:
        them = rater_context.new_page()
        them.set_default_timeout(10_000)
        log_in(them, "newcomer", PASSWORD)
        them.goto("/rate/")
        expect(them.locator(".gate-pending")).to_contain_text("Qualification first")
        expect(them.locator(".phase-qualification")).to_have_count(2)
        expect(them.get_by_text("Main round")).to_have_count(0)

        # Attempt 1: 3 on both, two away from gold 5 and 1: a fail.
        them.get_by_role("link", name="Continue").click()
        first = them.url
        answer_and_submit(them, 3)
        expect(them.get_by_role("heading", name="Qualification: how your answer compares")).to_be_visible()
        # The explanation is shown as text, never as markup.
        expect(them.locator("#feedback-explanation")).to_contain_text("the <b>flow</b> is not.")
        expect(them.locator("#feedback-table")).to_contain_text("different")
        them.locator("#continue").click()
        assert them.url != first
        answer_and_submit(them, 3)
        expect(them.locator("#gate-failed")).to_contain_text("You did not pass the qualification")
        them.locator("#continue").click()
        them.wait_for_url("**/done/")
        expect(them.locator("#gate-failed")).to_contain_text("0 %")
        expect(them.get_by_text("All done")).to_have_count(0)
        assert QualificationAttempt.objects.get().passed is False

        # The admin allows a retry, on the qualification page.
        page.goto(f"/studies/{study.slug}/qualification/")
        expect(page.locator("tr[data-rater='newcomer']")).to_contain_text("failed")
        page.get_by_role("button", name="Allow a retry").click()
        expect(page.get_by_text("newcomer may try the qualification again.").first).to_be_visible()
        assert QualificationRetry.objects.get().granted_by == admin

        # Attempt 2: 4 against gold 5, 2 against gold 1, each one away (±1 matches): a pass.
        them.goto("/rate/")
        expect(them.locator(".gate-pending")).to_contain_text("attempt 2 of 2")
        them.get_by_role("link", name="Continue").click()
        answer_and_submit(them, {5: 4, 1: 2}[gold_here(them)])
        expect(them.locator("#feedback-table")).to_contain_text("same (within ±1)")
        them.locator("#continue").click()
        answer_and_submit(them, {5: 4, 1: 2}[gold_here(them)])
        expect(them.locator(".gate-passed")).to_contain_text("You passed the qualification")
        them.locator("#continue").click()
        # Straight on to the main item.
        them.wait_for_url("**/rate/*-*/")
        them.goto("/rate/")
        expect(them.locator(".phase-main")).to_have_count(1)
        expect(them.get_by_text("Main round")).to_have_count(1)
        expect(them.locator(".gate-passed")).to_be_visible()
        assert list(QualificationAttempt.objects.order_by("number").values_list("passed", flat=True)) == [False, True]
    finally:
        rater_context.close()
