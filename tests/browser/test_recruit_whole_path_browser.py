"""The recruited participant's whole path in a real Chromium, with CSP and CSRF on: a panel participant
arrives with Prolific's identifiers, consents, reads and acknowledges the instructions,
fails the qualification (feedback after each item), is told so and offered to leave; the
study admin allows a retry on the qualification page; the participant passes, rates the
main item, asks the admin about it, reads the answer in the item, submits, and is sent back
to the panel with the completion code. (A participant who declines consent and gets the
screen-out code: tests/browser/test_recruit_browser.py.)"""

import pytest
from playwright.sync_api import expect

from annotate.models import Assignment, ItemFlag, QualificationAttempt, QualificationRetry, StudyMembership
from annotate.services.adjudication import record_expected_answer
from annotate.services.batches import create_batch
from annotate.services.members import add_study_member
from annotate.services.qualification import set_qualification_rule
from recruit.models import Participant
from recruit.services import links, onboarding
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
        them.goto(f"/r/{links.link_token(link)}/{prolific_query(pid='5f8a1b2c3d4e5f6a7b8c9d01')}")
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


# --- a whole Prolific study with five arrivals -------------------------------------------------

PANEL_STUDY = "PSTUDYWHOLE"


def _participant_page(browser, live_server, link, pid):
    them = browser.new_context(base_url=live_server.url, viewport={"width": 1200, "height": 900}).new_page()
    them.set_default_timeout(20_000)
    them.goto(f"/r/{links.link_token(link)}/{prolific_query(pid=pid, study_id=PANEL_STUDY, session=f'SUB-{pid}')}")
    return them


def _qualify(them, *, right: bool):
    for _ in GOLD:
        them.wait_for_url("**/rate/*-*/")
        gold = _gold_of_open_item(them)
        _answer(them, gold if right else {5: 3, 1: 3}[gold])
        them.wait_for_url("**/feedback/")
        them.locator("#continue").click()


def _rate_and_return(them, panel, code):
    them.wait_for_url("**/rate/*-*/")
    _answer(them, 4)
    them.wait_for_url(f"{panel.url}?cc={code}", timeout=60_000)


