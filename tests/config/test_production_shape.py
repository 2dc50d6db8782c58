"""The production shape (gunicorn, DEBUG off), probed as the outside review probed it:
no software name in `Server`, the security headers on every answer
including the API's JSON errors, an over-size body a 413 naming the limit, and a chunked
upload refused with a message saying what to do instead of "No file was submitted"."""

import http.client
import json
import subprocess
import sys
import urllib.parse

import pytest
from django.test import Client

from tests.config.test_server import BASE, environment, gunicorn

SECURITY_HEADERS = {
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
}


def request(base: str, method: str, path: str, body=None, headers=None, chunked: bool = False):
    url = urllib.parse.urlsplit(base)
    connection = http.client.HTTPConnection(url.hostname, url.port, timeout=120)
    try:
        connection.request(method, path, body=body, headers=headers or {}, encode_chunked=chunked)
        response = connection.getresponse()
        return response.status, response.read(), {k.lower(): v for k, v in response.getheaders()}
    finally:
        connection.close()


def assert_security_headers(headers: dict) -> None:
    for name, value in SECURITY_HEADERS.items():
        assert headers.get(name.lower()) == value, (name, headers)
    assert "default-src 'self'" in headers["content-security-policy"]


@pytest.fixture(scope="module")
def production(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("production")
    env = environment(tmp_path, DEBUG="0", SECRET_KEY="p" * 60)
    migrated = subprocess.run(
        [sys.executable, "manage.py", "migrate", "--noinput"], cwd=BASE, env=env, capture_output=True, timeout=600
    )
    assert migrated.returncode == 0, migrated.stderr
    with gunicorn(env, workers=1) as base:
        yield base


def test_the_server_header_names_no_software(production):
    status, _, headers = request(production, "GET", "/accounts/login/")
    assert status == 200
    assert headers["server"] == "web"
    assert "gunicorn" not in json.dumps(headers).lower()
    assert_security_headers(headers)


@pytest.mark.parametrize(
    "method, path, body, status",
    [
        ("GET", "/api/no-such-thing/", None, 404),  # no route: ApiErrorMiddleware's JSON 404
        ("GET", "/api/assignments/", None, 403),  # an API view's error
        ("POST", "/api/auth/token/", b'{"username": "x"}', 400),  # a validation error
        ("GET", "/no-such-page/", None, 404),  # a page's 404
    ],
)
def test_every_error_answer_carries_the_security_headers(production, method, path, body, status):
    got, _, headers = request(production, method, path, body, {"Content-Type": "application/json"})
    assert got == status
    assert_security_headers(headers)
    assert headers["server"] == "web"


def test_a_json_body_over_the_limit_is_a_413_naming_it(production):
    body = json.dumps({"username": "x", "password": "y" * 3_000_000}).encode()
    status, content, headers = request(
        production, "POST", "/api/auth/token/", body, {"Content-Type": "application/json"}
    )
    assert status == 413
    error = json.loads(content)["error"]
    assert error["code"] == "too_large"
    assert "at most 2,621,440 bytes" in error["message"] and "DATA_UPLOAD_MAX_MEMORY_SIZE" in error["message"]
    assert_security_headers(headers)


def test_a_chunked_upload_is_refused_with_a_clear_message(production):
    def chunks():
        yield b'--b\r\nContent-Disposition: form-data; name="file"; filename="x.jsonl"\r\n\r\n'
        yield b'{"type": "source"}\n'
        yield b"\r\n--b--\r\n"

    status, content, headers = request(
        production,
        "POST",
        "/api/studies/any/imports/",
        chunks(),
        {"Content-Type": "multipart/form-data; boundary=b"},
        chunked=True,
    )
    assert status == 411
    message = json.loads(content)["error"]["message"]
    assert "Content-Length" in message and "No file was submitted" not in message
    assert_security_headers(headers)


# --- the same rules without a server process ----------------------------------------------------


@pytest.mark.django_db
def test_the_json_404_of_an_unknown_api_path_carries_x_frame_options():
    response = Client().get("/api/no-such-thing/")
    assert response.status_code == 404 and response.json()["error"]["code"] == "not_found"
    for name, value in SECURITY_HEADERS.items():
        assert response[name] == value


@pytest.mark.django_db
def test_a_form_body_over_the_limit_on_a_page_is_a_413_naming_it(settings, client):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 10_000
    response = client.post("/accounts/login/", {"username": "x", "password": "y" * 20_000})
    assert response.status_code == 413 and "at most 10,000 bytes" in response.content.decode()


def test_health_checks_answer_with_the_security_headers_and_no_login(production):
    for path in ("/healthz", "/readyz"):
        status, body, headers = request(production, "GET", path)
        assert status == 200, body
        assert json.loads(body)["status"] == "ok"
        assert_security_headers(headers)
