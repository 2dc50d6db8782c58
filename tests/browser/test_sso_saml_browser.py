"""A rater signs in with the institution's SAML 2.0 identity provider in Chromium, from
the login page's button to their queue."""

import re

import pytest

from tests.factories import AssignmentFactory, StudyFactory, SummaryFactory, UserFactory
from tests.sso.conftest import saml_idp, saml_settings  # noqa: F401 (the provider's fixtures)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.mark.usefixtures("saml_settings")
def test_rater_signs_in_with_saml_and_reaches_the_queue(page, live_server):
    rater = UserFactory(username="ana", email="ana@uni.example")
    study = StudyFactory(title="SAML study")
    AssignmentFactory(summary=SummaryFactory(source__study=study), rater=rater, position=0)

    page.goto("/accounts/login/")
    page.get_by_role("link", name="Sign in with Test university").click()
    page.wait_for_url(re.compile(r"^http://localhost:\d+/sso/redirect\?SAMLRequest="))
    page.get_by_label("Login").fill("ana")
    page.get_by_label("Password").fill("whatever the provider accepts")
    page.get_by_role("button", name="Sign in").click()
    # The provider's page posts the signed assertion back by itself.
    page.wait_for_url(f"{live_server.url}/rate/**")
    assert "Signed in as ana" in page.locator("header").inner_text()
    assert page.get_by_role("link", name="Item 1", exact=True).is_visible()

    page.get_by_role("button", name="Log out").click()
    page.wait_for_url(f"{live_server.url}/accounts/login/")
    page.goto("/rate/")
    page.wait_for_url(re.compile(r".*/accounts/login/\?next=/rate/$"))
