"""Login throttling that a stranger cannot turn against an account (docs/security.md).

Three counters see every failed login (the login page, the admin's, POST /api/auth/token/);
a sign-in through an identity provider (OIDC or SAML) that the platform refuses counts on
the address's counter, and a locked address cannot start or finish one (sso.views):

- **the pair** (username, address): LOGIN_FAILURE_LIMIT failures within
  LOGIN_COOLOFF_MINUTES lock that username *from that address* for LOGIN_COOLOFF_MINUTES.
  Only the one guessing is stopped; the owner, elsewhere, still signs in.
- **the address**: LOGIN_ADDRESS_FAILURE_LIMIT failures from one address, whatever the
  usernames, within the same window lock the address for LOGIN_COOLOFF_MINUTES (one
  machine trying many accounts).
- **the username**: from LOGIN_USERNAME_FAILURE_LIMIT failures within
  LOGIN_USERNAME_WINDOW_HOURS, from any addresses, each further failure makes the next
  attempt wait: 1 s after the first, doubling, at most LOGIN_USERNAME_MAX_DELAY_SECONDS.
  Guessing spread over many addresses is slowed to one try per delay, and the owner
  waits at most that delay: never a lock that outlasts it.

A login refused because of a lock or a delay is not counted and does not extend it
(the old django-axes setting restarted the cool-off on every failure, so one request every
15 minutes kept any account locked for ever). A successful login clears the pair's and the
username's counts. The admin sees every counter in the Django admin (Login locks) and
lifts one by deleting it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.contrib.auth.backends import ModelBackend
from django.core.exceptions import PermissionDenied
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.utils import timezone
from django.utils.translation import gettext, ngettext

from annotate.models import LoginThrottle
from core.exceptions import API_PREFIX, error_body

Scope = LoginThrottle.Scope

# Longer than any account's name (auth.User allows 150): what a counter records.
USERNAME_RECORD_LENGTH = 150


def client_ip(request: HttpRequest) -> str | None:
    """The client's address. Behind TRUSTED_PROXY_COUNT reverse proxies, each of which
    appends the address it received the request from to X-Forwarded-For, the client is
    the entry that many places from the right; anything left of it was written by the
    client and is not believed. Without proxies, REMOTE_ADDR."""
    remote = request.META.get("REMOTE_ADDR")
    count = settings.TRUSTED_PROXY_COUNT
    if count <= 0:
        return remote
    forwarded = [part.strip() for part in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",") if part.strip()]
    return forwarded[-count] if len(forwarded) >= count else remote


def recorded_username(raw) -> str:
    """The username as a counter stores it: at most USERNAME_RECORD_LENGTH characters, no
    NUL or lone surrogate (Django's login form does not check the username's length
    before authenticating; a 300-character or NUL name must still be counted, not a 500)."""
    text = str(raw or "")[:USERNAME_RECORD_LENGTH]
    return text.encode("utf-8", "replace").decode("utf-8").replace("\x00", "\ufffd")


def recorded_address(request: HttpRequest) -> str:
    return (client_ip(request) or "")[:64]


@dataclass(frozen=True)
class Lock:
    scope: str
    until: datetime

    def seconds_left(self, now: datetime | None = None) -> int:
        left = (self.until - (now or timezone.now())).total_seconds()
        return max(1, int(left + 0.999))

    def message(self) -> str:
        # In the request's language: the login page a rater meets shows it.
        seconds = self.seconds_left()
        if seconds < 120:
            wait = ngettext("%(count)s second", "%(count)s seconds", seconds) % {"count": seconds}
        else:
            minutes = round(seconds / 60)
            wait = ngettext("%(count)s minute", "%(count)s minutes", minutes) % {"count": minutes}
        if self.scope == Scope.USERNAME:
            return gettext(
                "Too many failed logins for this account: each try must now wait a little. "
                "Try again in %(wait)s, or ask your study admin to lift the delay."
            ) % {"wait": wait}
        return gettext(
            "Too many failed logins for this account or from this address. "
            "Try again in %(wait)s, or ask your study admin to lift the lock."
        ) % {"wait": wait}


def _keys(username: str, address: str) -> dict[str, tuple[str, str]]:
    return {Scope.PAIR: (username, address), Scope.ADDRESS: ("", address), Scope.USERNAME: (username, "")}


def _scope_filter(username: str, address: str) -> Q:
    query = Q()
    for scope, (name, addr) in _keys(username, address).items():
        query |= Q(scope=scope, username=name, address=addr)
    return query


def current_lock(*, username: str, address: str, now: datetime | None = None) -> Lock | None:
    """The lock or delay that refuses this login now (the one ending last), or None."""
    now = now or timezone.now()
    row = (
        LoginThrottle.objects.filter(_scope_filter(username, address), locked_until__gt=now)
        .order_by("-locked_until")
        .first()
    )
    return Lock(row.scope, row.locked_until) if row else None


def username_delay(failures: int) -> timedelta | None:
    """The wait after the username's `failures`-th failure in its window: none below the
    limit, then 1 s doubling per failure up to LOGIN_USERNAME_MAX_DELAY_SECONDS."""
    over = failures - settings.LOGIN_USERNAME_FAILURE_LIMIT
    if over < 0:
        return None
    return timedelta(seconds=min(settings.LOGIN_USERNAME_MAX_DELAY_SECONDS, 2 ** min(over, 30)))


def _window(scope: str) -> timedelta:
    if scope == Scope.USERNAME:
        return timedelta(hours=settings.LOGIN_USERNAME_WINDOW_HOURS)
    return timedelta(minutes=settings.LOGIN_COOLOFF_MINUTES)


def _count(scope: str, username: str, address: str, now: datetime) -> None:
    row, _ = LoginThrottle.objects.select_for_update().get_or_create(
        scope=scope, username=username, address=address, defaults={"window_start": now, "last_failure_at": now}
    )
    if row.window_start <= now - _window(scope):
        row.failures, row.window_start = 0, now
    row.failures += 1
    row.last_failure_at = now
    if scope == Scope.USERNAME:
        delay = username_delay(row.failures)
        row.locked_until = now + delay if delay else None
    else:
        limit = settings.LOGIN_FAILURE_LIMIT if scope == Scope.PAIR else settings.LOGIN_ADDRESS_FAILURE_LIMIT
        if row.failures >= limit:
            # Locked from now on; counting starts again from zero when the lock ends.
            row.locked_until = now + timedelta(minutes=settings.LOGIN_COOLOFF_MINUTES)
            row.failures, row.window_start = 0, row.locked_until
    row.save()


def record_failure(*, username: str, address: str) -> None:
    """Count one failed login (not one refused by a lock: those are never counted)."""
    _record(_keys(username, address))


def record_address_failure(*, address: str) -> None:
    """Count one failed sign-in that names no username (a refused answer of an identity
    provider: sso.views), on the address's counter alone."""
    _record({Scope.ADDRESS: ("", address)})


