"""SAML 2.0 sign-in with one identity provider (settings SAML_IDP_METADATA_URL or
SAML_IDP_METADATA_FILE), on pysaml2, which checks signatures with Debian's xmlsec1.

The request goes by the HTTP-Redirect binding and the answer comes back by HTTP-POST to
the assertion consumer service. pysaml2 checks the answer: the assertion signed by the
provider's key from its metadata (an unsigned one is refused), for this service provider
(audience), within its validity, and in answer to the request this browser started
(InResponseTo). That request is remembered in a signed cookie of its own, not the
session: the provider's POST comes from another site, and a browser sends the session
cookie (SameSite=Lax) on no cross-site POST. The account rules are sso.services'."""

from __future__ import annotations

import logging
import shutil
from functools import lru_cache

import requests
from django.conf import settings
from django.core import signing
from django.urls import reverse
from django.utils.translation import gettext
from saml2 import BINDING_HTTP_POST, BINDING_HTTP_REDIRECT
from saml2.client import Saml2Client
from saml2.config import SPConfig
from saml2.metadata import create_metadata_string

from sso.services import NOT_VERIFIED, Identity, PendingInvitation, SignInRefused, account_for

logger = logging.getLogger(__name__)

COOKIE = "sso_saml_request"
COOKIE_SALT = "sso.saml.request"
# A sign-in not finished within this many seconds is refused (the person starts again).
REQUEST_MAX_AGE = 600


def entity_id(request) -> str:
    return settings.SAML_SP_ENTITY_ID or request.build_absolute_uri(reverse("sso-saml-metadata"))


def sp_config(request) -> SPConfig:
    """The service provider's pysaml2 configuration for this site's address."""
    acs = request.build_absolute_uri(reverse("sso-saml-acs"))
    return _sp_config(
        entity_id(request),
        acs,
        settings.SAML_IDP_METADATA_URL,
        settings.SAML_IDP_METADATA_FILE,
        settings.SAML_SP_KEY_FILE,
        settings.SAML_SP_CERT_FILE,
        settings.SAML_CLOCK_SKEW_SECONDS,
    )


@lru_cache(maxsize=8)
def _sp_config(entity, acs, metadata_url, metadata_file, key_file, cert_file, clock_skew) -> SPConfig:
    """Built once per process for each address and setting (the provider's metadata is
    fetched then); a failure is not cached."""
    conf = {
        "entityid": entity,
        "xmlsec_binary": settings.SAML_XMLSEC_BINARY or shutil.which("xmlsec1"),
        "metadata": {"inline": [_idp_metadata(metadata_url, metadata_file)]},
        "allow_unknown_attributes": True,
        "accepted_time_diff": clock_skew,
        "service": {
            "sp": {
                "name": "Summary ratings",
                "endpoints": {"assertion_consumer_service": [(acs, BINDING_HTTP_POST)]},
                "want_assertions_signed": True,
                "want_response_signed": False,
                "allow_unsolicited": False,
                "authn_requests_signed": bool(key_file),
            }
        },
    }
    if key_file:
        conf["key_file"] = key_file
        conf["cert_file"] = cert_file
    config = SPConfig()
    config.load(conf)
    return config


def _idp_metadata(url: str, path: str) -> str:
    """The identity provider's metadata: its file, or its URL."""
    if path:
        with open(path, encoding="utf-8") as f:
            return f.read()
    response = requests.get(url, timeout=settings.OIDC_TIMEOUT)
    response.raise_for_status()
    return response.text


def metadata(request) -> str:
    """This service provider's metadata, for the identity provider's administrator."""
    return create_metadata_string(None, config=sp_config(request), valid=None, sign=False)


def start(request, *, next_url: str, invitation: PendingInvitation | None) -> tuple[str, str]:
    """The provider's sign-in URL, and the signed cookie value that remembers the request."""
    client = Saml2Client(sp_config(request))
    request_id, info = client.prepare_for_authenticate(binding=BINDING_HTTP_REDIRECT)
    location = dict(info["headers"])["Location"]
    pending = {
        "id": request_id,
        "next": next_url,
        "invitation": [invitation.uidb64, invitation.token] if invitation else None,
    }
    return location, signing.dumps(pending, salt=COOKIE_SALT)


def finish(request):
    """The assertion consumer service: the POSTed answer checked by pysaml2 against the
    request this browser's cookie names, then the account. Returns (user, next URL)."""
    try:
        pending = signing.loads(request.COOKIES.get(COOKIE, ""), salt=COOKIE_SALT, max_age=REQUEST_MAX_AGE)
    except signing.BadSignature:
        raise SignInRefused(gettext("This sign-in has expired or was used already: sign in again.")) from None
    client = Saml2Client(sp_config(request))
    try:
        answer = client.parse_authn_request_response(
            request.POST.get("SAMLResponse", ""), BINDING_HTTP_POST, outstanding={pending["id"]: pending["next"]}
        )
    except Exception as exc:  # noqa: BLE001 (pysaml2 refuses an audience not ours with a plain Exception)
        # Whatever the check raised (a bad or missing signature, another audience, outside
        # the validity, no request of ours, an error status, broken XML), the answer is
        # refused. The exception's text may quote the assertion: only its kind is logged.
        logger.warning("SAML sign-in refused: %s", type(exc).__name__)
        raise SignInRefused(gettext(NOT_VERIFIED) % {"provider": settings.SAML_LABEL}) from None
    if answer is None or answer.assertion is None:
        raise SignInRefused(gettext(NOT_VERIFIED) % {"provider": settings.SAML_LABEL})
    attributes = answer.get_identity()
    emails = attributes.get(settings.SAML_EMAIL_ATTRIBUTE) or []
    groups = attributes.get(settings.SAML_GROUPS_ATTRIBUTE, []) if settings.SAML_GROUPS_ATTRIBUTE else []
    identity = Identity(
        provider=settings.SAML_LABEL, email=str(emails[0]).strip() if emails else "", groups=tuple(map(str, groups))
    )
    invitation = PendingInvitation(*pending["invitation"]) if pending["invitation"] else None
    return account_for(identity=identity, invitation=invitation), pending["next"]
