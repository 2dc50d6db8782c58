"""Who may see and change what, on the HTML pages and the API."""

import pytest

from annotate.models import Revision
from tests.conftest import GOOD_ANSWERS, api_client_for


@pytest.mark.django_db
def test_anonymous_user_is_sent_to_login(client, assignment_a):
    for url in ("/rate/", f"/rate/{assignment_a.uuid}/", f"/rate/{assignment_a.uuid}/flag/", "/"):
        response = client.get(url)
        assert response.status_code == 302
        assert response["Location"].startswith("/accounts/login/")


@pytest.mark.django_db
def test_anonymous_api_access_is_refused(assignment_a):
    client = api_client_for(None)
    for method, url in [
        ("get", "/api/assignments/"),
        ("get", f"/api/assignments/{assignment_a.uuid}/"),
        ("put", f"/api/assignments/{assignment_a.uuid}/rating/"),
    ]:
        response = getattr(client, method)(url, {"version": 1, "answers": {"overall": 1}}, format="json")
        assert response.status_code in (401, 403)
        assert response.json()["error"]["code"] == "not_authenticated"
    assert not Revision.objects.exists()


@pytest.mark.django_db
def test_rater_cannot_open_another_raters_rating_page(client, assignment_a, assignment_b, rater_a):
    client.force_login(rater_a)
    assert client.get(f"/rate/{assignment_a.uuid}/").status_code == 200
    assert client.get(f"/rate/{assignment_b.uuid}/").status_code == 404


@pytest.mark.django_db
def test_rater_cannot_post_to_another_raters_rating_page(client, assignment_b, rater_a):
    client.force_login(rater_a)
    response = client.post(f"/rate/{assignment_b.uuid}/", {"action": "submit", "version": 1, "overall": "1"})
    assert response.status_code == 404
    assert not Revision.objects.exists()


@pytest.mark.django_db
def test_rater_cannot_read_or_write_another_raters_rating_through_the_api(assignment_a, assignment_b, rater_a, rater_b):
    api_client_for(rater_b).post(
        f"/api/assignments/{assignment_b.uuid}/submit/", {"version": 1, "answers": GOOD_ANSWERS}, format="json"
    )
    client = api_client_for(rater_a)
    b = assignment_b.uuid
    assert client.get(f"/api/assignments/{b}/").status_code == 404
    assert client.get(f"/api/assignments/{b}/rating/").status_code == 404
    assert (
        client.put(
            f"/api/assignments/{b}/rating/", {"version": 2, "answers": {"overall": 1}}, format="json"
        ).status_code
        == 404
    )
    assert client.post(f"/api/assignments/{b}/reopen/", {"version": 2}, format="json").status_code == 404
    assert client.post(f"/api/assignments/{b}/skip/", {"version": 2, "reason": "x"}, format="json").status_code == 404
    assert Revision.objects.filter(assignment=assignment_b).count() == 1


@pytest.mark.django_db
def test_rater_page_never_contains_other_raters_answers_or_the_generator(
    client, assignment_a, assignment_b, rater_a, rater_b
):
    api_client_for(rater_b).post(
        f"/api/assignments/{assignment_b.uuid}/submit/",
        {"version": 1, "answers": {"overall": 2, "feedback": "B-SECRET-FEEDBACK"}},
        format="json",
    )
    client.force_login(rater_a)
    for url in (
        f"/rate/{assignment_a.uuid}/",
        "/rate/",
        f"/api/assignments/{assignment_a.uuid}/",
        f"/api/assignments/{assignment_a.uuid}/rating/",
        "/api/assignments/",
    ):
        body = client.get(url).content.decode()
        for secret in ("B-SECRET-FEEDBACK", "secret-model-x", "secret-pipeline", "secret-flag", "rater_b"):
            assert secret not in body, (url, secret)


@pytest.mark.django_db
def test_only_staff_reach_admin_pages(client, rater_a, admin_user):
    client.force_login(rater_a)
    response = client.get("/admin/annotate/assignment/")
    assert response.status_code == 302 and "/admin/login/" in response["Location"]
    client.force_login(admin_user)
    assert client.get("/admin/annotate/assignment/").status_code == 200


@pytest.mark.django_db
def test_admin_sees_the_revision_history(client, admin_user, assignment_a, rater_a):
    api = api_client_for(rater_a)
    url = f"/api/assignments/{assignment_a.uuid}"
    api.post(f"{url}/submit/", {"version": 1, "answers": {"overall": 5, "feedback": "FIRST-ANSWER"}}, format="json")
    api.post(f"{url}/reopen/", {"version": 2}, format="json")
    api.post(f"{url}/submit/", {"version": 3, "answers": {"overall": 2, "feedback": "SECOND-ANSWER"}}, format="json")
    client.force_login(admin_user)
    page = client.get(f"/admin/annotate/assignment/{assignment_a.pk}/change/").content.decode()
    assert "FIRST-ANSWER" in page and "SECOND-ANSWER" in page


@pytest.mark.django_db
def test_html_post_without_csrf_token_is_refused(assignment_a, rater_a):
    from django.test import Client

    client = Client(enforce_csrf_checks=True)
    client.force_login(rater_a)
    response = client.post(f"/rate/{assignment_a.uuid}/", {"action": "submit", "version": 1, "overall": "4"})
    assert response.status_code == 403
    assert not Revision.objects.exists()


@pytest.mark.django_db
def test_session_api_write_without_csrf_token_is_refused(assignment_a, rater_a):
    from django.http import HttpRequest
    from rest_framework.test import APIClient

    client = APIClient(enforce_csrf_checks=True)
    # A login with a request passes the throttle too (annotate/throttling.py).
    assert client.login(request=HttpRequest(), username="rater_a", password="correct-horse-battery")
    response = client.put(f"/api/assignments/{assignment_a.uuid}/rating/", {"version": 1, "answers": {}}, format="json")
    assert response.status_code == 403
