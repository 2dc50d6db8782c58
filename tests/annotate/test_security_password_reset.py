"""Password reset: a send that fails is reported to the person (503,
"we could not send the e-mail"), never claimed as sent; with a working backend the mail
goes out and its link sets a new password. The SMTP test uses Django's real SMTP backend
against a local port where nothing listens."""

import logging
import re
import socket

import pytest
from django.contrib.auth import SESSION_KEY
from django.core import mail
from django.test import Client

from tests.factories import UserFactory

RESET = "/accounts/password_reset/"
NOT_SENT = "We could not send the e-mail"


def closed_port() -> int:
    """A local port with nothing listening (bound for a moment, then released)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture
def person(db):
    return UserFactory(username="rater_mail", email="rater@example.org")


@pytest.fixture
def smtp_down(settings):
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST = "127.0.0.1"
    settings.EMAIL_PORT = closed_port()
    settings.EMAIL_TIMEOUT = 10


@pytest.mark.django_db
def test_a_refused_smtp_connection_is_reported_not_claimed_as_sent(person, smtp_down, caplog):
    with caplog.at_level(logging.ERROR, logger="annotate.accounts"):
        response = Client().post(RESET, {"email": "rater@example.org"})
    assert response.status_code == 503
    page = response.content.decode()
    assert NOT_SENT in page and "contact your study admin" in page
    assert "Check your e-mail" not in page
    assert any("Password reset e-mail not sent" in r.getMessage() for r in caplog.records)
    assert "rater@example.org" not in caplog.text  # the address is not logged


@pytest.mark.django_db
def test_the_failure_is_reported_for_unknown_addresses_too(person, smtp_down):
    """Whether the page reports a failure does not tell whether an account has the address."""
    response = Client().post(RESET, {"email": "nobody@example.org"})
    assert response.status_code == 503 and NOT_SENT in response.content.decode()


@pytest.mark.django_db
def test_with_a_working_backend_the_mail_is_sent_and_its_link_sets_a_new_password(person, settings):
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    client = Client()
    response = client.post(RESET, {"email": "rater@example.org"})
    assert response.status_code == 302 and response["Location"] == "/accounts/password_reset/done/"
    assert "Check your e-mail" in client.get(response["Location"]).content.decode()
    (message,) = mail.outbox
    assert message.to == ["rater@example.org"]
    link = re.search(r"http://testserver(/accounts/reset/\S+/)", message.body).group(1)
    form = client.get(link, follow=True)
    assert form.status_code == 200 and "Choose a new password" in form.content.decode()
    done = client.post(
        form.redirect_chain[-1][0],
        {"new_password1": "a-new-long-password-42", "new_password2": "a-new-long-password-42"},
    )
    assert done.status_code == 302
    fresh = Client()
    fresh.post("/accounts/login/", {"username": "rater_mail", "password": "a-new-long-password-42"})
    assert SESSION_KEY in fresh.session


@pytest.mark.django_db
def test_the_console_backend_prints_the_mail(person, settings, capsys):
    settings.EMAIL_BACKEND = "django.core.mail.backends.console.EmailBackend"
    response = Client().post(RESET, {"email": "rater@example.org"})
    assert response.status_code == 302
    out = capsys.readouterr().out
    assert "To: rater@example.org" in out and "/accounts/reset/" in out


@pytest.mark.django_db
def test_the_login_page_links_to_the_reset():
    assert f'href="{RESET}"' in Client().get("/accounts/login/").content.decode()
