"""Accounts: what login throttling answers, API tokens that expire and can be revoked,
and a password reset that says when its e-mail could not be sent (docs/security.md).

django-axes counts failed logins (settings.AXES_*); this module gives it the client's
address (`client_ip`) and the answer to a locked-out login (`lockout_response`). The
token endpoints are in annotate/api/tokens.py, and the token authentication that refuses
expired tokens in annotate/authentication.py; the password reset page is wired in
config/urls.py.
"""

from __future__ import annotations

import logging

from django.conf import settings
from django.contrib.auth import forms as auth_forms
from django.contrib.auth import views as auth_views
from django.core.mail import EmailMultiAlternatives, get_connection
from django.db import transaction
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.template import loader
from django.utils import timezone
from rest_framework.authtoken.models import Token

from annotate.authentication import token_expires_at
from core.exceptions import API_PREFIX, ApplicationError, error_body

logger = logging.getLogger(__name__)


# --- login throttling (django-axes) ----------------------------------------------------------


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


# Longer than any account's name (auth.User allows 150), shorter than django-axes' column (255).
USERNAME_RECORD_LENGTH = 150


def client_username(request: HttpRequest, credentials: dict | None = None) -> str | None:
    """The username django-axes counts a login attempt against, as it would read it
    (the credentials, else the POST), made storable: at most USERNAME_RECORD_LENGTH
    characters, and no NUL or lone surrogate. Django's login form does not enforce the
    username's length before authenticating, so without this a 300-character or a NUL
    username made axes' record of the failure a 500 on PostgreSQL (the form fuzz found it).
    No account has such a name, so the record still counts against the right one."""
    if credentials:
        raw = credentials.get(settings.AXES_USERNAME_FORM_FIELD)
    else:
        raw = getattr(request, "data", request.POST).get(settings.AXES_USERNAME_FORM_FIELD)
    if raw is None:
        return None
    text = str(raw)[:USERNAME_RECORD_LENGTH]
    return text.encode("utf-8", "replace").decode("utf-8").replace("\x00", "\ufffd")


def lockout_message() -> str:
    minutes = max(1, round(settings.AXES_COOLOFF_TIME.total_seconds() / 60))
    return (
        "Too many failed logins for this account or from this address. "
        f"Try again in {minutes} minutes, or ask your study admin to lift the lock."
    )


def lockout_response(request: HttpRequest, original_response=None, credentials=None) -> HttpResponse:
    """django-axes' answer to a login while the username or the address is locked out:
    429 with Retry-After, as the one JSON error shape under /api/ and as a page elsewhere
    (the login page and the admin's)."""
    if request.path_info.startswith(API_PREFIX):
        response: HttpResponse = JsonResponse(error_body("locked_out", lockout_message()), status=429)
    else:
        response = render(request, "registration/locked_out.html", {"message": lockout_message()}, status=429)
    response["Retry-After"] = str(int(settings.AXES_COOLOFF_TIME.total_seconds()))
    return response


# --- API tokens ----------------------------------------------------------------------------------


class InvalidCredentials(ApplicationError):
    code = "invalid_credentials"
    http_status = 400


@transaction.atomic
def obtain_token(*, user) -> Token:
    """The user's token: the current one while it has not expired, else a new one (a
    user has one token, so every client of the account shares it until it expires or
    is revoked)."""
    token = Token.objects.select_for_update().filter(user=user).first()
    if token is not None and timezone.now() < token_expires_at(token):
        return token
    Token.objects.filter(user=user).delete()
    token, _ = Token.objects.get_or_create(user=user)
    return token


def revoke_token(*, user) -> int:
    """Delete the user's token (if any); clients using it get 403 from then on."""
    deleted, _ = Token.objects.filter(user=user).delete()
    return deleted


# --- password reset ------------------------------------------------------------------------------


class MailNotSent(Exception):
    """The mail server could not be reached or refused the message."""


class ReportingPasswordResetForm(auth_forms.PasswordResetForm):
    """Django's form logs a failed send and carries on, so the page claims the e-mail went
    out. This one connects to the mail server first, for every request (so whether the
    page reports a failure does not depend on whether the address has an account), sends
    through that connection, and raises MailNotSent (after logging why) if it fails."""

    _connection = None

    def save(self, **kwargs) -> None:
        self._connection = get_connection()
        try:
            self._connection.open()
            super().save(**kwargs)
        except OSError as exc:  # a refused or timed-out connection; smtplib.SMTPException is one too
            logger.error("Password reset e-mail not sent: %s: %s", type(exc).__name__, exc)
            raise MailNotSent(str(exc)) from exc
        finally:
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
