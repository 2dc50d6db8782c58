"""Issue 32's whole path in a real Chromium, with CSP and CSRF on: a panel participant
arrives with Prolific's identifiers, consents, reads and acknowledges the instructions,
fails the qualification (feedback after each item), is told so and offered to leave; the
study admin allows a retry on the qualification page; the participant passes, rates the
main item, asks the admin about it, reads the answer in the item, submits, and is sent back
to the panel with the completion code. (A participant who declines consent and gets the
screen-out code: tests/browser/test_recruit_browser.py.)"""

import pytest
from playwright.sync_api import expect

from annotate.batches import create_batch, record_expected_answer
from annotate.models import Assignment, ItemFlag, QualificationAttempt, QualificationRetry, StudyMembership
from annotate.qualification import set_qualification_rule
from annotate.services import add_study_member
from recruit import services
from recruit.models import Participant
from tests.browser.conftest import log_in
from tests.browser.test_recruit_browser import Panel, _watch_csp
from tests.factories import PASSWORD, StudyFactory, SummaryFactory, UserFactory
from tests.recruit.helpers import COMPLETE, make_link, prolific_query, set_up_onboarding

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

GOLD = {"gold-0": 5, "gold-1": 1}


@pytest.fixture
def panel():
    p = Panel()
    yield p
    p.close()


def _gold_of_open_item(page) -> int:
    uuid = page.url.split("/rate/", 1)[1].split("/", 1)[0]
    return GOLD[Assignment.objects.get(uuid=uuid).summary.key]


def _answer(page, score: int):
    page.locator(f"label[for='q-overall-{score}']").click()
    page.get_by_role("button", name="Submit").click()


def test_a_participant_fails_is_let_retry_passes_asks_rates_and_gets_the_code(page, browser, live_server, panel):
    study = StudyFactory(slug="crowd-gate", title="Crowd study with a gate")
    admin = UserFactory(username="boss")
    add_study_member(study=study, user=admin, role=StudyMembership.Role.ADMIN)
    pilot = UserFactory(username="pilot")
    add_study_member(study=study, user=pilot, role=StudyMembership.Role.RATER)
    gold = [SummaryFactory(source__study=study, key=key) for key in GOLD]
    for summary in gold:
        record_expected_answer(
            study=study,
            summary=summary,
            purpose="gold",
            answers={"overall": GOLD[summary.key]},
            explanation=f"{summary.key}: see the <b>methods</b>.",
        )
    create_batch(
        study=study, name="Screening", kind="qualification", raters=[pilot], design="k_raters", seed=2, gold=gold
    )
    # Overall within ±1 of gold on every item; one attempt.
    set_qualification_rule(
        study=study,
        threshold=1.0,
        questions=["overall"],
        tolerances={"overall": 1},
        attempts_allowed=1,
        created_by=admin,
    )
    set_up_onboarding(study, questionnaire=False)
    link = make_link(study, items=1, k=2, summaries=2)
    link.completion_url = panel.url
    link.save()

    them = browser.new_context(base_url=live_server.url, viewport={"width": 1400, "height": 1000}).new_page()
    them.set_default_timeout(15_000)
    csp = _watch_csp(them)
    try:
        them.goto(f"/r/{services.link_token(link)}/{prolific_query(pid='5f8a1b2c3d4e5f6a7b8c9d01')}")
        them.wait_for_url(f"**/r/s/{study.slug}/consent/")
        them.get_by_role("button", name="I agree to take part").click()
        them.wait_for_url(f"**/r/s/{study.slug}/instructions/")
        them.get_by_label("I have read the instructions").check()
        them.get_by_role("button", name="Continue").click()
        participant = Participant.objects.get()

        # Attempt 1: 3 on both items, two away from gold 5 and 1: a fail. Feedback after each.
        for _ in GOLD:
            them.wait_for_url("**/rate/*-*/")
            _answer(them, 3)
            them.wait_for_url("**/feedback/")
            expect(them.locator("#feedback-explanation")).to_contain_text("see the <b>methods</b>.")
            them.locator("#continue").click()
        them.wait_for_url(f"**/r/s/{study.slug}/not-passed/")
        expect(them.locator("#gate-failed")).to_contain_text("You did not pass the qualification")
        assert QualificationAttempt.objects.get(rater=participant.user).passed is False
        participant.refresh_from_db()
        assert participant.outcome == ""  # not screened out until they leave
        # No main item is open to them meanwhile.
        main = Assignment.objects.get(rater=participant.user, batch=link.batch)
        assert them.goto(f"/rate/{main.uuid}/").status == 404
        them.goto(f"/r/s/{study.slug}/next/")
        them.wait_for_url(f"**/r/s/{study.slug}/not-passed/")

        # The study admin allows a retry on the qualification page.
        log_in(page, "boss", PASSWORD)
        page.goto(f"/studies/{study.slug}/qualification/")
        row = page.locator(f"tr[data-rater='{participant.user.username}']")
        expect(row).to_contain_text("failed")
        row.get_by_role("button", name="Allow a retry").click()
        expect(page.get_by_text("may try the qualification again.").first).to_be_visible()
        assert QualificationRetry.objects.get().granted_by == admin

        # Attempt 2: one away from gold on each: a pass; then the main item.
        them.locator("#check-again").click()
        for _ in GOLD:
            them.wait_for_url("**/rate/*-*/")
            _answer(them, {5: 4, 1: 2}[_gold_of_open_item(them)])
            them.wait_for_url("**/feedback/")
            them.locator("#continue").click()
        them.wait_for_url(f"**/rate/{main.uuid}/")
        assert QualificationAttempt.objects.filter(rater=participant.user, passed=True).count() == 1

        # A question about the main item, answered by the admin in the study's inbox.
        them.get_by_text("Ask the study admin about this item").click()
        them.get_by_label("What is it about?").select_option("guideline")
        them.get_by_label("Your note").fill("Does <i>dose</i> count as an outcome?")
        them.get_by_role("button", name="Send to the study admin").click()
        them.wait_for_url(f"**/rate/{main.uuid}/#item-flags")
        expect(them.locator("#item-flags")).to_contain_text("Does <i>dose</i> count as an outcome?")
        page.goto(f"/studies/{study.slug}/flags/")
        flag = ItemFlag.objects.get()
        entry = page.locator(f"#flag-{flag.uuid}")
        entry.get_by_label("Answer").fill("No: rate the outcomes the trial names.")
        entry.get_by_role("button", name="Send the answer").click()
        expect(page.locator(f"#flag-{flag.uuid}")).to_contain_text("Answered by boss")
        them.reload()
        expect(them.locator("#item-flags .flag-answer")).to_contain_text("No: rate the outcomes the trial names.")

        # The last item submitted: back to the panel with the completion code.
        # (The end page shows the code and refreshes to the panel within seconds: the page's
        # own test is in test_recruit_browser.py; here, the panel receives the code.)
        _answer(them, 4)
        them.wait_for_url(f"{panel.url}?cc={COMPLETE}", timeout=60_000)
        assert panel.codes == [COMPLETE]
        assert csp == []
        participant.refresh_from_db()
        assert participant.outcome == "completed"
    finally:
        them.context.close()
