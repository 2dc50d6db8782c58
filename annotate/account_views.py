"""Accounts: API tokens that are hashed, listed, revoked and end with the password, the
account page, and a password reset that says when its e-mail could not be sent (docs/security.md).

annotate/throttling.py counts failed logins and answers a locked-out one. Tokens are
stored as SHA-256 digests and die with the password they were made under, when they
expire, or when revoked; the token endpoints are in annotate/api/tokens.py, the account
page listing them below, and the token authentication in annotate/authentication.py; the
password reset page is wired in config/urls.py.
"""

from __future__ import annotations

import hashlib
import logging
import secrets
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import forms as auth_forms
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ImproperlyConfigured
from django.core.mail import EmailMultiAlternatives, get_connection
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.template import loader
from django.utils import timezone
from django.utils.crypto import constant_time_compare
from django.views.decorators.http import require_http_methods

from annotate.models import ApiToken
from core.exceptions import ApplicationError
from core.text_validation import check_limit, check_text

logger = logging.getLogger(__name__)


# --- API tokens ----------------------------------------------------------------------------------


class InvalidCredentials(ApplicationError):
    code = "invalid_credentials"
    http_status = 400


TOKEN_NAME_MAX_CHARS = 100


def token_digest(secret: str) -> str:
    """SHA-256, hex. The secret is 256 random bits, so a fast hash is enough: nothing can
    be guessed from the digest, and no salt is needed (salts defend guessable passwords)."""
    return hashlib.sha256(secret.encode("utf-8", "replace")).hexdigest()


def password_fingerprint(user) -> str:
    """Changes with every password change (Django's session hash of the password hash):
    a token made under one password is refused under the next."""
    return user.get_session_auth_hash()


def token_expires_at(token: ApiToken) -> datetime:
    return token.created_at + timedelta(hours=settings.API_TOKEN_TTL_HOURS)


def token_is_live(token: ApiToken, user, now: datetime | None = None) -> bool:
    return (now or timezone.now()) < token_expires_at(token) and constant_time_compare(
        token.password_fingerprint, password_fingerprint(user)
    )


@dataclass(frozen=True)
class NewToken:
    """A token just made: `secret` is shown this once and never stored."""

    token: ApiToken
    secret: str


def create_token(*, user, name: str = "") -> NewToken:
    """A new token for `user` (each client may have its own; all die with the password)."""
    name = (name or "").strip()
    check_text(name, "name")
    check_limit(name, "name", TOKEN_NAME_MAX_CHARS)
    secret = secrets.token_urlsafe(32)
    token = ApiToken.objects.create(
        user=user,
        name=name,
        prefix=secret[:8],
        digest=token_digest(secret),
        password_fingerprint=password_fingerprint(user),
    )
    return NewToken(token=token, secret=secret)


def revoke_token(*, user, token_uuid=None, token: ApiToken | None = None) -> int:
    """Delete one of the user's tokens (by uuid, or the object), or all of them when
    neither is given; clients using them are refused from then on."""
    tokens = ApiToken.objects.filter(user=user)
    if token is not None:
        tokens = tokens.filter(pk=token.pk)
    elif token_uuid is not None:
        tokens = tokens.filter(uuid=token_uuid)
    deleted, _ = tokens.delete()
    return deleted


def live_tokens(user) -> list[ApiToken]:
    """The user's tokens that still work, newest first (the account page's list)."""
    now = timezone.now()
    tokens = [t for t in ApiToken.objects.filter(user=user).order_by("-created_at") if token_is_live(t, user, now)]
    for token in tokens:
        token.expires_at = token_expires_at(token)
    return tokens


# --- password reset ------------------------------------------------------------------------------


# What a mail backend raises when it cannot send: a refused or timed-out connection, a
# refusal by the server (smtplib.SMTPException is an OSError), a file that cannot be
# written (OSError), a backend that cannot start with its settings (ImproperlyConfigured:
# the file backend's unwritable EMAIL_FILE_PATH), and text the server cannot encode.
MAIL_ERRORS = (OSError, ImproperlyConfigured, UnicodeError)


class MailNotSent(Exception):
    """The mail server could not be reached or refused the message."""


class ReportingPasswordResetForm(auth_forms.PasswordResetForm):
    """Django's form logs a failed send and carries on, so the page claims the e-mail went
    out. This one connects to the mail server first, for every request (so whether the
    page reports a failure does not depend on whether the address has an account), sends
    through that connection, and raises MailNotSent (after logging why) if it fails."""

    _connection = None

    def save(self, **kwargs) -> None:
        self._connection = None
        try:
            # Inside the try: the file backend checks its folder when it is made
            # (ImproperlyConfigured for a folder it cannot write: a 500 before).
            self._connection = get_connection()
            self._connection.open()
            super().save(**kwargs)
        except MAIL_ERRORS as exc:
            logger.error("Password reset e-mail not sent: %s: %s", type(exc).__name__, exc)
            raise MailNotSent(str(exc)) from exc
        finally:
            if self._connection is not None:
                self._connection.close()

    def send_mail(
        self,
        subject_template_name,
        email_template_name,
        context,
        from_email,
        to_email,
        html_email_template_name=None,
    ):
        # As Django's, without its catch-all: a failure reaches save().
        subject = "".join(loader.render_to_string(subject_template_name, context).splitlines())
        body = loader.render_to_string(email_template_name, context)
        message = EmailMultiAlternatives(subject, body, from_email, [to_email], connection=self._connection)
        if html_email_template_name is not None:
            message.attach_alternative(loader.render_to_string(html_email_template_name, context), "text/html")
        message.send()


MAIL_NOT_SENT = (
    "We could not send the e-mail: the mail server is not reachable. "
    "Please try again later, or contact your study admin to reset your password."
)


class PasswordResetView(auth_views.PasswordResetView):
    """Django's password reset page, saying so when the e-mail could not be sent (503)
    instead of claiming it was."""

    form_class = ReportingPasswordResetForm

    def form_valid(self, form):
        try:
            return super().form_valid(form)
        except MailNotSent:
            form.add_error(None, MAIL_NOT_SENT)
            return self.render_to_response(self.get_context_data(form=form), status=503)


# --- the account page ----------------------------------------------------------------------------


@login_required
@require_http_methods(["GET", "POST"])
def account_page(request: HttpRequest) -> HttpResponse:
    """One's own API tokens: made, last used, name and first characters; make one (its
    secret shown this once) or revoke one or all. A password change revokes them all."""
    new_secret = None
    error = ""
    status = 200
    if request.method == "POST":
        action = request.POST.get("action", "")
        try:
            if action == "create":
                made = create_token(user=request.user, name=request.POST.get("name", ""))
                new_secret = made.secret
            elif action == "revoke":
                try:
                    token_uuid = uuid.UUID(request.POST.get("token", ""))
                except ValueError:
                    raise ApplicationError("No such token.") from None
                if not revoke_token(user=request.user, token_uuid=token_uuid):
                    raise ApplicationError("No such token (already revoked?).")
                messages.success(request, "The token is revoked.")
                return redirect("account")
            elif action == "revoke_all":
                count = revoke_token(user=request.user)
                messages.success(request, f"{count} token(s) revoked.")
                return redirect("account")
            else:
                raise ApplicationError("Unknown action.")
        except ApplicationError as exc:
            error, status = exc.message, 400
    return render(
        request,
        "registration/account.html",
        {
            "tokens": live_tokens(request.user),
            "new_secret": new_secret,
            "error": error,
            "name_max": TOKEN_NAME_MAX_CHARS,
            "ttl_hours": settings.API_TOKEN_TTL_HOURS,
        },
        status=status,
    )
