"""A sign-in through an identity provider that the platform refuses counts as a failed login
of the client's address, against the real providers (oidc-provider under Node.js, pysaml2's
IdP): at LOGIN_ADDRESS_FAILURE_LIMIT refusals the address is locked for password and provider
sign-in alike, and another address is not (docs/accounts.md)."""

from __future__ import annotations

import pytest
from django.urls import reverse

from annotate.models import LoginThrottle
from tests.factories import PASSWORD, UserFactory
from tests.sso import test_oidc_sign_in as oidc_flow
from tests.sso import test_saml_sign_in as saml_flow

pytestmark = pytest.mark.django_db

LIMIT = 3
ELSEWHERE = {"REMOTE_ADDR": "192.0.2.44"}


def address_failures(address: str = "127.0.0.1") -> int:
    row = LoginThrottle.objects.filter(scope=LoginThrottle.Scope.ADDRESS, username="", address=address).first()
    return 0 if row is None else row.failures


def assert_locked(client, start_url: str) -> None:
    """The address is locked: the provider's button, the password login (even the right
    password) answer the lockout page; no one is signed in."""
    started = client.get(start_url)
    assert started.status_code == 429 and "Retry-After" in started
    assert "Too many failed logins" in started.content.decode()
    UserFactory(username="owner")
    password = client.post(reverse("login"), {"username": "owner", "password": PASSWORD})
    assert password.status_code == 429
    assert client.session.get("_auth_user_id") is None


def test_refused_oidc_sign_ins_lock_the_address(client, oidc_settings):
    oidc_settings.LOGIN_ADDRESS_FAILURE_LIMIT = LIMIT
    UserFactory(username="ben", email="ben@uni.example")  # the provider has not verified ben's address
    UserFactory(username="ana", email="ana@uni.example")
    for count in range(1, LIMIT):
        response, _ = oidc_flow.sign_in(client, "ben")
        assert response.status_code == 403 and "has not verified your e-mail address" in response.content.decode()
        assert address_failures() == count
    # A flow started before the lock, answered after it (below).
    late = type(client)()
    late_back = oidc_flow.sign_in_at_provider(oidc_flow.start(late), "ana")
    # A replayed state (ana's answer used a second time) counts as well: the last refusal.
    response, back = oidc_flow.sign_in(client, "ana")
    assert response.status_code == 302
    client.logout()
    assert client.get(back.removeprefix("http://testserver")).status_code == 403
    assert address_failures() == 0  # locked: counting starts again when the lock ends
    assert_locked(client, reverse("sso-oidc-login", args=["uni"]))
    # The answer of a flow started before the lock is refused by it, and not counted.
    assert late.get(late_back.removeprefix("http://testserver")).status_code == 429
    assert address_failures() == 0
    # Another address signs in as before.
    other = type(client)(**ELSEWHERE)
    back = oidc_flow.sign_in_at_provider(oidc_flow.start(other), "ana")
    assert other.get(back.removeprefix("http://testserver")).status_code == 302
    assert oidc_flow.signed_in_user(other).username == "ana"


def test_a_callback_refused_by_the_lock_is_not_counted_again(client, oidc_settings):
    oidc_settings.LOGIN_ADDRESS_FAILURE_LIMIT = 1
    UserFactory(username="ben", email="ben@uni.example")
    response, back = oidc_flow.sign_in(client, "ben")
    assert response.status_code == 403
    lock = LoginThrottle.objects.get(scope=LoginThrottle.Scope.ADDRESS, address="127.0.0.1")
    assert client.get(back.removeprefix("http://testserver")).status_code == 429
    lock_after = LoginThrottle.objects.get(pk=lock.pk)
    assert (lock_after.locked_until, lock_after.failures) == (lock.locked_until, lock.failures)


def test_refused_saml_answers_lock_the_address(client, saml_settings):
    saml_settings.LOGIN_ADDRESS_FAILURE_LIMIT = LIMIT
    UserFactory(username="ana", email="ana@uni.example")
    for count, variant in enumerate(("unsigned", "other-audience"), start=1):
        response, _ = saml_flow.sign_in(client, "ana", variant=variant)
        assert response.status_code == 403 and "could not be verified" in response.content.decode()
        assert address_failures() == count
    # A good answer replayed after signing out is the third refusal.
    response, answer = saml_flow.sign_in(client, "ana")
    assert response.status_code == 302
    client.logout()
    assert client.post(saml_flow.ACS, answer).status_code == 403
    assert address_failures() == 0  # locked: counting starts again when the lock ends
    assert_locked(client, reverse("sso-saml-login"))
    assert saml_flow.signed_in_user(client) is None


def test_a_successful_sign_in_counts_nothing(client, oidc_settings):
    oidc_settings.LOGIN_ADDRESS_FAILURE_LIMIT = LIMIT
    UserFactory(username="ana", email="ana@uni.example")
    for _ in range(LIMIT + 1):
        response, _ = oidc_flow.sign_in(client, "ana")
        assert response.status_code == 302
        client.logout()
    assert address_failures() == 0
