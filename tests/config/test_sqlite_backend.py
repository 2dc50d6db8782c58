"""The SQLite backend's write lock (config/sqlite_backend): a transaction holds it from
BEGIN to COMMIT or ROLLBACK, concurrent writers wait for it and lose no update, and it is
released on every way out. Runs on the suite's SQLite file; PostgreSQL has no such lock."""

import fcntl
import os
import threading

import pytest
from django.db import connection, connections, transaction

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(connection.vendor != "sqlite", reason="the lock is SQLite's backend only"),
]


def held_elsewhere() -> bool:
    """Whether another open file description holds the lock file (what another process sees)."""
    fd = os.open(f"{connection.settings_dict['NAME']}.writelock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)


@pytest.fixture
def counter():
    with connection.cursor() as cursor:
        cursor.execute("CREATE TABLE lock_counter (n integer NOT NULL)")
        cursor.execute("INSERT INTO lock_counter (n) VALUES (0)")
    yield
    with connection.cursor() as cursor:
        cursor.execute("DROP TABLE lock_counter")


def test_a_transaction_holds_the_lock_until_it_ends(counter):
    assert not held_elsewhere()
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("UPDATE lock_counter SET n = n + 1")
        assert held_elsewhere()
        with transaction.atomic():  # a savepoint: no second acquire, still held
            assert held_elsewhere()
    assert not held_elsewhere()
    with pytest.raises(ZeroDivisionError), transaction.atomic():
        assert held_elsewhere()
        1 / 0  # noqa: B018 - rolls the transaction back
    assert not held_elsewhere()


def test_closing_the_connection_in_a_transaction_releases_the_lock(counter):
    with transaction.atomic():
        assert held_elsewhere()
        connection.close()
        assert not held_elsewhere()
    connection.close()


def test_concurrent_writers_wait_for_each_other_and_lose_no_update(counter):
    threads, rounds, errors = 8, 25, []

    def work():
        try:
            for _ in range(rounds):
                with transaction.atomic():
                    with connection.cursor() as cursor:
                        cursor.execute("SELECT n FROM lock_counter")
                        (n,) = cursor.fetchone()
                        cursor.execute("UPDATE lock_counter SET n = %s", [n + 1])
        except Exception as exc:  # recorded, so the test names it
            errors.append(repr(exc))
        finally:
            connections.close_all()

    workers = [threading.Thread(target=work) for _ in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=300)
    assert errors == []
    with connection.cursor() as cursor:
        cursor.execute("SELECT n FROM lock_counter")
        assert cursor.fetchone() == (threads * rounds,)
    assert not held_elsewhere()