def address_lock(*, address: str, now: datetime | None = None) -> Lock | None:
    """The address's own lock, or None: what refuses a sign-in through an identity provider,
    which names no username until the provider has answered."""
    now = now or timezone.now()
    row = LoginThrottle.objects.filter(scope=Scope.ADDRESS, username="", address=address, locked_until__gt=now).first()
    return Lock(row.scope, row.locked_until) if row else None


def _record(keys: dict[str, tuple[str, str]]) -> None:
    now = timezone.now()
    for attempt in range(2):
        try:
            with transaction.atomic():
                for scope, (name, addr) in keys.items():
                    _count(scope, name, addr, now)
            return
        except IntegrityError:  # two first failures at once created the same row: count again
            if attempt:
                raise


def record_success(*, username: str, address: str) -> None:
    """A correct password: the pair's and the username's counts start again. The
    address's count stays (one success does not vouch for a machine trying many names)."""
    LoginThrottle.objects.filter(
        Q(scope=Scope.PAIR, username=username, address=address) | Q(scope=Scope.USERNAME, username=username)
    ).delete()


def lift(*, scope: str, username: str = "", address: str = "") -> int:
    """Lift a lock (and forget its count); what the admin's "Lift" does."""
    deleted, _ = LoginThrottle.objects.filter(scope=scope, username=username, address=address).delete()
    return deleted


class ThrottledModelBackend(ModelBackend):
    """Django's password check, behind the throttle. A login refused by a lock raises
    PermissionDenied (Django's authenticate() then stops and answers None) and leaves the
    lock on the request (`request.login_lock`), which LoginLockMiddleware and the token
    endpoint turn into the 429 answer. Without a request (client.login in tests, the shell)
    there is no address to count, and the check is Django's alone."""

    def authenticate(self, request, username=None, password=None, **kwargs):
        if request is None:
            return super().authenticate(request, username=username, password=password, **kwargs)
        if username is None:
            username = kwargs.get(self._username_field())
        if username is None or password is None:
            return None
        name, address = recorded_username(username), recorded_address(request)
        lock = current_lock(username=name, address=address)
        if lock is not None:
            request.login_lock = lock
            raise PermissionDenied(lock.message())
        user = super().authenticate(request, username=username, password=password, **kwargs)
        if user is None:
            record_failure(username=name, address=address)
        else:
            record_success(username=name, address=address)
        return user

    @staticmethod
    def _username_field() -> str:
        from django.contrib.auth import get_user_model

        return get_user_model().USERNAME_FIELD


class LoginLockMiddleware:
    """A login page whose authentication was refused by a lock answers the lockout page
    (429 with Retry-After) instead of "wrong password"."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        lock = getattr(request, "login_lock", None)
        if lock is None:
            return response
        return lockout_response(request, lock)


def lockout_response(request: HttpRequest, lock: Lock) -> HttpResponse:
    """The answer to a login while its pair or address is locked or its username delayed:
    429 with Retry-After, as the one JSON error shape under /api/ and as a page elsewhere
    (the login page and the admin's)."""
    if request.path_info.startswith(API_PREFIX):
        response: HttpResponse = JsonResponse(error_body("locked_out", lock.message()), status=429)
    else:
        response = render(request, "registration/locked_out.html", {"message": lock.message()}, status=429)
    response["Retry-After"] = str(lock.seconds_left())
    return response
