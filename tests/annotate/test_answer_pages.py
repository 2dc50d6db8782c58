"""A page of a batch's answers reads only its own rows.

The answers API used to build every row of the batch and then cut out the page, so
reading all pages of a large study was quadratic. The database now picks the answers
that count, orders and slices them; each page builds only its rows. Checked here: the
pages together hold exactly the answers that count (the newest submitted revision of each
live assignment, as annotate.selectors.batches.batch_answers chooses them in Python), in
the order of the assignments' index (items as imported, then raters as their accounts
were made); a page reads no more ratings than its own rows hold; and the query count is
the same on the first and the last page.
"""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from annotate.selectors.batches import batch_answers
from annotate.services.assignments import withdraw_assignment
from annotate.services.batches import create_batch
from annotate.services.ratings import reopen_rating, submit_rating
from tests.conftest import api_client_for
from tests.factories import SourceFactory, SummaryFactory, UserFactory

pytestmark = pytest.mark.django_db

PAGE = 50  # REST_FRAMEWORK PAGE_SIZE


def answered_batch(study, n_items, *, names=("pa", "pb"), prefix="item"):
    raters = [UserFactory(username=name) for name in names]
    for k in range(n_items):
        SummaryFactory(source=SourceFactory(study=study), key=f"{prefix}-{k:03d}", generator=prefix)
    batch = create_batch(
        study=study, name=prefix, raters=raters, design="k_raters", k=2, seed=1, filters={"generator": prefix}
    )
    for k, a in enumerate(batch.assignments.select_related("rater").order_by("pk")):
        submit_rating(
            assignment=a,
            rater=a.rater,
            answers={"overall": 1 + k % 5, "failure_modes": ["bad_length"]},
            version=a.version,
        )
    return batch


def all_pages(client, url):
    rows, pages = [], []
    while url:
        with CaptureQueriesContext(connection) as ctx:
            response = client.get(url)
        assert response.status_code == 200, response.content[:300]
        body = response.json()
        rows += body["results"]
        pages.append(len(ctx.captured_queries))
        url = body["next"]
    return rows, pages, body["count"]


def test_the_pages_hold_exactly_the_answers_that_count_in_order(study, admin_user):
    batch = answered_batch(study, 30)
    # One assignment answered twice (reopened, submitted again): only the newest counts.
    twice = batch.assignments.select_related("rater").order_by("pk")[3]
    reopen_rating(assignment=twice, rater=twice.rater, version=twice.version)
    twice.refresh_from_db()
    submit_rating(
        assignment=twice,
        rater=twice.rater,
        answers={"overall": 4, "failure_modes": ["bad_length"]},
        version=twice.version,
    )
    # A withdrawn assignment's answers are left out.
    gone = batch.assignments.order_by("pk")[7]
    withdraw_assignment(assignment=gone)

    client = api_client_for(admin_user)
    rows, pages, count = all_pages(client, f"/api/studies/{study.slug}/batches/{batch.uuid}/answers/")

    keys = dict(study.summaries.values_list("pk", "key"))
    expected = [
        row[2:]
        for row in sorted(
            (summary_id, user.pk, keys[summary_id], user.get_username(), str(revision.assignment.uuid))
            + (revision.number, answers["overall"])
            for summary_id, by_rater in batch_answers(batch).items()
            for user, (answers, _rationales, revision) in by_rater.items()
        )
    ]
    got = [(r["summary"]["key"], r["rater"], r["assignment"], r["revision"], r["answers"]["overall"]) for r in rows]
    assert got == expected
    assert count == len(expected) == 59
    twice_row = next(r for r in rows if r["assignment"] == str(twice.uuid))
    assert (twice_row["revision"], twice_row["answers"]["overall"]) == (2, 4)
    assert str(gone.uuid) not in {r["assignment"] for r in rows}
    assert len(pages) == 2 and pages[0] == pages[1], f"queries per page: {pages}"


def test_a_page_builds_only_its_own_rows(study, admin_user):
    batch = answered_batch(study, 60)  # 120 answers, 2 ratings each
    read = []

    def record(execute, sql, params, many, context):
        if 'FROM "annotate_rating"' in sql:
            read.append(list(params))
        return execute(sql, params, many, context)

    with connection.execute_wrapper(record):
        response = api_client_for(admin_user).get(f"/api/studies/{study.slug}/batches/{batch.uuid}/answers/")
    assert response.status_code == 200
    assert response.json()["count"] == 120
    assert len(response.json()["results"]) == PAGE
    # One read of ratings, naming exactly the page's revisions.
    assert len(read) == 1 and len(read[0]) == PAGE, read


def test_the_rater_filter_pages_in_the_database(study, admin_user):
    batch = answered_batch(study, 30)
    client = api_client_for(admin_user)
    rows, _, count = all_pages(client, f"/api/studies/{study.slug}/batches/{batch.uuid}/answers/?rater=pa")
    assert count == 30 and {r["rater"] for r in rows} == {"pa"}
    assert [r["summary"]["key"] for r in rows] == sorted(r["summary"]["key"] for r in rows)


def test_the_stream_holds_every_row_of_the_pages_in_their_order(study, admin_user, monkeypatch):
    import json

    from annotate.api import study_batches

    monkeypatch.setattr(study_batches, "STREAM_CHUNK", 40)  # several chunks of this small batch
    batch = answered_batch(study, 60)
    client = api_client_for(admin_user)
    base = f"/api/studies/{study.slug}/batches/{batch.uuid}/"
    rows, _, count = all_pages(client, base + "answers/")
    response = client.get(base + "answers.jsonl")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("application/jsonl")
    assert response["Content-Disposition"].startswith("attachment;")
    lines = b"".join(response.streaming_content).decode().splitlines()
    assert len(lines) == count == 120
    assert [json.loads(line) for line in lines] == rows


def test_the_stream_of_an_unknown_summary_is_empty(study, admin_user):
    batch = answered_batch(study, 2)
    url = f"/api/studies/{study.slug}/batches/{batch.uuid}/answers.jsonl?summary=00000000-0000-0000-0000-000000000000"
    response = api_client_for(admin_user).get(url)
    assert response.status_code == 200
    assert b"".join(response.streaming_content) == b""