def test_a_prolific_study_end_to_end_with_five_arrivals(page, browser, live_server, panel, settings):
    """k = 1, three summaries, one item each, a qualification batch made without raters
    (exact gold, one attempt). A declines consent (screen-out code); B fails, is allowed a
    retry on the participants page, passes and completes; C passes and completes; D passes
    and holds the last item, then returns the study on Prolific's side: matching Prolific's
    submissions frees D's item and E, who arrives next, gets it and completes. The admin
    approves the completed submissions and pays B a bonus once, from the participants page."""
    from annotate.services.members import add_study_member as add_member
    from tests.recruit.helpers import CONSENT, SCREENOUT
    from tests.recruit.prolific_server import TOKEN, ProlificServer

    study = StudyFactory(slug="crowd-whole", title="A whole crowd study")
    admin = UserFactory(username="boss")
    add_member(study=study, user=admin, role=StudyMembership.Role.ADMIN)
    gold = [SummaryFactory(source__study=study, key=key) for key in GOLD]
    for summary in gold:
        record_expected_answer(study=study, summary=summary, purpose="gold", answers={"overall": GOLD[summary.key]})
    create_batch(study=study, name="Screening", kind="qualification", raters=[], design="k_raters", seed=3, gold=gold)
    set_qualification_rule(
        study=study, threshold=1.0, questions=["overall"], tolerances={}, attempts_allowed=1, created_by=admin
    )
    onboarding.save_onboarding(study=study, consent_text=CONSENT, instructions="")
    link = make_link(study, items=1, k=1, summaries=3)
    link.completion_url = panel.url
    link.save()

    with ProlificServer() as prolific:
        settings.PROLIFIC_API_TOKEN = TOKEN
        settings.PROLIFIC_API_URL = prolific.base_url
        for pid in "ABCDE":
            prolific.add_submission(submission_id=f"SUB-{pid}", participant_id=pid, study_id=PANEL_STUDY)
        pages = []
        try:
            # A declines: back to the panel with the screen-out code, their item back in the pool.
            a = _participant_page(browser, live_server, link, "A")
            pages.append(a)
            a.wait_for_url(f"**/r/s/{study.slug}/consent/")
            a.get_by_role("button", name="I do not agree").click()
            a.wait_for_url(f"{panel.url}?cc={SCREENOUT}", timeout=60_000)

            # B fails the qualification and waits on the not-passed page.
            b = _participant_page(browser, live_server, link, "B")
            pages.append(b)
            b.get_by_role("button", name="I agree to take part").click()
            _qualify(b, right=False)
            b.wait_for_url(f"**/r/s/{study.slug}/not-passed/")

            # C passes and completes.
            c = _participant_page(browser, live_server, link, "C")
            pages.append(c)
            c.get_by_role("button", name="I agree to take part").click()
            _qualify(c, right=True)
            _rate_and_return(c, panel, COMPLETE)

            # The admin allows B a retry from the participants page; B passes and completes.
            log_in(page, "boss", PASSWORD)
            page.goto(f"/studies/{study.slug}/participants/")
            b_row = page.locator(f"tr[data-participant='{Participant.objects.get(external_id='B').uuid}']")
            b_row.get_by_text("Act").click()
            b_row.get_by_role("button", name="Allow a retry").click()
            expect(page.locator(".messages")).to_contain_text("may try the qualification again")
            b.locator("#check-again").click()
            _qualify(b, right=True)
            _rate_and_return(b, panel, COMPLETE)

            # D passes and holds the last item; a newcomer now is turned away at once.
            d = _participant_page(browser, live_server, link, "D")
            pages.append(d)
            d.get_by_role("button", name="I agree to take part").click()
            _qualify(d, right=True)
            d.wait_for_url("**/rate/*-*/")
            d_item = Assignment.objects.get(rater__participant__external_id="D", batch=link.batch)
            late = _participant_page(browser, live_server, link, "LATE")
            pages.append(late)
            late.wait_for_url(f"{panel.url}?cc={SCREENOUT}", timeout=60_000)
            assert not Participant.objects.filter(external_id="LATE").exists()

            # D returns the study on Prolific: matching the submissions frees D's item.
            prolific.state.submissions["SUB-D"]["status"] = "RETURNED"
            page.goto(f"/studies/{study.slug}/participants/")
            page.get_by_role("button", name="Match Prolific's submissions").click()
            expect(page.locator(".messages")).to_contain_text("1 returned or timed out")
            d_item.refresh_from_db()
            assert d_item.state == "withdrawn"

            # E arrives, passes, and gets D's item.
            e = _participant_page(browser, live_server, link, "E")
            pages.append(e)
            e.get_by_role("button", name="I agree to take part").click()
            _qualify(e, right=True)
            e.wait_for_url("**/rate/*-*/")
            e_item = Assignment.objects.get(rater__participant__external_id="E", batch=link.batch)
            assert e_item.summary_id == d_item.summary_id
            _rate_and_return(e, panel, COMPLETE)

            assert panel.codes == [SCREENOUT, COMPLETE, COMPLETE, SCREENOUT, COMPLETE]
            outcomes = dict(Participant.objects.values_list("external_id", "outcome"))
            assert outcomes == {"A": "declined", "B": "completed", "C": "completed", "D": "left", "E": "completed"}

            # The admin approves the completed ones and pays B a bonus, once.
            prolific.state.submissions["SUB-B"]["status"] = "AWAITING REVIEW"
            page.goto(f"/studies/{study.slug}/participants/")
            for pid in "BCE":
                uuid = Participant.objects.get(external_id=pid).uuid
                page.locator(f"tr[data-participant='{uuid}'] input[type=checkbox]").check()
            page.get_by_role("button", name="Approve the ticked").click()
            expect(page.locator(".messages")).to_contain_text("3 submissions approved on Prolific.")
            (bulk,) = prolific.calls_to("bulk_approve")
            assert sorted(bulk.body["submission_ids"]) == ["SUB-B", "SUB-C", "SUB-E"]
            b_row = page.locator(f"tr[data-participant='{Participant.objects.get(external_id='B').uuid}']")
            b_row.get_by_text("Act").click()
            b_row.get_by_label("Bonus (e.g. 1.50)").fill("0.80")
            b_row.get_by_label("Why").fill("asked a good question")
            b_row.get_by_role("button", name="Pay the bonus").click()
            expect(page.locator(".messages")).to_contain_text("Bonus paid.")
            assert prolific.paid_cents("B") == [80]
            expect(page.locator("#panel-calls")).to_contain_text("bonus_pay")
        finally:
            for p in pages:
                p.context.close()
