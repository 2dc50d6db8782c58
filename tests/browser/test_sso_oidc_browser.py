"""A rater signs in with the institution's OpenID Connect provider in Chromium, from the
login page's button to their queue, and signs out at the provider too."""

import re

import pytest

from tests.factories import AssignmentFactory, StudyFactory, SummaryFactory, UserFactory
from tests.sso.conftest import oidc_idp, oidc_settings  # noqa: F401 (the provider's fixtures)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.mark.usefixtures("oidc_settings")
def test_rater_signs_in_with_the_provider_and_reaches_the_queue(page, live_server):
    rater = UserFactory(username="ana", email="ana@uni.example")
    study = StudyFactory(title="SSO study")
    AssignmentFactory(summary=SummaryFactory(source__study=study), rater=rater, position=0)

    page.goto("/accounts/login/")
    page.get_by_role("link", name="Sign in with University").click()
    # The provider's own pages: its login form, then its consent page.
    page.wait_for_url(re.compile(r"^http://127\.0\.0\.1:\d+/interaction/"))
    page.locator("input[name=login]").fill("ana")
    page.locator("input[name=password]").fill("whatever the provider accepts")
    page.get_by_role("button", name="Sign-in").click()
    page.get_by_role("button", name="Continue").click()

    page.wait_for_url(f"{live_server.url}/rate/**")
    assert "Signed in as ana" in page.locator("header").inner_text()
    assert page.get_by_role("link", name="Item 1", exact=True).is_visible()

    page.get_by_role("button", name="Log out").click()
    page.get_by_role("button", name="Yes, sign me out").click()
    page.wait_for_url(f"{live_server.url}/accounts/login/")
    page.goto("/rate/")
    page.wait_for_url(re.compile(r".*/accounts/login/\?next=/rate/$"))
