"""The recruitment page in Chromium at 800 px wide: nothing wider than the window, one
stable URL per link, its copy button (static script, CSP on), a link edited on the page."""

import pytest

from annotate.models import StudyMembership
from annotate.services.members import add_study_member
from recruit.models import LinkChange
from recruit.services import links
from tests.browser.conftest import log_in
from tests.browser.test_recruit_browser import _watch_csp
from tests.factories import PASSWORD, StudyFactory, UserFactory
from tests.recruit.helpers import make_link

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_the_recruitment_page_fits_800_px_copies_and_edits_a_link(page, live_server):
    study = StudyFactory(slug="crowd-links", title="Crowd links")
    admin = UserFactory(username="boss")
    add_study_member(study=study, user=admin, role=StudyMembership.Role.ADMIN)
    link = make_link(study, name="wave one with a rather long name")
    make_link(study, name="wave two", summaries=0)
    page.set_viewport_size({"width": 800, "height": 900})
    page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=live_server.url)
    page.set_default_timeout(15_000)
    csp = _watch_csp(page)
    log_in(page, "boss", PASSWORD)
    page.goto(f"/studies/{study.slug}/recruitment/")
    widths = page.evaluate("() => [document.documentElement.scrollWidth, window.innerWidth]")
    assert widths[0] <= widths[1] == 800, widths

    field = page.locator(f"#url-{link.uuid}")
    url = field.input_value()
    assert f"/r/{links.link_token(link)}/?PROLIFIC_PID=" in url
    page.locator(f"#link-{link.uuid} .copy-button").click()
    page.wait_for_function("() => document.querySelector('.copy-status').textContent === 'Copied.'")
    assert page.evaluate("() => navigator.clipboard.readText()") == url
    page.reload()
    assert page.locator(f"#url-{link.uuid}").input_value() == url  # the same URL on every load

    card = page.locator(f"#link-{link.uuid}")
    card.get_by_text("Change limits, codes and messages").click()
    card.get_by_label("Max participants").fill("12")
    card.get_by_role("button", name="Save the changes").click()
    page.wait_for_url(f"**/studies/{study.slug}/recruitment/")
    assert "max_participants changed" in page.locator(".messages").inner_text()
    assert LinkChange.objects.get().changes == {"max_participants": [30, 12]}
    assert csp == []
