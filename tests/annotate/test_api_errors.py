"""One error shape for every response under /api/ (docs/api.md, "Errors"), including
URLs no route matches, 405s and unexpected failures; pages outside /api/ keep Django's
HTML errors."""

import pytest
from django.test import Client
from rest_framework.test import APIRequestFactory
from rest_framework.views import APIView

from core.exceptions import ApplicationError, StaleWriteError, api_exception_handler
from tests.conftest import api_client_for


def assert_error_shape(response, status: int, code: str) -> dict:
    assert response.status_code == status
    assert response["Content-Type"].startswith("application/json"), response["Content-Type"]
    body = response.json()
    assert set(body) == {"error"}, body
    assert body["error"]["code"] == code, body
    assert isinstance(body["error"]["message"], str) and body["error"]["message"]
    return body["error"]


@pytest.mark.django_db
@pytest.mark.parametrize(
    "path",
    ["/api/nope/", "/api/", "/api/studies/x/nope/", "/api/assignments/not-a-uuid/", "/api/assignments/1/rating/"],
)
def test_an_api_url_that_matches_no_route_is_a_json_404(rater_a, path):
    assert_error_shape(api_client_for(rater_a).get(path), 404, "not_found")
    assert_error_shape(Client().post(path, {}), 404, "not_found")


@pytest.mark.django_db
def test_an_export_id_that_is_not_a_uuid_is_a_json_404(study, admin_user):
    client = api_client_for(admin_user)
    for path in (
        f"/api/studies/{study.slug}/exports/not-a-uuid/",
        f"/api/studies/{study.slug}/exports/not-a-uuid/download/",
    ):
        assert_error_shape(client.get(path), 404, "not_found")


@pytest.mark.django_db
def test_an_unknown_route_is_json_with_debug_on_too(rater_a, settings):
    settings.DEBUG = True
    assert_error_shape(api_client_for(rater_a).get("/api/nope/"), 404, "not_found")


@pytest.mark.django_db
def test_a_method_the_endpoint_does_not_have_is_a_json_405(assignment_a, rater_a):
    client = api_client_for(rater_a)
    error = assert_error_shape(client.delete("/api/assignments/"), 405, "method_not_allowed")
    assert "DELETE" in error["message"]
    assert_error_shape(client.get(f"/api/assignments/{assignment_a.uuid}/submit/"), 405, "method_not_allowed")


@pytest.mark.django_db
def test_an_unexpected_failure_under_api_is_a_json_500(rater_a, monkeypatch):
    from annotate.api import raters

    def boom(self, request, *args, **kwargs):
        raise RuntimeError("a bug")

    monkeypatch.setattr(raters.AssignmentList, "get", boom)
    client = Client(raise_request_exception=False)
    client.force_login(rater_a)
    error = assert_error_shape(client.get("/api/assignments/"), 500, "server_error")
    assert "a bug" not in error["message"]


@pytest.mark.django_db
def test_an_api_url_without_its_slash_still_redirects(rater_a):
    response = api_client_for(rater_a).get("/api/assignments")
    assert response.status_code == 301 and response["Location"] == "/api/assignments/"


@pytest.mark.django_db
def test_pages_outside_the_api_keep_html_errors(rater_a):
    client = Client()
    client.force_login(rater_a)
    for path in ("/nope/", "/rate/not-a-uuid/", "/apinope/"):
        response = client.get(path)
        assert response.status_code == 404
        assert response["Content-Type"].startswith("text/html"), path


def _handle(exc):
    request = APIRequestFactory().get("/api/x/")
    return api_exception_handler(exc, {"request": request, "view": APIView()})


def test_extra_details_cannot_overwrite_the_code_or_the_message():
    response = _handle(
        StaleWriteError("Someone else saved first.", extra={"code": "ok", "message": "all good", "current_version": 4})
    )
    assert response.status_code == 409
    assert response.data == {
        "error": {"code": "conflict", "message": "Someone else saved first.", "current_version": 4}
    }


def test_extra_fields_are_kept_beside_the_code_and_message():
    response = _handle(ApplicationError("Not valid.", extra={"fields": {"overall": "required"}}))
    assert response.data == {"error": {"code": "invalid", "message": "Not valid.", "fields": {"overall": "required"}}}
