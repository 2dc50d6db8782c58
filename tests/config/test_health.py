"""Health checks: /healthz says the process is up without touching the
database; /readyz asks the database, the broker (when one is configured) and the storage,
and answers 503 naming the one that failed, for each of them down in a process of its own
(a database URL, a broker URL and an S3 endpoint nobody answers at). No login, no study
data, one query, the security headers of every page."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest
from django.test import Client

from tests.config.test_server import BASE, environment
from tests.s3_server import free_port

# Ports of this project's range where nothing listens (checked before use).
NOBODY = 18490

pytestmark = pytest.mark.django_db


def test_healthz_answers_without_the_database(client, django_assert_num_queries):
    with django_assert_num_queries(0):
        response = client.get("/healthz")
    assert response.status_code == 200 and response.json() == {"status": "ok"}
    assert response["Cache-Control"].startswith("max-age=0")


def test_readyz_asks_the_database_off_the_request_thread_and_says_what_it_checked(
    client, django_assert_num_queries, settings, tmp_path
):
    settings.EXPORTS_DIR = tmp_path / "exports"
    settings.IMPORTS_DIR = tmp_path / "imports"
    # The checks run in threads of their own, so READY_TIMEOUT bounds the answer (config/health.py).
    with django_assert_num_queries(0):
        response = client.get("/readyz")
    assert response.status_code == 200
    # No broker in the tests' settings: tasks run in process.
    assert response.json() == {
        "status": "ok",
        "checks": {"database": "ok", "broker": "not configured", "storage": "ok"},
    }


@pytest.mark.parametrize("path", ["/healthz", "/readyz"])
def test_health_checks_are_the_same_for_everyone_and_show_no_study_data(
    path, study, rater_a, admin_user, settings, tmp_path
):
    settings.EXPORTS_DIR = tmp_path / "exports"
    settings.IMPORTS_DIR = tmp_path / "imports"
    answers = []
    for user in (None, rater_a, admin_user):
        client = Client(enforce_csrf_checks=True)
        if user is not None:
            client.force_login(user)
        response = client.get(path)
        assert response.status_code == 200
        answers.append(response.content)
        assert study.slug.encode() not in response.content and study.title.encode() not in response.content
    assert len(set(answers)) == 1
    assert Client(enforce_csrf_checks=True).head(path).status_code == 200
    assert Client(enforce_csrf_checks=True).post(path).status_code == 405  # read-only


def ready_in_a_process(tmp_path, **env) -> tuple[int, dict]:
    """GET /readyz in a fresh process with `env` (a dependency pointed at nothing)."""
    script = (
        "import json, django; django.setup();"
        "from django.test.utils import setup_test_environment; setup_test_environment();"
        "from django.test import Client; r = Client().get('/readyz');"
        "print(json.dumps([r.status_code, json.loads(r.content)]))"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=BASE,
        env={**environment(tmp_path), "DJANGO_SETTINGS_MODULE": "config.settings", **env},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    status, body = json.loads(done.stdout.strip().splitlines()[-1])
    return status, body


def nobody_at() -> int:
    port = free_port(NOBODY)
    return port


def test_readyz_is_a_503_naming_the_database_when_it_cannot_be_reached(tmp_path):
    status, body = ready_in_a_process(tmp_path, DATABASE_URL=f"postgres://postgres@127.0.0.1:{nobody_at()}/nothing")
    assert status == 503 and body["status"] == "failed"
    assert body["checks"]["database"] == "failed: OperationalError"
    assert body["checks"]["storage"] == "ok"
    assert "127.0.0.1" not in json.dumps(body)  # the kind of error, not where


def test_readyz_is_a_503_naming_the_broker_when_it_cannot_be_reached(tmp_path):
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"],
        cwd=BASE,
        env=environment(tmp_path),
        check=True,
        timeout=600,
    )
    status, body = ready_in_a_process(tmp_path, CELERY_BROKER_URL=f"redis://127.0.0.1:{nobody_at()}/0")
    assert status == 503
    assert body["checks"]["broker"].startswith("failed: ")
    assert body["checks"]["database"] == "ok" and body["checks"]["storage"] == "ok"


def test_readyz_is_a_503_naming_the_storage_when_the_object_store_cannot_be_reached(tmp_path):
    status, body = ready_in_a_process(
        tmp_path,
        STORAGE_BACKEND="s3",
        S3_BUCKET="ratings",
        S3_REGION="us-east-1",
        S3_ENDPOINT_URL=f"http://127.0.0.1:{nobody_at()}",
        AWS_ACCESS_KEY_ID="testing",
        AWS_SECRET_ACCESS_KEY="testing",
    )
    assert status == 503
    assert body["checks"]["storage"].startswith("failed: ")
    assert body["checks"]["database"] == "ok"


def test_s3_storage_comes_from_the_environment_alone(tmp_path):
    script = (
        "import json, django; django.setup(); from django.conf import settings;"
        "exports = settings.STORAGES['exports']; config = exports['OPTIONS'].pop('client_config');"
        "exports['client'] = [config.connect_timeout, config.read_timeout, config.retries, config.s3];"
        "print(json.dumps(exports))"
    )
    env = {
        **environment(tmp_path),
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "STORAGE_BACKEND": "s3",
        "S3_BUCKET": "ratings",
        "S3_REGION": "eu-west-1",
        "S3_ENDPOINT_URL": "http://minio:9000",
        "S3_PREFIX": "site-a",
        "S3_ADDRESSING_STYLE": "path",
        "S3_READ_TIMEOUT": "7.5",
    }
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=BASE, env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr
    exports = json.loads(done.stdout.strip().splitlines()[-1])
    assert exports["BACKEND"] == "storages.backends.s3.S3Storage"
    options = exports["OPTIONS"]
    assert (options["bucket_name"], options["region_name"], options["endpoint_url"]) == (
        "ratings",
        "eu-west-1",
        "http://minio:9000",
    )
    assert options["location"] == "site-a/exports" and options["default_acl"] is None
    # Every call has bounded waits (S3_CONNECT_TIMEOUT, S3_READ_TIMEOUT, S3_MAX_ATTEMPTS).
    assert exports["client"] == [3.0, 7.5, {"mode": "standard", "total_max_attempts": 2}, {"addressing_style": "path"}]
    # Without a bucket, the settings refuse to start, naming the variable.
    env.pop("S3_BUCKET")
    refused = subprocess.run(
        [sys.executable, "-c", script], cwd=BASE, env=env, capture_output=True, text=True, timeout=600
    )
    assert refused.returncode != 0 and "S3_BUCKET" in refused.stderr


# --- dependencies that accept connections and never answer -----------------------------


@pytest.fixture
def ready_in_time(monkeypatch):
    """/readyz with READY_TIMEOUT=1, asked from a thread the test waits on for at most 60 s
    (a hang, not a benchmark). Afterwards, until no check of the silent dependency is still
    running, so the next test's /readyz starts its own."""
    from tests.datasets.test_silent_dependencies import answered

    monkeypatch.setenv("READY_TIMEOUT", "1")

    def ask() -> tuple[int, dict]:
        response = answered(lambda: Client().get("/readyz"))
        return response.status_code, response.json()

    yield ask
    deadline = time.monotonic() + 60
    while "failed" in json.dumps(ask()[1]["checks"]) and time.monotonic() < deadline:
        time.sleep(0.1)


