"""The rater API: reading, saving and submitting a rating; stale writes; error shape."""

import pytest

from annotate.models import Revision
from annotate.selectors.queue import revision_answers
from tests.conftest import GOOD_ANSWERS, api_client_for
from tests.factories import revision_history


def rating_url(a):
    return f"/api/assignments/{a.uuid}/rating/"


@pytest.mark.django_db
def test_rater_lists_only_their_own_assignments(assignment_a, assignment_b, rater_a):
    response = api_client_for(rater_a).get("/api/assignments/")
    assert response.status_code == 200
    assert [row["uuid"] for row in response.json()["results"]] == [str(assignment_a.uuid)]


@pytest.mark.django_db
def test_detail_shows_summary_text_and_source_but_not_the_generator(assignment_a, rater_a):
    response = api_client_for(rater_a).get(f"/api/assignments/{assignment_a.uuid}/")
    assert response.status_code == 200
    body = response.json()
    assert body["summary"]["text"] == assignment_a.summary.text
    assert [s["ref"] for s in body["source"]["sentences"]] == [assignment_a.summary.source.key] * 2
    assert body["rubric"]["key"] == "litsumm"
    raw = response.content.decode()
    for secret in ("secret-model-x", "secret-pipeline", "secret-flag", "generator"):
        assert secret not in raw
    assert response["ETag"] == '"1"'


@pytest.mark.django_db
def test_save_then_submit_through_the_api(assignment_a, rater_a):
    client = api_client_for(rater_a)
    saved = client.put(rating_url(assignment_a), {"version": 1, "answers": {"overall": 3}}, format="json")
    assert saved.status_code == 200, saved.json()
    assert saved.json()["status"] == "draft" and saved.json()["version"] == 2
    submitted = client.post(
        f"/api/assignments/{assignment_a.uuid}/submit/",
        {"answers": GOOD_ANSWERS, "active_seconds": 12},
        format="json",
        HTTP_IF_MATCH='"2"',
    )
    assert submitted.status_code == 200, submitted.json()
    assert submitted.json()["answers"] == GOOD_ANSWERS
    assert submitted.json()["state"] == "submitted"
    assert submitted["ETag"] == '"3"'
    read = client.get(rating_url(assignment_a)).json()
    assert read["answers"] == GOOD_ANSWERS and read["revision"] == 1


@pytest.mark.django_db
def test_stale_write_gets_409_and_the_stored_rating_is_unchanged(assignment_a, rater_a):
    client = api_client_for(rater_a)
    client.post(f"/api/assignments/{assignment_a.uuid}/submit/", {"version": 1, "answers": GOOD_ANSWERS}, format="json")
    client.post(f"/api/assignments/{assignment_a.uuid}/reopen/", {"version": 2}, format="json")
    # Tab 1 saves a draft (version 3 -> 4); tab 2 still holds version 3.
    client.put(rating_url(assignment_a), {"version": 3, "answers": {"overall": 2}}, format="json")
    before = [(r.number, r.status, revision_answers(r)) for r in revision_history(assignment_a)]
    stale = client.put(rating_url(assignment_a), {"version": 3, "answers": {"overall": 5}}, format="json")
    assert stale.status_code == 409
    error = stale.json()["error"]
    assert error["code"] == "conflict" and error["current_version"] == 4
    assert "changed elsewhere" in error["message"]
    stale_submit = client.post(
        f"/api/assignments/{assignment_a.uuid}/submit/", {"answers": {"overall": 5}}, format="json", HTTP_IF_MATCH='"3"'
    )
    assert stale_submit.status_code == 409
    after = [(r.number, r.status, revision_answers(r)) for r in revision_history(assignment_a)]
    assert after == before
    assert after[0][2][0] == GOOD_ANSWERS and after[1][2][0] == {"overall": 2}


@pytest.mark.django_db
def test_validation_errors_use_the_one_error_shape(assignment_a, rater_a):
    client = api_client_for(rater_a)
    response = client.post(
        f"/api/assignments/{assignment_a.uuid}/submit/", {"version": 1, "answers": {"overall": 9}}, format="json"
    )
    assert response.status_code == 400
    assert response.json() == {
        "error": {
            "code": "invalid",
            "message": "Some answers need attention: overall.",
            "fields": {"overall": "must be one of 1, 2, 3, 4, 5"},
        }
    }
    assert not Revision.objects.exists()


@pytest.mark.django_db
@pytest.mark.parametrize(
    "body",
    [
        "not json",
        '{"answers": [1, 2]}',
        '{"answers": {"overall": 3}, "version": "x"}',
        '{"answers": {"overall": 3}}',
        '{"answers": {"overall": 3}, "active_seconds": -4, "version": 1}',
    ],
)
def test_malformed_writes_get_4xx_never_500(assignment_a, rater_a, body):
    response = api_client_for(rater_a).generic("PUT", rating_url(assignment_a), body, content_type="application/json")
    assert 400 <= response.status_code < 500
    assert "error" in response.json() and response.json()["error"]["message"]
    assert not Revision.objects.exists()


@pytest.mark.django_db
def test_skip_through_the_api_requires_a_reason(assignment_a, rater_a):
    client = api_client_for(rater_a)
    missing = client.post(f"/api/assignments/{assignment_a.uuid}/skip/", {"version": 1}, format="json")
    assert missing.status_code == 400 and missing.json()["error"]["fields"] == {"reason": "This field is required."}
    ok = client.post(
        f"/api/assignments/{assignment_a.uuid}/skip/", {"version": 1, "reason": "Not my field"}, format="json"
    )
    assert ok.status_code == 200 and ok.json()["state"] == "skipped"


@pytest.mark.django_db
def test_token_authentication_works(assignment_a, rater_a):
    from rest_framework.test import APIClient

    from annotate.services.accounts import create_token

    secret = create_token(user=rater_a).secret
    client = APIClient()
    assert client.get("/api/assignments/").status_code in (401, 403)
    client.credentials(HTTP_AUTHORIZATION=f"Token {secret}")
    assert client.get("/api/assignments/").json()["count"] == 1


@pytest.mark.django_db
def test_openapi_schema_and_docs_are_served_locally(client, rater_a):
    schema = client.get("/api/schema/")
    assert schema.status_code == 200
    assert b"/api/assignments/{assignment_uuid}/rating/" in schema.content
    docs = client.get("/api/docs/")
    assert docs.status_code == 200
    # Swagger UI comes from the sidecar package, not a CDN.
    assert b"cdn" not in docs.content.lower() and b"/static/drf_spectacular_sidecar/" in docs.content


@pytest.mark.django_db
def test_a_draft_breaking_a_rule_is_saved_and_answered_with_hints(assignment_a, rater_a):
    client = api_client_for(rater_a)
    # LitSumm's rule (fixtures/rubrics/litsumm.yaml): a hallucination cannot be rated 4 or 5.
    body = {"version": 1, "answers": {"overall": 5, "failure_modes": ["hallucination"]}}
    response = client.put(rating_url(assignment_a), body, format="json")
    assert response.status_code == 200
    data = response.json()
    assert list(data["hints"]) == ["overall"] and data["hints"]["overall"]
    assert data["answers"] == body["answers"] and data["version"] == 2
    fixed = client.put(rating_url(assignment_a), {"version": 2, "answers": {"overall": 2}}, format="json")
    assert fixed.json()["hints"] == {}
