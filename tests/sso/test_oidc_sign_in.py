"""OpenID Connect sign-in against a real provider (oidc-provider under Node.js): the
account rules and the refused cases. The browser path is tests/browser/test_sso_oidc_browser.py."""

from __future__ import annotations

import time
from urllib.parse import parse_qs, urlsplit

import jwt
import pytest
import requests
from django.contrib.auth import get_user_model
from django.core.exceptions import SuspiciousOperation
from django.urls import reverse

from annotate.models import StudyMembership
from annotate.services import members
from sso import oidc
from tests.factories import StudyFactory, UserFactory
from tests.sso.conftest import CLIENT_SECRET, free_port, provider_settings
from tests.sso.provider_flow import code_for, sign_in_at_provider

pytestmark = pytest.mark.django_db

CALLBACK = "http://testserver/accounts/sso/oidc/callback/"


def start(client, query: str = "") -> str:
    response = client.get(reverse("sso-oidc-login", args=["uni"]) + query)
    assert response.status_code == 302
    return response["Location"]


def sign_in(client, login: str, query: str = ""):
    back = sign_in_at_provider(start(client, query), login)
    assert back.startswith(CALLBACK)
    return client.get(back.removeprefix("http://testserver")), back


def signed_in_user(client):
    user_id = client.session.get("_auth_user_id")
    return get_user_model().objects.get(pk=user_id) if user_id else None


def test_login_page_shows_a_button_per_provider_and_none_without(client, oidc_settings):
    assert "Sign in with University" in client.get("/accounts/login/").content.decode()
    oidc_settings.OIDC_PROVIDERS = {}
    assert "Sign in with" not in client.get("/accounts/login/").content.decode()


def test_verified_address_signs_in_the_account_that_has_it(client, oidc_settings):
    ana = UserFactory(username="ana", email="ANA@uni.example")
    response, _ = sign_in(client, "ana")
    assert response.status_code == 302 and response["Location"] == "/"
    assert signed_in_user(client) == ana
    assert client.session["sso_signed_in"] == {"protocol": "oidc", "provider": "uni"}


def test_switching_the_account_off_ends_its_provider_session(client, oidc_settings):
    ana = UserFactory(username="ana", email="ana@uni.example")
    sign_in(client, "ana")
    assert client.get("/accounts/").status_code == 200
    ana.is_active = False
    ana.save(update_fields=["is_active"])
    assert client.get("/accounts/").status_code == 302


def test_an_unreachable_provider_is_a_page_not_an_error(client, oidc_settings):
    oidc_settings.OIDC_PROVIDERS = {"down": provider_settings(f"http://127.0.0.1:{free_port()}")}
    response = client.get(reverse("sso-oidc-login", args=["down"]))
    assert response.status_code == 503
    assert "cannot be reached" in response.content.decode()


def test_replayed_state_is_refused(client, oidc_settings, django_user_model):
    UserFactory(username="ana", email="ana@uni.example")
    response, back = sign_in(client, "ana")
    assert response.status_code == 302
    client.logout()
    again = client.get(back.removeprefix("http://testserver"))
    assert again.status_code == 403
    assert "expired or was used already" in again.content.decode()
    assert signed_in_user(client) is None


def test_a_callback_from_another_browser_is_refused(client, oidc_settings):
    """Login CSRF: a code and state made in the attacker's session do not sign in the victim."""
    from django.test import Client

    UserFactory(username="ana", email="ana@uni.example")
    back = sign_in_at_provider(start(Client()), "ana")
    response = client.get(back.removeprefix("http://testserver"))
    assert response.status_code == 403
    assert signed_in_user(client) is None


def test_unverified_address_is_refused(client, oidc_settings):
    UserFactory(username="ben", email="ben@uni.example")
    response, _ = sign_in(client, "ben")
    assert response.status_code == 403
    assert "has not verified your e-mail address" in response.content.decode()
    assert signed_in_user(client) is None


def test_unknown_address_is_refused_unless_accounts_are_created(client, oidc_settings):
    response, _ = sign_in(client, "cy")
    assert response.status_code == 403
    assert "ask your study admin for an invitation" in response.content.decode()
    assert not get_user_model().objects.filter(email="cy@uni.example").exists()

    pilot = StudyFactory(slug="pilot")
    oidc_settings.SSO_CREATE_ACCOUNTS = True
    oidc_settings.SSO_GROUP_ROLES = ["raters=pilot:rater", "pilot-admins=pilot:admin", "raters=nowhere:rater"]
    response, _ = sign_in(client, "cy")
    assert response.status_code == 302
    cy = signed_in_user(client)
    assert (cy.username, cy.email, cy.has_usable_password()) == ("cy", "cy@uni.example", False)
    roles = set(StudyMembership.objects.filter(user=cy, study=pilot).values_list("role", flat=True))
    assert roles == {"rater", "admin"}


