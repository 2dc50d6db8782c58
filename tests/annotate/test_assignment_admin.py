"""The Django admin's assignments: found by their uuid, and a change page that
does not list every assignment ("Moved to") and every batch of every study."""

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from annotate.services.batches import create_batch
from tests.factories import AssignmentFactory, StudyFactory, SummaryFactory, UserFactory

pytestmark = pytest.mark.django_db


def test_an_assignment_is_found_by_its_uuid(admin_client):
    rater = UserFactory(username="rater-x")
    assignments = [AssignmentFactory(rater=rater, position=i) for i in range(4)]
    wanted = assignments[2]
    page = admin_client.get("/admin/annotate/assignment/", {"q": str(wanted.uuid)}).content.decode()
    # Every row links its change page: exactly one row answers the uuid (it listed all four).
    rows = set(re.findall(r'href="/admin/annotate/assignment/(\d+)/change/', page))
    assert rows == {str(wanted.pk)}
    upper = admin_client.get("/admin/annotate/assignment/", {"q": str(wanted.uuid).upper()}).content.decode()
    assert set(re.findall(r'href="/admin/annotate/assignment/(\d+)/change/', upper)) == {str(wanted.pk)}
    # A username still finds that rater's assignments, and text that is no uuid finds none by uuid.
    by_rater = admin_client.get("/admin/annotate/assignment/", {"q": "rater-x"}).content.decode()
    assert len(set(re.findall(r'href="/admin/annotate/assignment/(\d+)/change/', by_rater))) == 4
    assert admin_client.get("/admin/annotate/assignment/", {"q": "no-such"}).status_code == 200


def _change_page(admin_client, assignment):
    with CaptureQueriesContext(connection) as queries:
        page = admin_client.get(f"/admin/annotate/assignment/{assignment.pk}/change/")
    assert page.status_code == 200
    return page.content.decode(), len(queries)


def test_the_change_page_does_not_grow_with_the_other_studies_work(admin_client):
    raters = [UserFactory(username=f"r{i}") for i in range(3)]
    study = StudyFactory()
    for _ in range(3):
        SummaryFactory(source__study=study)
    create_batch(study=study, name="b0", raters=raters, design="k_raters", k=3, seed=1)
    assignment = study.assignments.first()
    _change_page(admin_client, assignment)  # the first request fills Django's caches (content types)
    small, small_queries = _change_page(admin_client, assignment)
    # Much more work elsewhere: other studies, batches and assignments.
    for _ in range(4):
        other = StudyFactory()
        for _summary in range(5):
            SummaryFactory(source__study=other)
        for b in range(3):
            create_batch(study=other, name=f"b{b}", raters=raters[b : b + 1], design="k_raters", k=1, seed=b)
    large, large_queries = _change_page(admin_client, assignment)
    assert large_queries == small_queries
    # "Moved to" and "Batch" are ids with a lookup, not a select of every row.
    assert 'name="moved_to"' in large and 'name="batch"' in large
    assert not re.search(r'<select[^>]*name="(moved_to|batch)"', large)


def test_batches_are_listed_read_only_for_the_lookup(admin_client):
    study = StudyFactory(slug="lookup-study")
    SummaryFactory(source__study=study)
    batch = create_batch(study=study, name="round-1", raters=[UserFactory()], design="k_raters", k=1, seed=1)
    listing = admin_client.get("/admin/annotate/batch/", {"q": "round-1", "_popup": "1", "_to_field": "id"})
    assert listing.status_code == 200 and "round-1" in listing.content.decode()
    change = admin_client.get(f"/admin/annotate/batch/{batch.pk}/change/").content.decode()
    assert 'name="_save"' not in change  # built on the study pages, not edited here
