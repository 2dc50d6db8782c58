"""SAML 2.0 sign-in against a real identity provider (pysaml2's IdP, signing with
xmlsec1): the account rules and the refused answers. The browser path is
tests/browser/test_sso_saml_browser.py."""

from __future__ import annotations

import base64
import re
import time
from datetime import UTC, datetime, timedelta
from urllib.parse import urlsplit

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse

from annotate.models import StudyMembership
from annotate.services import members
from tests.factories import StudyFactory, UserFactory
from tests.sso.provider_flow import saml_answer

pytestmark = pytest.mark.django_db

ACS = "/accounts/sso/saml/acs/"


def start(client, query: str = "") -> str:
    response = client.get(reverse("sso-saml-login") + query)
    assert response.status_code == 302
    return response["Location"]


def sign_in(client, login: str, *, variant: str = "", query: str = ""):
    answer = saml_answer(start(client, query), login, variant=variant)
    assert answer.pop("action") == f"http://testserver{ACS}"
    return client.post(ACS, answer), answer


def signed_in_user(client):
    user_id = client.session.get("_auth_user_id")
    return get_user_model().objects.get(pk=user_id) if user_id else None


def test_metadata_is_served_for_the_provider(client, saml_settings):
    response = client.get(reverse("sso-saml-metadata"))
    assert response.status_code == 200
    body = response.content.decode()
    assert 'entityID="http://testserver/accounts/sso/saml/metadata/"' in body
    assert 'Location="http://testserver/accounts/sso/saml/acs/"' in body
    assert 'WantAssertionsSigned="true"' in body


def test_nothing_configured_no_button_and_no_saml_pages(client, settings):
    settings.SAML_IDP_METADATA_URL = settings.SAML_IDP_METADATA_FILE = ""
    settings.OIDC_PROVIDERS = {}
    assert "Sign in with" not in client.get("/accounts/login/").content.decode()
    assert client.get(reverse("sso-saml-metadata")).status_code == 404


def test_signed_assertion_signs_in_the_account_with_that_address(client, saml_settings):
    assert "Sign in with Test university" in client.get("/accounts/login/").content.decode()
    ana = UserFactory(username="ana", email="ana@uni.example")
    response, _ = sign_in(client, "ana", query="?next=/rate/")
    assert response.status_code == 302 and response["Location"] == "/rate/"
    assert signed_in_user(client) == ana
    assert client.session["sso_signed_in"] == {"protocol": "saml"}


def refusals_logged(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "sso.saml"]


@pytest.mark.parametrize(
    ("variant", "refusal"),
    [
        ("unsigned", "SignatureError"),
        ("other-audience", "Exception"),  # pysaml2: "AudienceRestrictions conditions not satisfied"
    ],
)
def test_faulty_assertions_are_refused(client, saml_settings, caplog, variant, refusal):
    UserFactory(username="ana", email="ana@uni.example")
    response, answer = sign_in(client, "ana", variant=variant)
    assert response.status_code == 403
    assert "could not be verified" in response.content.decode()
    assert signed_in_user(client) is None
    assert refusals_logged(caplog) == [f"SAML sign-in refused: {refusal}"]
    # Nothing logged holds the assertion.
    assert not any(answer["SAMLResponse"][:40] in r.getMessage() for r in caplog.records)


def test_expired_assertion_is_refused(client, saml_settings, caplog):
    saml_settings.SAML_CLOCK_SKEW_SECONDS = 0
    UserFactory(username="ana", email="ana@uni.example")
    answer = saml_answer(start(client), "ana", variant="brief")
    answer.pop("action")
    assertion = base64.b64decode(answer["SAMLResponse"]).decode()
    ends_at = datetime.fromisoformat(re.search(r'Conditions[^>]*NotOnOrAfter="([^"]+)"', assertion).group(1))
    # Until the assertion's own end has passed in whole seconds (pysaml2 compares seconds).
    while datetime.now(UTC) < ends_at + timedelta(seconds=1):
        time.sleep(0.1)
    response = client.post(ACS, answer)
    assert response.status_code == 403
    assert signed_in_user(client) is None
    assert refusals_logged(caplog) == ["SAML sign-in refused: ResponseLifetimeExceed"]


def test_replayed_answer_is_refused(client, saml_settings):
    UserFactory(username="ana", email="ana@uni.example")
    response, answer = sign_in(client, "ana")
    assert response.status_code == 302
    client.logout()
    again = client.post(ACS, answer)
    assert again.status_code == 403
    assert signed_in_user(client) is None


def test_an_answer_posted_in_another_browser_is_refused(client, saml_settings):
    """Login CSRF: an answer to a request made in the attacker's browser signs in no one else."""
    from django.test import Client

    UserFactory(username="ana", email="ana@uni.example")
    answer = saml_answer(start(Client()), "ana")
    answer.pop("action")
    response = client.post(ACS, answer)
    assert response.status_code == 403
    assert signed_in_user(client) is None


def test_groups_give_roles_to_a_new_account(client, saml_settings):
    pilot = StudyFactory(slug="pilot")
    response, _ = sign_in(client, "cy")
    assert response.status_code == 403  # no account, none made
    saml_settings.SSO_CREATE_ACCOUNTS = True
    saml_settings.SSO_GROUP_ROLES = ["pilot-admins=pilot:admin"]
    response, _ = sign_in(client, "cy")
    assert response.status_code == 302
    cy = signed_in_user(client)
    assert cy.email == "cy@uni.example"
    assert list(StudyMembership.objects.filter(user=cy, study=pilot).values_list("role", flat=True)) == ["admin"]


def test_invitation_accepted_by_signing_in(client, saml_settings):
    study = StudyFactory()
    admin = UserFactory(username="pi")
    members.add_study_member(study=study, user=admin, role="admin")
    invitation = members.invite_member(study=study, email="ana.home@example.org", role="rater", invited_by=admin)
    link = urlsplit(invitation.link).path
    assert "Sign in with Test university" in client.get(link, follow=True).content.decode()
    response, _ = sign_in(client, "ana", query=f"?invitation={link.split('/')[3]}")
    assert response.status_code == 302
    account = signed_in_user(client)
    assert account == invitation.user and account.email == "ana@uni.example"
    assert not account.has_usable_password()
