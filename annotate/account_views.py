"""Account pages: one's own API tokens (annotate.services.accounts makes and revokes
them), and a password reset that says when its e-mail could not be sent (docs/security.md).

annotate/throttling.py counts failed logins and answers a locked-out one; the password
reset page is wired in config/urls.py.
"""

from __future__ import annotations

import logging
import uuid

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
from django.utils.translation import gettext, ngettext
from django.views.decorators.http import require_http_methods

from annotate.services.accounts import TOKEN_NAME_MAX_CHARS, create_token, live_tokens, revoke_token
from core.exceptions import ApplicationError

logger = logging.getLogger(__name__)


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
                    raise ApplicationError(gettext("No such token.")) from None
                if not revoke_token(user=request.user, token_uuid=token_uuid):
                    raise ApplicationError(gettext("No such token (already revoked?)."))
                messages.success(request, gettext("The token is revoked."))
                return redirect("account")
            elif action == "revoke_all":
                count = revoke_token(user=request.user)
                messages.success(
                    request, ngettext("%(count)s token revoked.", "%(count)s tokens revoked.", count) % {"count": count}
                )
                return redirect("account")
            else:
                raise ApplicationError(gettext("Unknown action."))
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
