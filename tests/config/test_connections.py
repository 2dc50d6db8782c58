"""config.connections: with persistent connections, a gunicorn worker's request threads open
theirs as the worker starts (issue 30), in the threads themselves; without, nothing is opened;
a database that cannot be reached is logged and the worker starts. Runs on both databases."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from django.db import connections

from config.connections import open_for_threads

pytestmark = pytest.mark.django_db(transaction=True)


def in_each_thread(pool: ThreadPoolExecutor, threads: int, task, alias: str = "default") -> dict:
    """task(connection) run once in each of the pool's `threads` threads (the tasks wait for
    each other, so none runs twice in one thread): {thread id: its result}."""
    together = threading.Barrier(threads, timeout=60)

    def run():
        together.wait()
        return threading.get_ident(), task(connections[alias])

    return dict(future.result(timeout=120) for future in [pool.submit(run) for _ in range(threads)])


@pytest.fixture
def pool():
    threads = ThreadPoolExecutor(max_workers=4)
    yield threads
    in_each_thread(threads, 4, lambda connection: connection.close())  # none left open for the teardown
    threads.shutdown()


def test_each_request_thread_has_its_connection_open_before_its_first_request(monkeypatch, pool):
    monkeypatch.setitem(connections.settings["default"], "CONN_MAX_AGE", 600)
    for opened in open_for_threads(pool, 4):
        opened.result(timeout=120)
    found = in_each_thread(pool, 4, lambda connection: connection.connection is not None)
    assert len(found) == 4 and all(found.values()), found


def test_without_persistent_connections_nothing_is_opened(monkeypatch, pool):
    monkeypatch.setitem(connections.settings["default"], "CONN_MAX_AGE", 0)
    assert open_for_threads(pool, 4) == []
    found = in_each_thread(pool, 4, lambda connection: connection.connection is not None)
    assert len(found) == 4 and not any(found.values()), found


def test_a_database_that_cannot_be_reached_is_logged_and_not_raised(monkeypatch, caplog, pool):
    settings_dict = connections.settings["default"]  # every thread's connection is made from it
    monkeypatch.setitem(settings_dict, "CONN_MAX_AGE", 600)
    if "sqlite" in settings_dict["ENGINE"]:
        monkeypatch.setitem(settings_dict, "NAME", "/nonexistent-folder/db.sqlite3")
    else:
        monkeypatch.setitem(settings_dict, "PORT", "1")  # nothing listens there
    try:
        for opened in open_for_threads(pool, 4):
            opened.result(timeout=120)  # no error comes out
        found = in_each_thread(pool, 4, lambda connection: connection.connection is not None)
    finally:
        monkeypatch.undo()  # before the test database's teardown connects again
    messages = [r.getMessage() for r in caplog.records if r.name == "config.connections"]
    assert len(messages) == 4 and all("could not open a database connection" in m for m in messages), messages
    assert not any(found.values())
