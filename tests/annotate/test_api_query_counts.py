"""List endpoints run a bounded number of queries, whatever the number of rows."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from annotate.services.batches import create_batch
from annotate.services.ratings import submit_rating
from tests.conftest import api_client_for
from tests.factories import SourceFactory, SummaryFactory, UserFactory


def grow(study, raters, n, name):
    for _ in range(n):
        SummaryFactory(source=SourceFactory(study=study))
    batch = create_batch(study=study, name=name, raters=raters, design="k_raters", k=2, seed=1)
    for a in batch.assignments.select_related("rater"):
        submit_rating(
            assignment=a, rater=a.rater, answers={"overall": 3, "failure_modes": ["bad_length"]}, version=a.version
        )
    return batch


def count(client, url):
    with CaptureQueriesContext(connection) as ctx:
        response = client.get(url)
    assert response.status_code == 200, (url, response.content[:300])
    return len(ctx.captured_queries)


@pytest.mark.django_db
@pytest.mark.parametrize(
    "path",
    [
        "sources/",
        "summaries/",
        "batches/",
        "{batch}assignments/",
        "{batch}answers/",
    ],
)
def test_list_endpoints_do_not_grow_with_rows(study, admin_user, path):
    raters = [UserFactory(username="q1"), UserFactory(username="q2")]
    small = grow(study, raters, 2, "small")
    client = api_client_for(admin_user)
    base = f"/api/studies/{study.slug}/"
    small_url = base + path.format(batch=f"batches/{small.uuid}/")
    few = count(client, small_url)
    big = grow(study, raters, 12, "big")
    many = count(client, base + path.format(batch=f"batches/{big.uuid}/"))
    assert many <= few, f"{path}: {few} queries with few rows, {many} with many"


@pytest.mark.django_db
def test_rater_assignment_list_is_bounded(study, rater_a, django_assert_max_num_queries):
    for _ in range(3):
        SummaryFactory(source=SourceFactory(study=study))
    create_batch(study=study, name="r", raters=[rater_a], design="k_raters", k=1, seed=1)
    client = api_client_for(rater_a)
    with django_assert_max_num_queries(4):
        client.get("/api/assignments/")
