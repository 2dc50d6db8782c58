"""Live quality and questions to the admin in a real browser (docs/monitoring.md): a rater
flags an item, the admin answers in the study's inbox, the rater sees the answer on the
item; the monitor page updates in place when a new rating arrives, without moving the
admin's focus or losing what they are typing."""

import pytest
from playwright.sync_api import expect

from annotate.models import ItemFlag, StudyMembership
from annotate.services.batches import create_batch
from annotate.services.members import add_study_member
from annotate.services.ratings import submit_rating
from tests.browser.conftest import log_in, open_item
from tests.factories import PASSWORD, StudyFactory, SummaryFactory, UserFactory

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def a_study():
    study = StudyFactory()
    admin = UserFactory(username="boss")
    add_study_member(study=study, user=admin, role=StudyMembership.Role.ADMIN)
    raters = [UserFactory(username=name) for name in ("ra", "rb")]
    for i in range(3):
        SummaryFactory(source__study=study, key=f"s{i + 1}")
    batch = create_batch(study=study, name="main", raters=raters, design="k_raters", k=2, seed=1)
    return study, batch, raters


def test_a_rater_flags_an_item_the_admin_answers_and_the_rater_sees_the_answer(page, browser, live_server):
    study, batch, (ra, _) = a_study()
    assignment = batch.assignments.filter(rater=ra).order_by("position").first()
    log_in(page, "ra", PASSWORD)
    open_item(page, assignment)
    page.get_by_text("Ask the study admin about this item").click()
    page.get_by_label("What is it about?").select_option("broken_source")
    page.get_by_label("Your note").fill("The source stops <mid-sentence>.")
    page.get_by_role("button", name="Send to the study admin").click()
    page.wait_for_url(f"**/rate/{assignment.uuid}/#item-flags")
    flags = page.locator("#item-flags")
    expect(flags).to_contain_text("Broken or unreadable source")
    expect(flags).to_contain_text("The source stops <mid-sentence>.")
    expect(flags).to_contain_text("Not answered yet.")

    admin_context = browser.new_context(base_url=live_server.url, viewport={"width": 1200, "height": 900})
    try:
        admin = admin_context.new_page()
        admin.set_default_timeout(10_000)
        log_in(admin, "boss", PASSWORD)
        admin.goto(f"/studies/{study.slug}/")
        admin.get_by_role("link", name="Questions from raters").click()
        flag = ItemFlag.objects.get()
        entry = admin.locator(f"#flag-{flag.uuid}")
        expect(entry).to_contain_text("The source stops <mid-sentence>.")
        expect(entry).to_contain_text("From ra")
        entry.get_by_label("Answer").fill("Read the full text via the PMC link; rate what is shown.")
        entry.get_by_role("button", name="Send the answer").click()
        expect(admin.locator(".messages")).to_contain_text("Answer saved")
        expect(admin.locator(f"#flag-{flag.uuid}")).to_contain_text("Answered by boss")
    finally:
        admin_context.close()

    page.reload()
    expect(page.locator("#item-flags .flag-answer")).to_contain_text(
        "Read the full text via the PMC link; rate what is shown."
    )
    expect(page.locator("#item-flags .flag-waiting")).to_have_count(0)


def test_the_monitor_updates_in_place_when_a_rating_arrives(page):
    study, batch, (ra, rb) = a_study()
    log_in(page, "boss", PASSWORD)
    page.goto(f"/studies/{study.slug}/batches/{batch.uuid}/")
    page.get_by_role("link", name="Live quality monitor").click()
    row = page.locator("#monitor-table tr[data-rater=ra]")
    expect(row.locator(".items")).to_have_text("0")
    expect(page.locator("#monitor-summary")).to_contain_text("0 of 6 assignments submitted")
    reason = page.get_by_label("Reason (required to exclude; kept with the record)")
    reason.fill("Half-typed reason")
    reason.focus()
    page.evaluate("window.__sameDocument = true")  # gone if the page reloads

    first = batch.assignments.filter(rater=ra).order_by("position").first()
    submit_rating(assignment=first, rater=ra, answers={"overall": 4}, version=first.version)
    expect(row.locator(".items")).to_have_text("1", timeout=120_000)
    expect(page.locator("#monitor-summary")).to_contain_text("1 of 6 assignments submitted")
    assert page.evaluate("window.__sameDocument === true")
    expect(reason).to_be_focused()
    expect(reason).to_have_value("Half-typed reason")


def test_the_admin_pauses_and_excludes_from_the_monitor(page):
    study, batch, (ra, rb) = a_study()
    for rater in (ra, rb):
        a = batch.assignments.filter(rater=rater).order_by("position").first()
        submit_rating(assignment=a, rater=rater, answers={"overall": 4}, version=a.version)
    log_in(page, "boss", PASSWORD)
    page.goto(f"/studies/{study.slug}/batches/{batch.uuid}/monitor/")
    page.get_by_label("Rater").select_option("rb")
    page.get_by_role("button", name="Pause (no new items, no answers)").click()
    expect(page.locator("#monitor-table tr[data-rater=rb] .flags")).to_contain_text("Paused by boss")
    # Excluding needs a reason: without one, a 400 naming the field and nothing recorded.
    page.get_by_label("Rater").select_option("rb")
    page.get_by_role("button", name="Exclude their answers from the report").click()
    expect(page.locator("#monitor-error")).to_contain_text("reason")
    page.get_by_label("Rater").select_option("rb")
    page.get_by_label("Reason (required to exclude; kept with the record)").fill("Answered in 2 s each.")
    page.get_by_role("button", name="Exclude their answers from the report").click()
    expect(page.locator("#monitor-table tr[data-rater=rb] .flags")).to_contain_text("Excluded by boss")
    expect(page.locator("#monitor-table tr[data-rater=rb] .flags")).to_contain_text("Answered in 2 s each.")
