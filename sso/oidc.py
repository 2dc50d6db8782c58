"""OpenID Connect sign-in: the authorization code flow with PKCE, state and nonce, for
each provider of settings.OIDC_PROVIDERS.

mozilla-django-oidc's backend does the protocol's checks (the token request, the
provider's signing keys, the signature, the nonce, userinfo); this module gives it the
provider's endpoints from its discovery document, adds what that backend leaves out (the
ID token's audience, issuer and expiry, a verified e-mail address), and runs the flow
itself, since the library's views serve one provider named in settings. The account
rules are sso.services'."""

from __future__ import annotations

import base64
import hashlib
import logging
import time
from dataclasses import dataclass
from functools import lru_cache
from urllib.parse import urlencode

import jwt
import requests
from django.conf import settings
from django.contrib import auth
from django.core.exceptions import SuspiciousOperation
from django.http import Http404
from django.urls import reverse
from django.utils.crypto import get_random_string
from django.utils.translation import gettext
from mozilla_django_oidc.auth import OIDCAuthenticationBackend
from mozilla_django_oidc.utils import import_from_settings

from sso.services import NOT_VERIFIED, Identity, PendingInvitation, SignInRefused, account_for

logger = logging.getLogger(__name__)

SESSION_KEY = "sso_oidc_flows"
# A flow not finished within this many seconds is refused (the person starts again).
FLOW_MAX_AGE = 600
# Flows kept per session (several tabs may sign in at once); the oldest go first.
FLOWS_KEPT = 5
SIGNING_ALGORITHMS = ["RS256", "ES256", "PS256"]
BACKEND = "sso.oidc.ProviderBackend"


@dataclass(frozen=True)
class Provider:
    key: str
    label: str
    issuer: str
    client_id: str
    client_secret: str
    groups_claim: str
    authorization_endpoint: str
    token_endpoint: str
    userinfo_endpoint: str
    jwks_uri: str
    end_session_endpoint: str


def configured() -> list[tuple[str, str]]:
    """(key, label) of every configured provider, for the login page."""
    return [(key, conf["label"]) for key, conf in settings.OIDC_PROVIDERS.items()]


def provider(key: str) -> Provider:
    """The configured provider `key` with its endpoints (404 for an unknown key)."""
    conf = settings.OIDC_PROVIDERS.get(key)
    if conf is None:
        raise Http404("No such sign-in provider.")
    endpoints = _discovery(conf["issuer"], settings.OIDC_TIMEOUT)
    return Provider(
        key=key,
        label=conf["label"],
        issuer=conf["issuer"],
        client_id=conf["client_id"],
        client_secret=conf["client_secret"],
        groups_claim=conf["groups_claim"],
        **endpoints,
    )


@lru_cache(maxsize=16)
def _discovery(issuer: str, timeout: float) -> dict[str, str]:
    """The endpoints of the issuer's discovery document, fetched once per process (a
    failure is not cached: the next sign-in asks again)."""
    response = requests.get(f"{issuer}/.well-known/openid-configuration", timeout=timeout)
    response.raise_for_status()
    document = response.json()
    if document.get("issuer", "").rstrip("/") != issuer:
        raise SuspiciousOperation("The provider's discovery document names another issuer.")
    return {
        "authorization_endpoint": document["authorization_endpoint"],
        "token_endpoint": document["token_endpoint"],
        "userinfo_endpoint": document.get("userinfo_endpoint", ""),
        "jwks_uri": document["jwks_uri"],
        "end_session_endpoint": document.get("end_session_endpoint", ""),
    }


# --- the flow --------------------------------------------------------------------------------


def authorization_url(request, prov: Provider, *, next_url: str, invitation: PendingInvitation | None) -> str:
    """Where the browser goes to sign in at the provider; the flow's state, nonce and PKCE
    verifier (and where to go after, and the invitation) wait in the session under the state."""
    state = get_random_string(32)
    nonce = get_random_string(32)
    verifier = get_random_string(64)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    flows = request.session.get(SESSION_KEY, {})
    for old in sorted(flows, key=lambda s: flows[s]["at"])[: max(0, len(flows) - FLOWS_KEPT + 1)]:
        del flows[old]
    flows[state] = {
        "provider": prov.key,
        "nonce": nonce,
        "verifier": verifier,
        "at": time.time(),
        "next": next_url,
        "invitation": [invitation.uidb64, invitation.token] if invitation else None,
    }
    request.session[SESSION_KEY] = flows
    scopes = "openid email" + (" groups" if prov.groups_claim else "")
    params = {
        "response_type": "code",
        "client_id": prov.client_id,
        "redirect_uri": request.build_absolute_uri(reverse("sso-oidc-callback")),
        "scope": scopes,
        "state": state,
        "nonce": nonce,
        "code_challenge": challenge,
        "code_challenge_method": "S256",
    }
    return f"{prov.authorization_endpoint}?{urlencode(params)}"


@dataclass(frozen=True)
class SignedIn:
    user: object
    provider: Provider
    next_url: str


