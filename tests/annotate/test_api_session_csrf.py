"""Session authentication against the API, with CSRF enforced as in a browser: a real
login through the login form, then unsafe requests with and without the CSRF token
(docs/api.md, "Authentication")."""

import json

import pytest
from django.test import Client

from annotate.models import Revision
from tests.factories import PASSWORD


def logged_in_browser(user) -> Client:
    """A client that checks CSRF like a browser session: it loads the login form for the
    CSRF cookie and logs in by posting the form."""
    client = Client(enforce_csrf_checks=True)
    assert client.get("/accounts/login/").status_code == 200
    response = client.post(
        "/accounts/login/",
        {"username": user.username, "password": PASSWORD, "csrfmiddlewaretoken": client.cookies["csrftoken"].value},
    )
    assert response.status_code == 302, response.content
    assert "sessionid" in client.cookies
    return client


def save_draft(client, assignment, **headers):
    return client.put(
        f"/api/assignments/{assignment.uuid}/rating/",
        json.dumps({"version": 1, "answers": {"overall": 3}}),
        content_type="application/json",
        **headers,
    )


@pytest.mark.django_db
def test_a_session_write_without_the_csrf_token_is_refused_in_the_error_shape(assignment_a, rater_a):
    client = logged_in_browser(rater_a)
    assert client.get(f"/api/assignments/{assignment_a.uuid}/").status_code == 200  # reads need no token
    response = save_draft(client, assignment_a)
    assert response.status_code == 403
    assert response["Content-Type"].startswith("application/json")
    error = response.json()["error"]
    assert error["code"] == "permission_denied" and "CSRF" in error["message"]
    assert not Revision.objects.filter(assignment=assignment_a).exists()


@pytest.mark.django_db
def test_a_session_write_with_a_wrong_csrf_token_is_refused(assignment_a, rater_a):
    client = logged_in_browser(rater_a)
    response = save_draft(client, assignment_a, HTTP_X_CSRFTOKEN="x" * 32)
    assert response.status_code == 403 and response.json()["error"]["code"] == "permission_denied"
    assert not Revision.objects.filter(assignment=assignment_a).exists()


@pytest.mark.django_db
def test_a_session_write_with_the_csrf_token_succeeds(assignment_a, rater_a):
    client = logged_in_browser(rater_a)
    response = save_draft(client, assignment_a, HTTP_X_CSRFTOKEN=client.cookies["csrftoken"].value)
    assert response.status_code == 200, response.content
    assert response.json()["status"] == "draft" and response.json()["version"] == 2
    assert Revision.objects.get(assignment=assignment_a).status == Revision.Status.DRAFT
    submitted = client.post(
        f"/api/assignments/{assignment_a.uuid}/submit/",
        json.dumps({"version": 2, "answers": {"overall": 4, "failure_modes": [], "feedback": ""}}),
        content_type="application/json",
        HTTP_X_CSRFTOKEN=client.cookies["csrftoken"].value,
    )
    assert submitted.status_code == 200, submitted.content
    assert submitted.json()["state"] == "submitted"


@pytest.mark.django_db
def test_a_logged_out_session_cannot_write_even_with_the_token(assignment_a, rater_a):
    client = logged_in_browser(rater_a)
    client.post("/accounts/logout/", {"csrfmiddlewaretoken": client.cookies["csrftoken"].value})
    response = save_draft(client, assignment_a, HTTP_X_CSRFTOKEN=client.cookies["csrftoken"].value)
    assert response.status_code == 403 and response.json()["error"]["code"] == "not_authenticated"
