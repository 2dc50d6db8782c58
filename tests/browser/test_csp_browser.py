"""The Content-Security-Policy in a real Chromium: the pages work under
it and nothing on them is refused (a refused inline script or style would mean a broken
page), including the Swagger UI at /api/docs/ and the Django admin."""

import re

import pytest

from annotate.models import StudyMembership
from annotate.services.members import add_study_member
from tests.browser.conftest import log_in
from tests.factories import PASSWORD, AssignmentFactory, StudyFactory, SummaryFactory, UserFactory

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def violations(page):
    """Every CSP violation the page reports, from the DOM event and from the console."""
    seen: list[str] = []
    page.on(
        "console",
        lambda message: seen.append(message.text) if "Content Security Policy" in message.text else None,
    )
    page.add_init_script(
        "document.addEventListener('securitypolicyviolation', e => "
        "console.error('Content Security Policy violation: ' + e.violatedDirective + ' ' + e.blockedURI));"
    )
    return seen


@pytest.fixture
def people():
    study = StudyFactory(title="CSP study")
    rater = UserFactory(username="rater1")
    items = [AssignmentFactory(summary=SummaryFactory(source__study=study), rater=rater, position=i) for i in range(2)]
    admin = UserFactory(username="boss", is_staff=True, is_superuser=True)
    add_study_member(study=study, user=admin, role=StudyMembership.Role.ADMIN)
    return study, rater, items, admin


def test_the_rating_page_works_under_the_policy(page, people, violations):
    study, rater, items, _ = people
    log_in(page, rater.username, PASSWORD)
    response = page.goto(f"/rate/{items[0].uuid}/")
    assert "default-src 'self'" in response.headers["content-security-policy"]
    # rate.js ran: the draft is saved through the API as the rater answers.
    page.locator("label", has_text=re.compile(r"^\s*4\b")).click()
    page.get_by_label("Feedback").fill("Fine.")
    page.wait_for_function("() => document.getElementById('save-status').textContent.startsWith('Draft saved')")
    assert violations == []


def test_the_swagger_ui_renders_under_the_policy(page, people, violations):
    *_, admin = people
    log_in(page, admin.username, PASSWORD)
    response = page.goto("/api/docs/")
    assert "script-src 'self'" in response.headers["content-security-policy"]
    page.locator(".swagger-ui .info .title").wait_for()
    assert "Summary rating platform API" in page.locator(".swagger-ui .info .title").inner_text()
    page.locator(".opblock-summary-path", has_text="/api/assignments/").first.wait_for()
    assert violations == []


def test_the_admin_and_the_study_pages_work_under_the_policy(page, people, violations):
    study, _, _, admin = people
    log_in(page, admin.username, PASSWORD)
    for url in (
        "/admin/",
        "/admin/annotate/study/",
        f"/admin/annotate/study/{study.pk}/change/",
        f"/studies/{study.slug}/",
        f"/studies/{study.slug}/batches/new/",
    ):
        response = page.goto(url)
        assert response.status == 200, url
        page.wait_for_load_state("load")
    assert violations == []


def test_the_docs_pages_with_tables_and_code_render_under_the_policy(page, people, violations):
    *_, admin = people
    log_in(page, admin.username, PASSWORD)
    # performance.md has the right-aligned tables; the others have code blocks.
    for url in ("/docs/performance.md", "/docs/api.md", "/docs/import-format.md", "/docs/deployment.md"):
        response = page.goto(url)
        assert response.status == 200, url
        page.wait_for_load_state("load")
    assert violations == []
    # The alignment the inline style gave is kept, by the docs stylesheet.
    page.goto("/docs/performance.md")
    cell = page.locator("td.align-right").first
    assert cell.evaluate("td => getComputedStyle(td).textAlign") == "right"
