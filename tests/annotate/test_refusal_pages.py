"""A refusal a person meets in the browser is a page in the site's layout that says why and
what to do, and the server log gets one line for it, without a traceback."""

import io
import logging

import pytest

from tests.factories import UserFactory

pytestmark = pytest.mark.django_db


def console_handler() -> logging.StreamHandler:
    """The console handler config/settings.py's LOGGING puts on the root logger."""
    return next(
        h
        for h in logging.getLogger().handlers
        if type(h) is logging.StreamHandler and any(type(f).__name__ == "LibraryChatter" for f in h.filters)
    )


def test_new_study_without_the_permission_is_a_page_that_says_who_can_grant_it(client):
    client.force_login(UserFactory(username="lab-member"))
    response = client.get("/studies/new/")
    assert response.status_code == 403
    page = response.content.decode()
    assert '<nav aria-label="Main">' in page or "<main" in page  # the site's layout, not a bare 403
    assert "“Can add study” permission" in page
    assert "A superuser grants it in the Django admin (/admin/): Users → your account → User permissions" in page
    assert "You are signed in as <strong>lab-member</strong>" in page


def test_the_rubrics_page_without_the_permission_is_the_same_page(client):
    client.force_login(UserFactory())
    response = client.get("/studies/rubrics/")
    assert response.status_code == 403 and "Can add study" in response.content.decode()


def test_an_api_refusal_keeps_the_json_error_shape(client):
    client.force_login(UserFactory())
    response = client.post("/api/studies/", {"slug": "x"}, content_type="application/json")
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "permission_denied"


def test_a_refused_permission_is_one_log_line_without_a_traceback(client, settings):
    settings.DEBUG = True  # `make run`: Django's own console handler is live as well
    handler = console_handler()
    stream = io.StringIO()
    old = handler.setStream(stream)
    try:
        client.force_login(UserFactory())
        assert client.get("/studies/new/").status_code == 403
    finally:
        handler.setStream(old)
    # Django's own console handler would write the line a second time, to stderr.
    assert logging.getLogger("django").handlers == []
    logged = stream.getvalue()
    assert logged.count("Forbidden (Permission denied): /studies/new/") == 1, logged
    assert "Traceback" not in logged
