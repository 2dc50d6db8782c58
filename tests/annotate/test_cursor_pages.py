"""Keyset (cursor) pages of the large API lists (annotate/api/pagination.py).

`?cursor=` starts a walk and `next` continues it; the pages hold the same rows, in the
same order, as the page-number pages; the number of queries of a page does not grow with
the list or with how deep the page is; a cursor that was not made by the list is a 400.
"""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from annotate.api.pagination import after, decode_cursor, encode_cursor
from tests.annotate.test_answer_pages import PAGE, all_pages, answered_batch
from tests.conftest import api_client_for

pytestmark = pytest.mark.django_db


def cursor_pages(client, url):
    """Every row of a cursor walk, and the queries each page took."""
    rows, queries = [], []
    url += ("&" if "?" in url else "?") + "cursor="
    while url:
        with CaptureQueriesContext(connection) as ctx:
            response = client.get(url)
        assert response.status_code == 200, response.content[:300]
        body = response.json()
        assert "count" not in body
        assert len(body["results"]) == PAGE or body["next"] is None
        rows += body["results"]
        queries.append(len(ctx.captured_queries))
        url = body["next"]
    return rows, queries


def test_a_cursor_walk_holds_the_rows_of_the_page_numbers_in_their_order(study, admin_user):
    batch = answered_batch(study, 60)  # 120 answers: 3 pages
    client = api_client_for(admin_user)
    base = f"/api/studies/{study.slug}/batches/{batch.uuid}/"
    for path in ("answers/", "answers/?rater=pb", "assignments/", "assignments/?state=submitted"):
        by_page, _, count = all_pages(client, base + path)
        by_cursor, queries = cursor_pages(client, base + path)
        assert by_cursor == by_page and len(by_cursor) == count, path
        assert len(set(queries)) == 1, f"{path}: queries per page {queries}"
    for path in ("summaries/", "sources/"):
        url = f"/api/studies/{study.slug}/{path}"
        by_page, _, count = all_pages(client, url)
        by_cursor, _ = cursor_pages(client, url)
        assert by_cursor == by_page and count == 60, path


def test_disagreements_take_as_many_queries_for_a_small_and_a_large_batch(study, admin_user):
    client = api_client_for(admin_user)
    small = answered_batch(study, 5)
    large = answered_batch(study, 60, names=("pc", "pd"), prefix="large")
    queries = []
    for batch in (small, large):
        with CaptureQueriesContext(connection) as ctx:
            response = client.get(f"/api/studies/{study.slug}/batches/{batch.uuid}/disagreements/?question=overall")
        assert response.status_code == 200
        queries.append(len(ctx.captured_queries))
    assert response.json()["count"] > 0
    assert queries[0] == queries[1], queries


def test_a_deep_cursor_reads_no_more_than_the_first(study, admin_user):
    batch = answered_batch(study, 60)
    client = api_client_for(admin_user)
    url = f"/api/studies/{study.slug}/batches/{batch.uuid}/answers/?cursor="
    with CaptureQueriesContext(connection) as first:
        body = client.get(url).json()
    deep = body["next"]
    with CaptureQueriesContext(connection) as second:
        response = client.get(deep)
    assert response.status_code == 200
    assert len(second.captured_queries) == len(first.captured_queries)
    # No OFFSET and no COUNT: the page starts at the cursor's key.
    sql = " ".join(q["sql"] for q in second.captured_queries)
    assert "OFFSET" not in sql and "COUNT(" not in sql


@pytest.mark.parametrize(
    "cursor",
    [
        "not-base64!",
        encode_cursor([1]),  # one key for a list ordered by two
        encode_cursor([1, "x", 3]),
        encode_cursor({"a": 1}),
        encode_cursor([True, 1]),
        encode_cursor(["not a number", "nor this"]),
        encode_cursor([2**70, 1]),
        encode_cursor(["\x00", 1]),
    ],
)
def test_a_cursor_that_the_list_did_not_make_is_a_400(study, admin_user, cursor):
    batch = answered_batch(study, 2)
    response = api_client_for(admin_user).get(
        f"/api/studies/{study.slug}/batches/{batch.uuid}/answers/?cursor={cursor}"
    )
    assert response.status_code == 400, response.content
    assert "cursor" in response.json()["error"]["fields"]


def test_a_list_without_a_cursor_order_says_so(study, admin_user):
    response = api_client_for(admin_user).get("/api/studies/?cursor=")
    assert response.status_code == 400
    assert "page numbers only" in str(response.json())


def test_cursor_round_trip_and_the_keyset_condition():
    assert decode_cursor(encode_cursor([12, "é/+"]), 2) == [12, "é/+"]
    assert decode_cursor("", 2) is None
    condition = str(after(("a", "b"), [1, 2]))
    assert "('a__gte', 1)" in condition and "('a__gt', 1)" in condition and "('b__gt', 2)" in condition
