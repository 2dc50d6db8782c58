"""A gunicorn worker's persistent database connections, opened as it starts (issue 30).

With persistent connections (DB_CONN_MAX_AGE above 0: the production shape on PostgreSQL,
docs/deployment.md), each request thread of a worker keeps a connection of its own, which
Django opens on that thread's first request: about 5 ms of that request (a first import, a
rater's first submit), for each of the eight threads of each worker. `open_for_threads`
(config/gunicorn.conf.py's post_worker_init) opens them when the worker starts, in the
threads themselves, before the worker takes requests or alongside its first ones.

Without persistent connections (DB_CONN_MAX_AGE=0, the default, and `make run`'s SQLite)
every request closes its connection when it ends, so there is nothing to open ahead.
"""

from __future__ import annotations

import logging
import threading

logger = logging.getLogger(__name__)


def open_for_threads(pool, threads: int, *, alias: str = "default", timeout: float = 10.0) -> list:
    """Open the `alias` connection of each of `pool`'s `threads` threads (gthread's
    ThreadPoolExecutor: a new task starts a new thread while none is idle), and return the
    tasks' futures. The tasks wait for each other at a barrier, so that each runs in a
    thread of its own; a database that cannot be reached is logged, not raised: each
    thread's first request then opens its connection, as without this."""
    from django.db import DatabaseError, connections

    if connections.settings[alias].get("CONN_MAX_AGE", 0) == 0:  # None: kept for ever
        return []
    together = threading.Barrier(threads, timeout=timeout)

    def open_one() -> None:
        try:
            together.wait()
        except threading.BrokenBarrierError:  # fewer threads than tasks: connect anyway
            pass
        try:
            connections[alias].ensure_connection()
        except DatabaseError as exc:
            logger.warning("could not open a database connection ahead of the requests: %s", exc)

    return [pool.submit(open_one) for _ in range(threads)]
