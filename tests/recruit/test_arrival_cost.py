"""An arrival is counted under the batch's row lock, so its work there must not grow with
the link's pool: a crowd of hundreds arriving within a minute queues on that lock."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from annotate.models import Assignment
from recruit.services import participation
from tests.factories import StudyFactory
from tests.recruit.helpers import make_link


def _arrival_sql(summaries: int) -> tuple[int, int]:
    """(queries, characters of SQL) of the third participant's arrival on a link whose pool
    has `summaries` items."""
    link = make_link(StudyFactory(), items=3, k=2, summaries=summaries, participants=100)
    for i in range(2):
        participation.arrive(link=link, panel="prolific", external_id=f"early{i}", address=f"10.1.0.{i}")
    with CaptureQueriesContext(connection) as ctx:
        participant, created = participation.arrive(link=link, panel="prolific", external_id="third", address="")
    assert created
    assert Assignment.objects.filter(batch=link.batch, rater=participant.user).count() == 3
    return len(ctx.captured_queries), sum(len(q["sql"]) for q in ctx.captured_queries)


@pytest.mark.django_db
def test_an_arrivals_queries_do_not_grow_with_the_pool():
    small_queries, small_sql = _arrival_sql(10)
    large_queries, large_sql = _arrival_sql(400)
    assert large_queries == small_queries
    # The pool's ids are never sent as a parameter list: 400 ids would add thousands of
    # characters (and as many parameters to bind) to every arrival.
    assert large_sql - small_sql < 400, (small_sql, large_sql)


@pytest.mark.django_db
def test_a_newcomers_account_is_made_before_the_batch_is_locked():
    """The account, its membership and its qualification items count against neither k nor
    the participant limit: they are written before the batch's row lock is taken, and under
    the lock only the participant and its items are."""
    link = make_link(StudyFactory(), items=3, k=2, summaries=10, participants=100)
    participation.arrive(link=link, panel="prolific", external_id="early", address="10.1.0.1")
    with CaptureQueriesContext(connection) as ctx:
        _, created = participation.arrive(link=link, panel="prolific", external_id="newcomer", address="10.1.0.2")
    assert created
    sql = [q["sql"] for q in ctx.captured_queries]
    lock = next(i for i, s in enumerate(sql) if s.startswith('UPDATE "annotate_batch"'))
    written = lambda queries: {s.split('"')[1] for s in queries if s.startswith("INSERT")}  # noqa: E731
    assert {"auth_user", "annotate_studymembership"} <= written(sql[:lock])
    assert written(sql[lock:]) == {"recruit_participant", "annotate_assignment"}
