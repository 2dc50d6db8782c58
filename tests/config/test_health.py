"""/healthz and /readyz (config/health.py): open to anyone, no study data, and /readyz
failing cleanly (503 naming the dependency, its failure's kind only) when the database or
the broker is down. A dependency that is down is a real one made unreachable: the
platform's own settings in a separate process pointed at a port where nothing listens."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# Ports of this test's range where nothing listens.
DEAD_POSTGRES = "postgres://ratings:db-secret@127.0.0.1:18598/ratings"
DEAD_REDIS = "redis://:broker-secret@127.0.0.1:18597/0"
LIVE_REDIS = os.environ.get("TEST_RATELIMIT_REDIS_URL") or "redis://127.0.0.1:6379/13"


def get_in_a_process(path: str, tmp_path: Path, **env: str) -> tuple[int, dict, str]:
    environment = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(tmp_path),
        "PYTHONPATH": str(ROOT),
        "DEBUG": "1",
        "ALLOWED_HOSTS": "testserver",
        "LOCAL_SECRET_KEY_FILE": str(tmp_path / "secret_key"),
        "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
        "IMPORTS_DIR": str(tmp_path / "imports"),
        "EXPORTS_DIR": str(tmp_path / "exports"),
        **env,
    }
    result = subprocess.run(
        [sys.executable, "-m", "tests.config.health_child", path],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    line = result.stdout.strip().splitlines()[-1]
    answer = json.loads(line)
    return answer["status"], answer["body"], line


@pytest.mark.django_db
def test_healthz_answers_anyone_without_touching_the_database(client, django_assert_num_queries):
    with django_assert_num_queries(0):
        response = client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}
    assert "no-cache" in response["Cache-Control"] or "max-age=0" in response["Cache-Control"]


@pytest.mark.django_db
def test_readyz_answers_anyone_when_everything_answers(client):
    response = client.get("/readyz")
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "ready"
    # The test settings run tasks in-process: no broker to check.
    assert body["checks"]["database"] == "ok" and body["checks"]["broker"] == "not configured"
    assert all(state == "ok" for name, state in body["checks"].items() if name.startswith("storage:"))


@pytest.mark.django_db
def test_health_checks_take_only_get(client):
    assert client.post("/healthz").status_code == 405
    assert client.post("/readyz").status_code == 405


def test_readyz_is_503_naming_the_database_when_it_is_down(tmp_path):
    status, body, line = get_in_a_process("/readyz", tmp_path, DATABASE_URL=DEAD_POSTGRES)
    assert status == 503
    assert body["status"] == "unavailable"
    assert body["checks"]["database"].startswith("unavailable (")
    assert "db-secret" not in line and "18598" not in line
    # /healthz still answers: the process is up, and restarting it would not help.
    status, body, _ = get_in_a_process("/healthz", tmp_path, DATABASE_URL=DEAD_POSTGRES)
    assert (status, body) == (200, {"status": "ok"})


def test_readyz_is_503_naming_the_broker_when_it_is_down(tmp_path):
    status, body, line = get_in_a_process("/readyz", tmp_path, CELERY_BROKER_URL=DEAD_REDIS)
    assert status == 503
    assert body["checks"]["broker"].startswith("unavailable (")
    assert body["checks"]["database"] == "ok"
    assert "broker-secret" not in line


def test_readyz_checks_a_broker_that_answers(tmp_path):
    status, body, _ = get_in_a_process("/readyz", tmp_path, CELERY_BROKER_URL=LIVE_REDIS)
    assert status == 200, body
    assert body["checks"]["broker"] == "ok"