def settled(ask, checks: dict, *names: str) -> dict:
    """`checks` once each of `names` has answered: on a loaded machine a healthy check (a new
    database connection, say) can take longer than READY_TIMEOUT=1 the first time; /readyz
    then reports the check still running, and a later /readyz its answer. Asks again for
    at most 60 s (a hang, not a benchmark)."""
    deadline = time.monotonic() + 60
    while any(checks[name].startswith("failed: no answer") for name in names) and time.monotonic() < deadline:
        time.sleep(0.1)
        checks = ask()[1]["checks"]
    return checks


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("scheme", ["redis", "amqp"])
def test_readyz_answers_not_ready_when_the_broker_accepts_and_never_answers(scheme, ready_in_time, settings, tmp_path):
    from config.celery import app
    from tests.core.test_queue_unavailable import forget_connections
    from tests.silent_server import SilentServer

    settings.EXPORTS_DIR = tmp_path / "exports"
    settings.IMPORTS_DIR = tmp_path / "imports"
    saved = {key: app.conf[key] for key in ("task_always_eager", "broker_url")}
    with SilentServer() as silent:
        settings.CELERY_TASK_ALWAYS_EAGER = False
        app.conf.update(task_always_eager=False, broker_url=silent.url(scheme))
        forget_connections()
        try:
            status, body = ready_in_time()
        finally:
            settings.CELERY_TASK_ALWAYS_EAGER = True
            app.conf.update(saved)
            forget_connections()
    assert status == 503 and body["status"] == "failed"
    assert body["checks"]["broker"].startswith("failed: ") and silent.accepted >= 1
    checks = settled(ready_in_time, body["checks"], "database", "storage")
    assert checks["database"] == "ok" and checks["storage"] == "ok"


@pytest.mark.django_db(transaction=True)
def test_readyz_answers_not_ready_when_the_object_store_accepts_and_never_answers(ready_in_time, settings, monkeypatch):
    from tests.datasets.test_silent_dependencies import s3_storages
    from tests.silent_server import SilentServer

    with SilentServer() as silent:
        settings.STORAGES = s3_storages(silent.url("http"), monkeypatch)
        status, body = ready_in_time()
        # The check went on in the background after the answer: it did reach the store (on a
        # loaded machine the client may connect only after READY_TIMEOUT has passed).
        deadline = time.monotonic() + 60
        while silent.accepted < 1 and time.monotonic() < deadline:
            time.sleep(0.05)
    assert status == 503 and body["checks"]["storage"].startswith("failed: ") and silent.accepted >= 1
    checks = settled(ready_in_time, body["checks"], "database", "broker")
    assert checks["database"] == "ok" and checks["broker"] == "not configured"
