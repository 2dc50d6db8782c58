"""A rating page's own writes never conflict with each other; anyone else's still do.

The page names itself (`writer`) and numbers its writes (`seq`): its save sent on leaving
and the reloaded page's resend of the same draft both carry the version the page read."""

import pytest

from annotate.selectors.queue import latest_revision, revision_answers
from tests.conftest import GOOD_ANSWERS, api_client_for


def rating_url(a):
    return f"/api/assignments/{a.uuid}/rating/"


def put(client, assignment, version, overall, **writer):
    return client.put(
        rating_url(assignment), {"version": version, "answers": {"overall": overall}, **writer}, format="json"
    )


def stored(assignment):
    return revision_answers(latest_revision(assignment))[0]


@pytest.mark.django_db
def test_a_pages_newer_write_replaces_its_own_write_of_the_same_version(assignment_a, rater_a):
    client = api_client_for(rater_a)
    # The save sent on leaving lands first; the reloaded page's resend carries the same version.
    assert put(client, assignment_a, 1, 2, writer="page-one-1234", seq=1).status_code == 200
    resent = put(client, assignment_a, 1, 3, writer="page-one-1234", seq=2)
    assert resent.status_code == 200, resent.json()
    assert resent.json()["version"] == 3
    assert stored(assignment_a) == {"overall": 3}


@pytest.mark.django_db
def test_a_pages_older_write_arriving_last_is_refused(assignment_a, rater_a):
    client = api_client_for(rater_a)
    assert put(client, assignment_a, 1, 3, writer="page-one-1234", seq=2).status_code == 200
    late = put(client, assignment_a, 1, 2, writer="page-one-1234", seq=1)
    assert late.status_code == 409
    assert stored(assignment_a) == {"overall": 3}


@pytest.mark.django_db
def test_another_pages_write_in_between_is_a_conflict(assignment_a, rater_a):
    client = api_client_for(rater_a)
    assert put(client, assignment_a, 1, 2, writer="page-one-1234", seq=1).status_code == 200
    assert put(client, assignment_a, 2, 4, writer="page-two-1234", seq=1).status_code == 200
    stale = put(client, assignment_a, 1, 3, writer="page-one-1234", seq=2)
    assert stale.status_code == 409
    assert "changed elsewhere" in stale.json()["error"]["message"]
    assert stored(assignment_a) == {"overall": 4}


@pytest.mark.django_db
def test_a_submit_after_the_pages_write_is_a_conflict(assignment_a, rater_a):
    client = api_client_for(rater_a)
    assert put(client, assignment_a, 1, 2, writer="page-one-1234", seq=1).status_code == 200
    submitted = client.post(
        f"/api/assignments/{assignment_a.uuid}/submit/", {"version": 2, "answers": GOOD_ANSWERS}, format="json"
    )
    assert submitted.status_code == 200
    client.post(f"/api/assignments/{assignment_a.uuid}/reopen/", {"version": 3}, format="json")
    assert put(client, assignment_a, 1, 3, writer="page-one-1234", seq=2).status_code == 409


@pytest.mark.django_db
def test_a_write_without_a_writer_stays_a_plain_compare_and_set(assignment_a, rater_a):
    client = api_client_for(rater_a)
    assert put(client, assignment_a, 1, 2, writer="page-one-1234", seq=1).status_code == 200
    assert put(client, assignment_a, 1, 3).status_code == 409


@pytest.mark.django_db
@pytest.mark.parametrize(
    "writer",
    [
        {"writer": "page-one-1234"},
        {"seq": 2},
        {"writer": "<b>x</b>-and-more", "seq": 1},
        {"writer": "p", "seq": 1},
        {"writer": "page-one-1234", "seq": 0},
    ],
)
def test_a_malformed_writer_is_a_400(assignment_a, rater_a, writer):
    response = put(api_client_for(rater_a), assignment_a, 1, 2, **writer)
    assert response.status_code == 400
    assert response.json()["error"]["code"]
