"""The sign-in pages of single sign-on: start a provider's sign-in, come back from it,
and sign out here and at the provider (docs/accounts.md)."""

from __future__ import annotations

import logging

import requests
from django.conf import settings
from django.contrib import auth
from django.contrib.auth.views import INTERNAL_RESET_SESSION_TOKEN
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render, resolve_url
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.utils.translation import gettext
from django.views.decorators.cache import never_cache
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_GET, require_POST

from annotate import throttling
from annotate.services import members
from sso import oidc
from sso.services import PendingInvitation, SignInRefused, saml_configured, uid_to_pk

logger = logging.getLogger(__name__)

SESSION_SIGNED_IN = "sso_signed_in"


def safe_next(request: HttpRequest, url: str) -> str:
    """`url` when it stays on this site, else "" (no open redirect after sign-in)."""
    if url and url_has_allowed_host_and_scheme(
        url, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        return url
    return ""


def refused(request: HttpRequest, message: str, status: int = 403) -> HttpResponse:
    return render(request, "registration/sso_refused.html", {"message": message}, status=status)


def refused_sign_in(request: HttpRequest, message: str) -> HttpResponse:
    """A provider's answer the platform refuses (a replayed or expired flow, an answer that
    fails the protocol's checks, no account for the address) counts as a failed login of
    this client's address, as a wrong password does (annotate.throttling)."""
    throttling.record_address_failure(address=throttling.recorded_address(request))
    return refused(request, message)


def address_locked(request: HttpRequest) -> HttpResponse | None:
    """The lockout page (429) while the client's address is locked, else None: a locked
    address signs in neither with a password nor through a provider."""
    lock = throttling.address_lock(address=throttling.recorded_address(request))
    return throttling.lockout_response(request, lock) if lock else None


def pending_invitation(request: HttpRequest) -> PendingInvitation | None:
    """The invitation whose page the person came from (its link put the token in the
    session, as Django's set-password page does), when `invitation` names its account."""
    uidb64 = request.GET.get("invitation", "")
    if not uidb64:
        return None
    token = request.session.get(INTERNAL_RESET_SESSION_TOKEN, "")
    account = auth.get_user_model().objects.filter(pk=uid_to_pk(uidb64)).first()
    if not members.invitation_tokens.check_token(account, token):
        raise SignInRefused(gettext("This invitation link is not valid: it has been used already, or it has expired."))
    return PendingInvitation(uidb64=uidb64, token=token)


@never_cache
@require_GET
def oidc_login(request: HttpRequest, key: str) -> HttpResponse:
    if locked := address_locked(request):
        return locked
    try:
        prov = oidc.provider(key)
    except (requests.RequestException, ValueError, KeyError) as exc:
        logger.warning("OIDC provider %s unreachable: %s", key, type(exc).__name__)
        return refused(request, gettext("The sign-in service cannot be reached now: try again later."), status=503)
    try:
        invitation = pending_invitation(request)
    except SignInRefused as exc:
        return refused(request, exc.message)
    url = oidc.authorization_url(
        request, prov, next_url=safe_next(request, request.GET.get("next", "")), invitation=invitation
    )
    return redirect(url)


@never_cache
@require_GET
def oidc_callback(request: HttpRequest) -> HttpResponse:
    if locked := address_locked(request):
        return locked
    try:
        signed_in = oidc.finish(request)
    except SignInRefused as exc:
        return refused_sign_in(request, exc.message)
    auth.login(request, signed_in.user)
    request.session.pop(INTERNAL_RESET_SESSION_TOKEN, None)
    request.session[SESSION_SIGNED_IN] = {"protocol": "oidc", "provider": signed_in.provider.key}
    return redirect(signed_in.next_url or resolve_url(settings.LOGIN_REDIRECT_URL))


@require_POST
def sso_logout(request: HttpRequest) -> HttpResponse:
    """Sign out here, then at the provider the session came from (its end_session
    endpoint, which comes back to the login page). The provider is reached by a page that
    moves on by itself: a form may only post to this site (the Content-Security-Policy's
    form-action), and a redirect from the form would count as the form's."""
    signed_in = request.session.get(SESSION_SIGNED_IN) or {}
    provider_url = ""
    if signed_in.get("protocol") == "oidc" and signed_in.get("provider") in settings.OIDC_PROVIDERS:
        try:
            provider_url = oidc.logout_url(request, signed_in["provider"])
        except (requests.RequestException, ValueError, KeyError) as exc:
            # Signed out here all the same; the provider's session ends on its own.
            logger.warning("OIDC provider %s unreachable at sign-out: %s", signed_in["provider"], type(exc).__name__)
    auth.logout(request)
    if not provider_url:
        return redirect(settings.LOGOUT_REDIRECT_URL)
    return render(request, "registration/sso_logout.html", {"provider_url": provider_url})


@never_cache
@require_GET
def saml_login(request: HttpRequest) -> HttpResponse:
    if not saml_configured():
        raise Http404("SAML sign-in is not configured.")
    if locked := address_locked(request):
        return locked
    # pysaml2 (and its XML schemas) load on the first SAML request, not when the site starts.
    from sso import saml

    try:
        invitation = pending_invitation(request)
    except SignInRefused as exc:
        return refused(request, exc.message)
    location, cookie = saml.start(
        request, next_url=safe_next(request, request.GET.get("next", "")), invitation=invitation
    )
    response = redirect(location)
    # SameSite=None (with Secure) is what lets the provider's cross-site POST carry it; a
    # browser refuses SameSite=None on a cookie that is not Secure, so plain HTTP (a
    # development machine, with the provider on the same site) keeps Lax.
    secure = settings.SESSION_COOKIE_SECURE
    response.set_cookie(
        saml.COOKIE,
        cookie,
        max_age=saml.REQUEST_MAX_AGE,
        secure=secure,
        httponly=True,
        samesite="None" if secure else "Lax",
        path=reverse("sso-saml-acs"),
    )
    return response


@csrf_exempt  # the provider's POST: the signed assertion and this browser's cookie stand in for the token
@never_cache
@require_POST
def saml_acs(request: HttpRequest) -> HttpResponse:
    if not saml_configured():
        raise Http404("SAML sign-in is not configured.")
    # pysaml2 (and its XML schemas) load on the first SAML request, not when the site starts.
    from sso import saml

    if locked := address_locked(request):
        response = locked
    else:
        try:
            user, next_url = saml.finish(request)
        except SignInRefused as exc:
            response = refused_sign_in(request, exc.message)
        else:
            auth.login(request, user, backend=oidc.BACKEND)
            request.session.pop(INTERNAL_RESET_SESSION_TOKEN, None)
            request.session[SESSION_SIGNED_IN] = {"protocol": "saml"}
            response = redirect(next_url or resolve_url(settings.LOGIN_REDIRECT_URL))
    # Used once, refused or not: a replayed answer finds no request to match.
    response.delete_cookie(saml.COOKIE, path=reverse("sso-saml-acs"))
    return response


@require_GET
def saml_metadata(request: HttpRequest) -> HttpResponse:
    if not saml_configured():
        raise Http404("SAML sign-in is not configured.")
    # pysaml2 (and its XML schemas) load on the first SAML request, not when the site starts.
    from sso import saml

    return HttpResponse(saml.metadata(request), content_type="application/samlmetadata+xml")