def test_staff_accounts_keep_their_password_login(client, oidc_settings):
    get_user_model().objects.create_superuser("root", "root@uni.example", "x-long-password-1")
    response, _ = sign_in(client, "root")
    assert response.status_code == 403
    assert signed_in_user(client) is None


@pytest.mark.parametrize(
    ("next_url", "landing"),
    [("/rate/", "/rate/"), ("https://evil.example/", "/"), ("//evil.example/", "/")],
)
def test_after_sign_in_only_pages_of_this_site(client, oidc_settings, next_url, landing):
    UserFactory(username="ana", email="ana@uni.example")
    response, _ = sign_in(client, "ana", f"?next={next_url}")
    assert response["Location"] == landing


def test_invitation_accepted_by_signing_in_with_the_provider(client, oidc_settings):
    study = StudyFactory()
    admin = UserFactory(username="pi")
    members.add_study_member(study=study, user=admin, role="admin")
    invitation = members.invite_member(study=study, email="cy.private@example.org", role="rater", invited_by=admin)
    link = urlsplit(invitation.link).path
    page = client.get(link, follow=True)
    assert "Sign in with University" in page.content.decode()
    uidb64 = link.split("/")[3]

    response, _ = sign_in(client, "cy", f"?invitation={uidb64}")
    assert response.status_code == 302
    account = signed_in_user(client)
    assert account == invitation.user
    assert account.email == "cy@uni.example" and not account.has_usable_password()
    assert StudyMembership.objects.filter(user=account, study=study, role="rater").exists()
    # The link has done its work: it is no longer valid.
    client.logout()
    assert "This link is not valid" in client.get(link, follow=True).content.decode()


def test_invitation_sign_in_needs_a_valid_link(client, oidc_settings):
    study = StudyFactory()
    admin = UserFactory(username="pi")
    members.add_study_member(study=study, user=admin, role="admin")
    invitation = members.invite_member(study=study, email="cy@example.org", role="rater", invited_by=admin)
    uidb64 = urlsplit(invitation.link).path.split("/")[3]
    # Not through the link's page: no token in the session.
    response = client.get(reverse("sso-oidc-login", args=["uni"]) + f"?invitation={uidb64}")
    assert response.status_code == 403


def provider_token(issuer: str, client_id: str, login: str) -> tuple[str, str]:
    """A real ID token the provider issues to `client_id` for `login`, and its nonce."""
    nonce, verifier = "n" * 24, "v" * 64
    code = code_for(issuer, client_id=client_id, redirect_uri=CALLBACK, login=login, nonce=nonce, verifier=verifier)
    answer = requests.post(
        f"{issuer}/token",
        data={
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": CALLBACK,
            "client_id": client_id,
            "client_secret": CLIENT_SECRET,
            "code_verifier": verifier,
        },
        timeout=10,
    )
    answer.raise_for_status()
    return answer.json()["id_token"], nonce


def backend_for(provider_key: str) -> oidc.ProviderBackend:
    backend = oidc.ProviderBackend()
    backend.configure(oidc.provider(provider_key))
    return backend


def test_id_token_for_another_client_is_refused(oidc_settings, oidc_idp):
    oidc_settings.OIDC_PROVIDERS = {
        "uni": provider_settings(oidc_idp.issuer, "lab"),
        "other": provider_settings(oidc_idp.issuer, "other"),
    }
    token, nonce = provider_token(oidc_idp.issuer, "other", "ana")
    assert backend_for("other").verify_token(token, nonce=nonce)["email"] == "ana@uni.example"
    with pytest.raises(SuspiciousOperation, match="InvalidAudienceError"):
        backend_for("uni").verify_token(token, nonce=nonce)


def test_expired_id_token_is_refused(oidc_settings, oidc_idp):
    oidc_settings.OIDC_PROVIDERS = {"brief": provider_settings(oidc_idp.issuer, "brief")}
    token, nonce = provider_token(oidc_idp.issuer, "brief", "ana")
    expiry = jwt.decode(token, options={"verify_signature": False})["exp"]
    while time.time() <= expiry + 1:  # the token's own expiry, not a fixed wait
        time.sleep(0.1)
    with pytest.raises(SuspiciousOperation, match="ExpiredSignatureError"):
        backend_for("brief").verify_token(token, nonce=nonce)


def test_callback_without_code_or_with_error_signs_no_one_in(client, oidc_settings):
    state = parse_qs(urlsplit(start(client)).query)["state"][0]
    response = client.get(f"/accounts/sso/oidc/callback/?state={state}&error=access_denied")
    assert response.status_code == 403
    assert signed_in_user(client) is None