def finish(request) -> SignedIn:
    """The callback: the state must name a flow of this session (used once: a replayed or
    unknown state is refused), then the backend checks the provider's answer and
    sso.services picks the account. Raises SignInRefused with a message for the person."""
    flows = request.session.get(SESSION_KEY, {})
    flow = flows.pop(request.GET.get("state", ""), None)
    request.session[SESSION_KEY] = flows
    if flow is None or time.time() - flow["at"] > FLOW_MAX_AGE:
        raise SignInRefused(gettext("This sign-in has expired or was used already: sign in again."))
    prov = provider(flow["provider"])
    if request.GET.get("error") or not request.GET.get("code"):
        raise SignInRefused(gettext("%(provider)s did not sign you in.") % {"provider": prov.label})
    invitation = PendingInvitation(*flow["invitation"]) if flow["invitation"] else None
    try:
        user = auth.authenticate(
            request, oidc_provider=prov.key, nonce=flow["nonce"], code_verifier=flow["verifier"], invitation=invitation
        )
    except (requests.RequestException, SuspiciousOperation, ValueError) as exc:
        # The exception's text may quote the provider's answer: only its kind is logged.
        logger.warning("OIDC sign-in with %s refused: %s", prov.key, type(exc).__name__)
        raise SignInRefused(gettext(NOT_VERIFIED) % {"provider": prov.label}) from None
    if user is None:
        raise SignInRefused(gettext(NOT_VERIFIED) % {"provider": prov.label})
    return SignedIn(user=user, provider=prov, next_url=flow["next"])


def logout_url(request, key: str) -> str:
    """The provider's end_session_endpoint (RP-initiated logout), coming back to the login
    page; "" when the provider has none."""
    prov = provider(key)
    if not prov.end_session_endpoint:
        return ""
    params = {
        "client_id": prov.client_id,
        "post_logout_redirect_uri": request.build_absolute_uri(reverse(settings.LOGOUT_REDIRECT_URL)),
    }
    return f"{prov.end_session_endpoint}?{urlencode(params)}"


class ProviderBackend(OIDCAuthenticationBackend):
    """mozilla-django-oidc's backend for the provider a callback names. It answers only
    authenticate() calls that carry `oidc_provider` (a password login passes it by), and
    grants no permission of its own (annotate.throttling's ModelBackend does). Sessions
    signed in by a provider, OIDC or SAML, name it (BACKEND)."""

    def __init__(self, *args, **kwargs):
        # The library's __init__ reads one provider from settings; ours is per call.
        self.UserModel = auth.get_user_model()
        self.provider: Provider | None = None

    def get_settings(self, attr, *args):
        per_provider = {
            "OIDC_AUTHENTICATION_CALLBACK_URL": "sso-oidc-callback",
            "OIDC_VERIFY_SSL": True,
            "OIDC_PROXY": None,
            "OIDC_USE_NONCE": True,
            "OIDC_STORE_ACCESS_TOKEN": False,
            "OIDC_STORE_ID_TOKEN": False,
            "OIDC_TOKEN_USE_BASIC_AUTH": False,
            "OIDC_ALLOW_UNSECURED_JWT": False,
            "OIDC_TIMEOUT": settings.OIDC_TIMEOUT,
            "OIDC_RP_SCOPES": "openid email",
        }
        if attr in per_provider:
            return per_provider[attr]
        return import_from_settings(attr, *args)

    def authenticate(self, request, oidc_provider: str | None = None, invitation=None, **kwargs):
        # The provider by its key: Django hands the credentials to user_login_failed's
        # receivers, and the client secret is not theirs to see.
        if oidc_provider is None or request is None:
            return None
        self.configure(provider(oidc_provider))
        self.invitation = invitation
        return super().authenticate(request, **kwargs)

    def configure(self, prov: Provider) -> None:
        """Check tokens of `prov` from now on (its endpoints, client and keys)."""
        self.provider = prov
        self.OIDC_OP_TOKEN_ENDPOINT = prov.token_endpoint
        self.OIDC_OP_USER_ENDPOINT = prov.userinfo_endpoint
        self.OIDC_OP_JWKS_ENDPOINT = prov.jwks_uri
        self.OIDC_RP_CLIENT_ID = prov.client_id
        self.OIDC_RP_CLIENT_SECRET = prov.client_secret
        self.OIDC_RP_SIGN_ALGO = "RS256"
        self.OIDC_RP_IDP_SIGN_KEY = None

    def get_payload_data(self, token, key):
        """The ID token's claims, checked: signed by the provider's key with an asymmetric
        algorithm, for this client (aud), by this issuer, not expired. The library checks
        the signature only."""
        try:
            return jwt.decode(
                token,
                key,
                algorithms=SIGNING_ALGORITHMS,
                audience=self.provider.client_id,
                issuer=self.provider.issuer,
                options={"require": ["iss", "aud", "exp", "iat", "sub"]},
            )
        except jwt.InvalidTokenError as exc:
            raise SuspiciousOperation(f"ID token refused: {type(exc).__name__}") from None

    def get_or_create_user(self, access_token, id_token, payload):
        claims = dict(payload)
        if self.provider.userinfo_endpoint:
            userinfo = self.get_userinfo(access_token, id_token, payload)
            if userinfo.get("sub") != payload.get("sub"):
                raise SuspiciousOperation("userinfo names another subject than the ID token")
            claims.update(userinfo)
        if claims.get("email_verified") is not True:
            raise SignInRefused(
                gettext("%(provider)s has not verified your e-mail address, so it cannot sign you in here.")
                % {"provider": self.provider.label}
            )
        groups = claims.get(self.provider.groups_claim, []) if self.provider.groups_claim else []
        if isinstance(groups, str):
            groups = [groups]
        identity = Identity(
            provider=self.provider.label, email=str(claims.get("email", "")).strip(), groups=tuple(map(str, groups))
        )
        return account_for(identity=identity, invitation=self.invitation)

    # Permissions come from the password backend (the same accounts): none from here.
    def get_user_permissions(self, user_obj, obj=None):
        return set()

    def get_group_permissions(self, user_obj, obj=None):
        return set()

    def get_all_permissions(self, user_obj, obj=None):
        return set()

    def get_user(self, user_id):
        # The library's get_user also returns a switched-off account: a session signed in
        # by a provider ends when the account is switched off, as a password session does.
        user = super().get_user(user_id)
        return user if user is not None and self.user_can_authenticate(user) else None
