"""Health checks for a load balancer or an orchestrator (docs/deployment.md).

- `GET /healthz`: the process is up and serving. Touches nothing else, so a database
  outage does not make an orchestrator restart every web process (which would not help).
- `GET /readyz`: this process can do its work: the database answers a `SELECT 1`, the
  broker accepts a connection (when one is configured; without one, tasks run in-process
  and there is nothing to check), and every file storage answers an existence check
  (one HEAD request on an object store). 200 when all answer, else 503 naming each
  dependency's state. A load balancer takes a web process out of rotation on 503.

Both answer anyone (no login: the checker has none), hold no study data, and give a
failure's kind only (the exception's class name), never its message, which can name
hosts, users or buckets. Each costs a few milliseconds: fine every few seconds.
"""

from __future__ import annotations

from celery import current_app
from django.conf import settings
from django.core.files.storage import storages
from django.db import DatabaseError, connection
from django.http import JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET
from kombu.exceptions import OperationalError as BrokerError

# A file that never exists: asking for it is the cheapest question a storage answers.
PROBE = "readyz-probe/absent"
BROKER_TIMEOUT = 2.0  # seconds: a check must answer well within a checker's own timeout


@never_cache
@require_GET
def healthz(request):
    return JsonResponse({"status": "ok"})


@never_cache
@require_GET
def readyz(request):
    checks = {"database": _database(), "broker": _broker(), **_storages()}
    ready = all(state in ("ok", "not configured") for state in checks.values())
    return JsonResponse({"status": "ready" if ready else "unavailable", "checks": checks}, status=200 if ready else 503)


def _database() -> str:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
    except DatabaseError as exc:
        return f"unavailable ({type(exc).__name__})"
    return "ok"


def _broker() -> str:
    if settings.CELERY_TASK_ALWAYS_EAGER:
        return "not configured"
    try:
        with current_app.connection_for_write() as conn:
            conn.ensure_connection(max_retries=1, interval_start=0, interval_step=0, timeout=BROKER_TIMEOUT)
    except (BrokerError, OSError) as exc:
        return f"unavailable ({type(exc).__name__})"
    return "ok"


def _storages() -> dict[str, str]:
    """Every storage but the static files' (served from the process's own files)."""
    states = {}
    for alias in settings.STORAGES:
        if alias == "staticfiles":
            continue
        try:
            storages[alias].exists(PROBE)
        except _storage_errors() as exc:
            states[f"storage:{alias}"] = f"unavailable ({type(exc).__name__})"
        else:
            states[f"storage:{alias}"] = "ok"
    return states


def _storage_errors() -> tuple[type[BaseException], ...]:
    errors: tuple[type[BaseException], ...] = (OSError,)
    try:  # the S3 backend's failures, when it is installed (django-storages on boto3)
        from botocore.exceptions import BotoCoreError, ClientError
    except ImportError:
        return errors
    return (*errors, BotoCoreError, ClientError)
