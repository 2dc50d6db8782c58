"""Password reset mail through every kind of backend: the settings of each
come from the environment, and whatever makes a send fail (a folder the file backend
cannot write, an SMTP server that refuses the message) is the documented 503 page, never
a 500. The SMTP server here is a scripted local one speaking the protocol (RFC 5321)."""

import json
import os
import socket
import subprocess
import sys
import threading

import pytest
from django.conf import settings as django_settings
from django.test import Client

from tests.factories import UserFactory

RESET = "/accounts/password_reset/"
NOT_SENT = "We could not send the e-mail"


@pytest.fixture
def person(db):
    return UserFactory(username="rater_mail", email="rater@example.org")


def test_every_mail_setting_is_read_from_the_environment(tmp_path):
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": os.environ.get("HOME", "/tmp"),
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "SECRET_KEY": "s" * 60,
        "EMAIL_BACKEND": "django.core.mail.backends.filebased.EmailBackend",
        "EMAIL_FILE_PATH": str(tmp_path / "mail"),
        "EMAIL_HOST": "smtp.example.org",
        "EMAIL_PORT": "2525",
        "EMAIL_HOST_USER": "u",
        "EMAIL_HOST_PASSWORD": "p",
        "EMAIL_USE_TLS": "1",
        "EMAIL_TIMEOUT": "7",
        "EMAIL_SSL_CERTFILE": "/etc/ssl/c.pem",
        "EMAIL_SSL_KEYFILE": "/etc/ssl/k.pem",
        "DEFAULT_FROM_EMAIL": "from@example.org",
        "SERVER_EMAIL": "server@example.org",
    }
    names = [k for k in env if k.startswith(("EMAIL_", "DEFAULT_FROM", "SERVER_EMAIL"))]
    script = (
        "import json, django; django.setup(); from django.conf import settings as s; "
        f"print(json.dumps({{k: getattr(s, k) for k in {names!r}}}))"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        env=env,
        cwd=django_settings.BASE_DIR,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    values = json.loads(done.stdout.strip().splitlines()[-1])
    expected = {k: env[k] for k in names}
    expected |= {"EMAIL_PORT": 2525, "EMAIL_USE_TLS": True, "EMAIL_TIMEOUT": 7}
    assert values == expected


@pytest.mark.django_db
def test_the_file_backend_writes_the_mail_where_the_environment_says(person, settings, tmp_path):
    settings.EMAIL_BACKEND = "django.core.mail.backends.filebased.EmailBackend"
    settings.EMAIL_FILE_PATH = str(tmp_path / "outbox")
    response = Client().post(RESET, {"email": "rater@example.org"})
    assert response.status_code == 302
    (written,) = (tmp_path / "outbox").iterdir()
    assert "rater@example.org" in written.read_text() and "/accounts/reset/" in written.read_text()


@pytest.mark.django_db
def test_a_file_backend_that_cannot_write_is_the_503_page_not_a_500(person, settings, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    settings.EMAIL_BACKEND = "django.core.mail.backends.filebased.EmailBackend"
    settings.EMAIL_FILE_PATH = str(blocker / "outbox")  # under a file: no folder can be made there
    response = Client().post(RESET, {"email": "rater@example.org"})
    assert response.status_code == 503
    assert NOT_SENT in response.content.decode()


class RefusingSmtpServer:
    """Speaks SMTP far enough to take a connection and then refuse the message: 250 to
    EHLO and MAIL FROM, `550` to every RCPT TO (the mailbox refused)."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen()
        self.port = self.sock.getsockname()[1]
        self.seen: list[str] = []
        threading.Thread(target=self.serve, daemon=True).start()

    def serve(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self.talk, args=(conn,), daemon=True).start()

    def talk(self, conn):
        with conn, conn.makefile("rb") as lines:
            conn.sendall(b"220 refusing.test ESMTP\r\n")
            for raw in lines:
                line = raw.decode("ascii", "replace").strip()
                self.seen.append(line)
                verb = line.split(" ", 1)[0].upper()
                if verb in ("EHLO", "HELO"):
                    conn.sendall(b"250 refusing.test\r\n")
                elif verb == "MAIL":
                    conn.sendall(b"250 OK\r\n")
                elif verb == "RCPT":
                    conn.sendall(b"550 5.1.1 Mailbox unavailable: refused by policy\r\n")
                elif verb == "RSET":
                    conn.sendall(b"250 OK\r\n")
                elif verb == "QUIT":
                    conn.sendall(b"221 Bye\r\n")
                    return
                else:
                    conn.sendall(b"502 Command not implemented\r\n")

    def close(self):
        self.sock.close()


@pytest.mark.django_db
def test_an_smtp_server_that_refuses_the_message_is_the_503_page(person, settings):
    server = RefusingSmtpServer()
    try:
        settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
        settings.EMAIL_HOST, settings.EMAIL_PORT, settings.EMAIL_TIMEOUT = "127.0.0.1", server.port, 30
        response = Client().post(RESET, {"email": "rater@example.org"})
    finally:
        server.close()
    assert response.status_code == 503
    assert NOT_SENT in response.content.decode()
    assert any(line.upper().startswith("RCPT") for line in server.seen)  # it got as far as the refusal
