"""Health checks for load balancers and orchestrators, without authentication,
without any study data, and cheap enough to call every few seconds:

    GET /healthz   the process is up and answers (no database, no broker, no storage): 200
    GET /readyz    the database, the broker (when one is configured) and the storage of
                   uploads and exports answer: 200, or 503 naming what failed

Both answer {"status": ..., "checks": {name: "ok" | "failed: <kind of error>"}} and never
say more than the kind of error (no host names, no credentials). /readyz makes one
database query, one broker connection and one request per storage (a HEAD on the S3
bucket), at once, and answers within READY_TIMEOUT seconds (default 3) whatever they do:
a check still waiting then is "failed: no answer within <READY_TIMEOUT> s".
"""

from __future__ import annotations

import logging
import threading
from concurrent.futures import Future, ThreadPoolExecutor, wait

from django.db import connection, connections
from django.http import JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_safe

from core.env import env_float

logger = logging.getLogger(__name__)


def ready_timeout() -> float:
    """READY_TIMEOUT (seconds, default 3): how long /readyz waits for each dependency."""
    return env_float("READY_TIMEOUT", 3.0, positive=True)


@csrf_exempt
@never_cache
@require_safe
def healthz(request):
    return JsonResponse({"status": "ok"})


def _database() -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
        cursor.fetchone()


def _broker() -> bool:
    """Connect to the broker once; False when none is configured (tasks run in process)."""
    from django.conf import settings

    if settings.CELERY_TASK_ALWAYS_EAGER:
        return False
    from config.celery import app

    timeout = ready_timeout()
    options = {"socket_connect_timeout": timeout, "socket_timeout": timeout, "read_timeout": timeout}
    with app.connection_for_write(connect_timeout=timeout, transport_options=options) as conn:
        conn.ensure_connection(max_retries=0, timeout=timeout)
    return True


def _storage() -> None:
    from core import storage

    seen = set()
    for files in (storage.imports_storage(), storage.exports_storage()):
        key = storage.identity(files)
        if key not in seen:
            seen.add(key)
            storage.ping(files, timeout=ready_timeout())


CHECKS = {"database": _database, "broker": _broker, "storage": _storage}

# Each check runs in a thread of its own and the answer waits for them until READY_TIMEOUT.
# The checks' own timeouts bound each socket operation, not the check: a Redis check is a
# connect and a PING, an S3 check a connect and a HEAD per storage, and the database has no
# read timeout of its own, so their sum can exceed READY_TIMEOUT. A check still running
# when the next probe comes is waited for again rather than started twice: at most one
# thread per dependency however long it hangs, and the next probe sees its outcome.
_running: dict[str, Future] = {}
_running_lock = threading.Lock()
_pool: ThreadPoolExecutor | None = None


def _run(check):
    try:
        return check()
    finally:
        connections.close_all()  # this thread's connection: never reused after a failure


def _start(name: str) -> Future:
    global _pool
    with _running_lock:
        if _pool is None:  # made in the process that serves (a gunicorn worker), not before its fork
            _pool = ThreadPoolExecutor(max_workers=len(CHECKS), thread_name_prefix="readyz")
        future = _running.get(name)
        if future is None or future.done():
            future = _running[name] = _pool.submit(_run, CHECKS[name])
        return future


@csrf_exempt
@never_cache
@require_safe
def readyz(request):
    timeout = ready_timeout()
    futures = {name: _start(name) for name in CHECKS}
    wait(futures.values(), timeout=timeout)
    checks, failed = {}, False
    for name, future in futures.items():
        if not future.done():
            logger.warning("readyz: %s gave no answer within %g s", name, timeout)
            checks[name], failed = f"failed: no answer within {timeout:g} s", True
        elif future.exception() is not None:
            exc = future.exception()
            logger.warning("readyz: %s failed: %s", name, exc)
            checks[name], failed = f"failed: {type(exc).__name__}", True
        else:
            checks[name] = "not configured" if future.result() is False else "ok"
    return JsonResponse({"status": "failed" if failed else "ok", "checks": checks}, status=503 if failed else 200)
