"""Health checks for load balancers and orchestrators (issue 33), without authentication,
without any study data, and cheap enough to call every few seconds:

    GET /healthz   the process is up and answers (no database, no broker, no storage): 200
    GET /readyz    the database, the broker (when one is configured) and the storage of
                   uploads and exports answer: 200, or 503 naming what failed

Both answer {"status": ..., "checks": {name: "ok" | "failed: <kind of error>"}} and never
say more than the kind of error (no host names, no credentials). /readyz makes one
database query, one broker connection and one request per storage (a HEAD on the S3
bucket), each with a short timeout (READY_TIMEOUT seconds, default 3).
"""

from __future__ import annotations

import logging

from django.db import connection
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

    with app.connection_for_write() as conn:
        conn.ensure_connection(max_retries=0, timeout=ready_timeout())
    return True


def _storage() -> None:
    from core import storage

    seen = set()
    for files in (storage.imports_storage(), storage.exports_storage()):
        key = storage.identity(files)
        if key not in seen:
            seen.add(key)
            storage.ping(files, timeout=ready_timeout())


@csrf_exempt
@never_cache
@require_safe
def readyz(request):
    checks, failed = {}, False
    for name, check in (("database", _database), ("broker", _broker), ("storage", _storage)):
        try:
            answered = check()
        except Exception as exc:  # noqa: BLE001 - any failure of a dependency is "not ready", named; logged here
            logger.warning("readyz: %s failed: %s", name, exc)
            checks[name], failed = f"failed: {type(exc).__name__}", True
            if name == "database":
                connection.close()  # a broken connection is not reused by the next check
        else:
            checks[name] = "not configured" if answered is False else "ok"
    return JsonResponse({"status": "failed" if failed else "ok", "checks": checks}, status=503 if failed else 200)
