"""Headers and deployment: the Content-Security-Policy on every page
with no inline script or style left to need it, HSTS and the HTTPS redirect, the API
schema closed to anonymous callers unless configured, settings read from the environment
as docs/security.md says."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings as django_settings
from django.test import Client

from annotate.services.accounts import create_token
from tests.factories import AssignmentFactory, StudyFactory, SummaryFactory, UserFactory

TEMPLATES = Path(django_settings.BASE_DIR) / "templates"
# An executable inline <script> (a <script> without src; JSON data blocks are inert),
# a <style> element, a style="" attribute, or an on...="" handler attribute.
INLINE_SCRIPT = re.compile(r"<script(?![^>]*\bsrc=)(?![^>]*type=\"application/json\")[^>]*>", re.I)
INLINE_STYLE = re.compile(r"<style\b|\sstyle=", re.I)
HANDLER = re.compile(r"\son[a-z]+\s*=", re.I)


def strict(policy: str) -> None:
    directives = dict(part.strip().split(" ", 1) for part in policy.split(";"))
    assert directives["default-src"] == "'self'"
    assert directives["script-src"] == "'self'" and directives["style-src"] == "'self'"
    assert "unsafe" not in policy and "*" not in policy
    assert directives["frame-ancestors"] == "'none'" and directives["object-src"] == "'none'"


def inline_code(html: str) -> list[str]:
    return INLINE_SCRIPT.findall(html) + INLINE_STYLE.findall(html) + HANDLER.findall(html)


def test_no_template_has_inline_script_style_or_handlers():
    found = {
        str(path.relative_to(TEMPLATES)): inline_code(path.read_text(encoding="utf-8"))
        for path in TEMPLATES.rglob("*.html")
    }
    assert {name: hits for name, hits in found.items() if hits} == {}


@pytest.fixture
def pages(db, admin_user):
    study = StudyFactory()
    rater = UserFactory(username="rater_a")
    assignment = AssignmentFactory(summary=SummaryFactory(source__study=study), rater=rater)
    return {
        "anonymous": ["/accounts/login/", "/accounts/password_reset/", "/accounts/password_reset/done/"],
        rater: ["/rate/", f"/rate/{assignment.uuid}/"],
        admin_user: [
            "/studies/",
            f"/studies/{study.slug}/",
            f"/studies/{study.slug}/batches/new/",
            f"/analysis/{study.slug}/",
            "/admin/",
            "/admin/annotate/study/",
            "/api/docs/",
        ],
    }


@pytest.mark.django_db
def test_every_page_has_a_strict_policy_and_no_inline_code(pages):
    for who, urls in pages.items():
        client = Client()
        if who != "anonymous":
            client.force_login(who)
        for url in urls:
            response = client.get(url)
            assert response.status_code == 200, url
            policy = response["Content-Security-Policy"]
            if url == "/api/docs/":  # Swagger UI's icons are data: images, nothing more
                assert "img-src 'self' data:" in policy
                policy = policy.replace("img-src 'self' data:", "img-src 'self'")
            strict(policy)
            if not url.startswith("/admin/"):  # Django's own admin templates are not ours
                assert inline_code(response.content.decode()) == [], url


@pytest.mark.django_db
def test_api_answers_and_downloads_carry_the_policy_too(admin_user):
    client = Client()
    client.force_login(admin_user)
    strict(client.get("/api/assignments/")["Content-Security-Policy"])
    strict(client.get("/api/no-such-thing/")["Content-Security-Policy"])


@pytest.mark.django_db
def test_the_report_reloads_itself_from_a_static_script_while_it_is_computed(
    admin_user, django_capture_on_commit_callbacks
):
    study = StudyFactory()
    client = Client()
    client.force_login(admin_user)
    with django_capture_on_commit_callbacks(execute=False):  # the queued report has not run yet
        response = client.get(f"/analysis/{study.slug}/")
    html = response.content.decode()
    assert "Computing the report" in html
    assert '<script src="/static/js/report.js" defer></script>' in html
    assert "/static/css/report.css" in html
    assert inline_code(html) == []
    strict(response["Content-Security-Policy"])


@pytest.mark.django_db
def test_https_redirect_and_hsts_when_configured(settings):
    settings.SECURE_SSL_REDIRECT = True
    settings.SECURE_HSTS_SECONDS = 31_536_000
    plain = Client().get("/accounts/login/")
    assert plain.status_code == 301 and plain["Location"] == "https://testserver/accounts/login/"
    secure = Client().get("/accounts/login/", secure=True)
    assert secure.status_code == 200 and secure["Strict-Transport-Security"] == "max-age=31536000"


@pytest.mark.django_db
def test_behind_a_tls_proxy_the_forwarded_scheme_counts(settings):
    settings.SECURE_SSL_REDIRECT = True
    settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    assert Client().get("/accounts/login/", HTTP_X_FORWARDED_PROTO="https").status_code == 200
    assert Client().get("/accounts/login/", HTTP_X_FORWARDED_PROTO="http").status_code == 301


# --- the API schema --------------------------------------------------------------------------------


@pytest.mark.django_db
def test_in_production_the_schema_and_docs_are_for_signed_in_users(settings, rater_a):
    settings.API_SCHEMA_PUBLIC = False
    anonymous = Client()
    schema = anonymous.get("/api/schema/")
    assert schema.status_code == 403 and schema.json()["error"]["code"] == "not_authenticated"
    docs = anonymous.get("/api/docs/")
    assert docs.status_code == 302 and docs["Location"] == "/accounts/login/?next=/api/docs/"
    script = anonymous.get("/api/docs/?script=")
    assert script.status_code == 403
    secret = create_token(user=rater_a).secret
    assert Client().get("/api/schema/", HTTP_AUTHORIZATION=f"Token {secret}").status_code == 200
    signed_in = Client()
    signed_in.force_login(rater_a)
    assert signed_in.get("/api/docs/").status_code == 200
    assert signed_in.get("/api/docs/?script=").status_code == 200


@pytest.mark.django_db
def test_api_schema_public_opens_them_to_anyone(settings):
    settings.API_SCHEMA_PUBLIC = True
    assert Client().get("/api/schema/").status_code == 200
    assert Client().get("/api/docs/").status_code == 200


# --- settings from the environment ----------------------------------------------------------------

READ = (
    "import json, django; django.setup(); from django.conf import settings as s; print(json.dumps({k: "
    "getattr(s, k, None) for k in ('DEBUG', 'EMAIL_BACKEND', 'API_SCHEMA_PUBLIC', 'SECURE_SSL_REDIRECT', "
    "'SECURE_HSTS_SECONDS', 'SESSION_COOKIE_SECURE', 'CSRF_COOKIE_SECURE', 'SECURE_PROXY_SSL_HEADER', "
    "'LOGIN_FAILURE_LIMIT', 'LOGIN_ADDRESS_FAILURE_LIMIT', 'LOGIN_USERNAME_MAX_DELAY_SECONDS', "
    "'API_TOKEN_TTL_HOURS', 'TRUSTED_PROXY_COUNT', 'EMAIL_TIMEOUT')}))"
)


def read_settings(**env: str) -> dict:
    """config.settings as a fresh process with exactly these variables sees them."""
    clean = {"PATH": os.environ.get("PATH", ""), "HOME": os.environ.get("HOME", "/tmp")}
    clean |= {"DJANGO_SETTINGS_MODULE": "config.settings", "SECRET_KEY": "s" * 60, **env}
    done = subprocess.run(
        [sys.executable, "-c", READ],
        env=clean,
        cwd=django_settings.BASE_DIR,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_development_defaults():
    values = read_settings(DEBUG="1")
    assert values["EMAIL_BACKEND"] == "django.core.mail.backends.console.EmailBackend"
    assert values["API_SCHEMA_PUBLIC"] is True
    assert values["SECURE_SSL_REDIRECT"] is False and values["SECURE_HSTS_SECONDS"] == 0
    assert values["LOGIN_FAILURE_LIMIT"] == 5 and values["API_TOKEN_TTL_HOURS"] == 720
    assert values["LOGIN_ADDRESS_FAILURE_LIMIT"] == 20 and values["LOGIN_USERNAME_MAX_DELAY_SECONDS"] == 60


def test_production_defaults_and_secure_cookies():
    values = read_settings(DEBUG="0")
    assert values["EMAIL_BACKEND"] == "django.core.mail.backends.smtp.EmailBackend"
    assert values["EMAIL_TIMEOUT"] == 10
    assert values["API_SCHEMA_PUBLIC"] is False
    assert values["SECURE_SSL_REDIRECT"] is False and values["SECURE_HSTS_SECONDS"] == 0
    secure = read_settings(DEBUG="0", SECURE_COOKIES="1", TRUST_X_FORWARDED_PROTO="1", TRUSTED_PROXY_COUNT="1")
    assert secure["SESSION_COOKIE_SECURE"] is True and secure["CSRF_COOKIE_SECURE"] is True
    assert secure["SECURE_SSL_REDIRECT"] is True and secure["SECURE_HSTS_SECONDS"] == 31_536_000
    assert secure["SECURE_PROXY_SSL_HEADER"] == ["HTTP_X_FORWARDED_PROTO", "https"]
    assert secure["TRUSTED_PROXY_COUNT"] == 1
    tuned = read_settings(DEBUG="0", LOGIN_FAILURE_LIMIT="3", API_TOKEN_TTL_HOURS="24", API_SCHEMA_PUBLIC="1")
    assert tuned["LOGIN_FAILURE_LIMIT"] == 3 and tuned["API_TOKEN_TTL_HOURS"] == 24
    assert tuned["API_SCHEMA_PUBLIC"] is True


def test_a_bad_value_names_the_variable():
    clean = {"PATH": os.environ.get("PATH", ""), "DJANGO_SETTINGS_MODULE": "config.settings", "DEBUG": "1"}
    done = subprocess.run(
        [sys.executable, "-c", READ],
        env={**clean, "LOGIN_FAILURE_LIMIT": "0"},
        cwd=django_settings.BASE_DIR,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode != 0 and "LOGIN_FAILURE_LIMIT must be at least 1" in done.stderr
