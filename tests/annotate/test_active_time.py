"""Active time on task cannot grow faster than the clock: each write adds at most the
wall-clock time since the assignment's previous write (or its first opening), on the
page and through the API alike."""

import pytest

from tests.conftest import api_client_for
from tests.factories import let_time_pass

# Seconds a slow, shared machine may take between arranging the clock and the write.
SLACK = 60


@pytest.mark.django_db
def test_page_posts_cannot_add_more_active_seconds_than_time_passed(client, assignment_a, rater_a):
    client.force_login(rater_a)
    client.get(f"/rate/{assignment_a.uuid}/")
    let_time_pass(assignment_a, 10)
    post = {"action": "save", "overall": "3", "active_seconds": "3000"}
    assert client.post(f"/rate/{assignment_a.uuid}/", {**post, "version": 1}).status_code == 302
    assignment_a.refresh_from_db()
    assert 10 <= assignment_a.active_seconds <= 10 + SLACK
    first = assignment_a.active_seconds

    # Right away again (a second tab, a replayed request): no time passed, almost nothing added.
    assert client.post(f"/rate/{assignment_a.uuid}/", {**post, "version": 2}).status_code == 302
    assignment_a.refresh_from_db()
    assert assignment_a.version == 3
    assert assignment_a.active_seconds - first <= SLACK


@pytest.mark.django_db
def test_api_puts_cannot_add_more_active_seconds_than_time_passed(assignment_a, rater_a):
    api = api_client_for(rater_a)
    url = f"/api/assignments/{assignment_a.uuid}/rating/"
    let_time_pass(assignment_a, 10)
    body = {"answers": {"overall": 3}, "active_seconds": 3000}
    assert api.put(url, {**body, "version": 1}, format="json").status_code == 200
    assignment_a.refresh_from_db()
    assert 10 <= assignment_a.active_seconds <= 10 + SLACK
    first = assignment_a.active_seconds

    for version in (2, 3, 4):
        assert api.put(url, {**body, "version": version}, format="json").status_code == 200
    assignment_a.refresh_from_db()
    assert assignment_a.active_seconds - first <= SLACK


@pytest.mark.django_db
def test_honest_increments_are_kept_exactly(assignment_a, rater_a):
    api = api_client_for(rater_a)
    let_time_pass(assignment_a, 120)
    response = api.put(
        f"/api/assignments/{assignment_a.uuid}/rating/",
        {"version": 1, "answers": {}, "active_seconds": 95},
        format="json",
    )
    assert response.status_code == 200
    assignment_a.refresh_from_db()
    assert assignment_a.active_seconds == 95
