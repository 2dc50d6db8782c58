"""The production shape (gunicorn, one worker process of WEB_THREADS=8 threads) with a
broker that accepts connections and never answers (tests/silent_server.py): eight export
requests at once each answer 503 and fail their run, and /healthz answers while they wait
on the broker, instead of queueing behind eight threads held for ever.

The clients' timeouts (60 s) only detect a hang; nothing here measures time."""

import json
import sqlite3
import subprocess
import sys
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.config.test_server import BASE, environment, get, gunicorn
from tests.silent_server import SilentServer

CLIENT_TIMEOUT = 60
STALLED = 8

SETUP = """
import django; django.setup()
from io import StringIO
from django.contrib.auth import get_user_model
from django.core.management import call_command
from tests.factories import StudyFactory
get_user_model().objects.create_superuser("probe", "probe@example.org", "not-used-here")
StudyFactory(slug="silent-broker")
out = StringIO(); call_command("create_api_token", "probe", stdout=out)
print(out.getvalue().strip())
"""


def post(url: str, token: str) -> tuple[int, dict]:
    request = urllib.request.Request(
        url,
        data=b"{}",
        method="POST",
        headers={"Authorization": f"Token {token}", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=CLIENT_TIMEOUT) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


@pytest.fixture
def silent():
    with SilentServer() as server:
        yield server


def test_healthz_answers_while_eight_requests_wait_on_a_silent_broker(tmp_path, silent):
    env = environment(tmp_path, CELERY_BROKER_URL=silent.url("redis"), DJANGO_SETTINGS_MODULE="config.settings")
    for command in (["manage.py", "migrate", "--noinput"], ["-c", SETUP]):
        done = subprocess.run(
            [sys.executable, *command], cwd=BASE, env=env, capture_output=True, text=True, timeout=600
        )
        assert done.returncode == 0, done.stderr
    token = done.stdout.strip().splitlines()[-1]
    with gunicorn({**env, "WEB_THREADS": str(STALLED)}, workers=1) as base:
        url = f"{base}/api/studies/silent-broker/exports/"
        with ThreadPoolExecutor(max_workers=STALLED) as pool:
            exports = [pool.submit(post, url, token) for _ in range(STALLED)]
            # Every request thread of the server has reached the broker: they all wait on it now.
            while silent.accepted < STALLED and not all(f.done() for f in exports):
                time.sleep(0.05)
            status, body, _ = get(f"{base}/healthz")
            assert status == 200 and json.loads(body) == {"status": "ok"}
            answers = [f.result() for f in exports]
    assert [status for status, _ in answers] == [503] * STALLED
    assert {body["error"]["code"] for _, body in answers} == {"queue_unavailable"}
    with sqlite3.connect(tmp_path / "db.sqlite3") as db:
        runs = db.execute("SELECT status, error FROM datasets_exportrun").fetchall()
    assert len(runs) == STALLED
    assert all(status == "failed" and "task queue is unavailable" in error.lower() for status, error in runs)
