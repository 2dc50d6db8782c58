"""A real Celery worker process, fed through a real broker (Redis, then RabbitMQ),
computes a study report written to the same database the test reads.

Marked `broker`: deselected by default (a fresh machine needs nothing running);
.ci/run runs it with `pytest -m broker` on both SQLite and PostgreSQL.
"""

import os
import subprocess
import sys
import time
import uuid

import pytest
from celery import Celery
from django.conf import settings
from django.core.management import call_command
from django.db import connection

from analysis.models import AnalysisResult
from analysis.selectors import report_inputs
from analysis.tasks import run_study_report_task
from annotate.models import Assignment, Study
from annotate.services.ratings import submit_rating

pytestmark = [pytest.mark.broker, pytest.mark.django_db(transaction=True)]

# TEST_REDIS_URL and TEST_RABBITMQ_URL point the broker tests elsewhere (another Redis
# database or RabbitMQ vhost, so that two runs at once do not take each other's tasks).
BROKERS = {
    "redis": os.environ.get("TEST_REDIS_URL") or "redis://127.0.0.1:6379/15",
    "rabbitmq": os.environ.get("TEST_RABBITMQ_URL") or "amqp://guest:guest@127.0.0.1:5672//",
}


def database_url() -> str:
    db = connection.settings_dict
    if "sqlite" in db["ENGINE"]:
        return f"sqlite:///{db['NAME']}"
    user = db.get("USER") or "postgres"
    return f"postgres://{user}@{db.get('HOST') or '127.0.0.1'}:{db.get('PORT') or 5432}/{db['NAME']}"


def stop(process: subprocess.Popen, timeout: float = 30) -> str:
    """Stop a worker process (warm shutdown, then kill) and return its log."""
    process.terminate()
    try:
        output, _ = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        output, _ = process.communicate()
    return output


@pytest.fixture
def worker(request):
    broker = BROKERS[request.param]
    queue = f"ratings-test-{uuid.uuid4().hex[:8]}"
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "tests.settings",
        "CELERY_BROKER_URL": broker,
        "DATABASE_URL": database_url(),
    }
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "config",
            "worker",
            "--pool=solo",
            "-Q",
            queue,
            "--without-gossip",
            "--without-mingle",
            "--without-heartbeat",
            "-l",
            "info",
        ],
        cwd=settings.BASE_DIR,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    # A client app of our own sends the tasks, so the suite's eager app is left alone.
    sender = Celery("sender", broker=broker, set_as_current=False)
    try:
        yield sender, queue
    finally:
        sender.close()
        request.node.worker_log = stop(process)


def rated_demo_study() -> Study:
    call_command("load_demo")
    study = Study.objects.get(slug="demo-litsumm")
    for i, a in enumerate(Assignment.objects.filter(study=study).select_related("rater").order_by("pk")):
        submit_rating(
            assignment=a, rater=a.rater, answers={"overall": 1 + (i % 5), "failure_modes": []}, version=a.version
        )
    return study


@pytest.mark.parametrize("worker", list(BROKERS), indirect=True)
def test_a_worker_process_computes_the_report_once(worker):
    study = rated_demo_study()
    inputs = report_inputs(study=study, phase="all")
    fingerprint, n = inputs.fingerprint, inputs.ratings[0]
    result = AnalysisResult.objects.create(study=study, phase="all", fingerprint=fingerprint, n_revisions=n)
    # Delivered twice, as a broker may do: the second delivery must change nothing.
    sender, queue = worker
    for _ in range(2):
        sender.send_task(run_study_report_task.name, args=[result.pk], queue=queue)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        result.refresh_from_db()
        if result.status in (AnalysisResult.Status.DONE, AnalysisResult.Status.FAILED):
            break
        time.sleep(0.5)
    assert result.status == AnalysisResult.Status.DONE, result.error
    assert result.progress == 100
    assert result.result["agreement"]  # computed by the worker, read back here
    assert AnalysisResult.objects.filter(study=study).count() == 1
