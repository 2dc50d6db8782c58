"""`generate` with a broker: real Celery worker processes (prefork) run the jobs
through Redis or RabbitMQ, call the scripted LLM server over HTTP, and write to the
database the command reads; the command waits for them.

Marked `broker`: deselected by default; .ci/run runs it on SQLite and PostgreSQL.
"""

import json
import os
import subprocess
import sys
import time
import uuid

import pytest
from django.core.management import call_command
from django.utils import timezone
from kombu import pools

from annotate.models import Summary
from config.celery import app
from generation.models import LLMCall
from tests.broker.test_celery_worker import BROKERS, database_url, stop
from tests.factories import StudyFactory
from tests.generation.conftest import TRIAL, held_job, honest_model, make_source
from tests.generation.scripted_server import TEST_ENV, ScriptedServer

pytestmark = [pytest.mark.broker, pytest.mark.django_db(transaction=True)]

# Short lease: a job held by a dead worker is taken over after 3 × (1 s + 1 s).
WORKER_ENV = {**TEST_ENV, "GENERATION_TIMEOUT": "1", "GENERATION_BACKOFF_MAX": "1", "GENERATION_JOB_LEASE": "1"}


@pytest.fixture
def llm():
    with ScriptedServer(honest_model) as server:
        yield server


@pytest.fixture
def workers(request, llm, settings, monkeypatch):
    """Two prefork worker processes on a queue of their own; this process sends to it."""
    broker = BROKERS[request.param]
    queue = f"generation-test-{uuid.uuid4().hex[:8]}"
    for name, value in {**WORKER_ENV, "OPENAI_BASE_URL": llm.base_url}.items():
        monkeypatch.setenv(name, value)
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "tests.settings",
        "CELERY_BROKER_URL": broker,
        "DATABASE_URL": database_url(),
    }
    process = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "config", "worker", "--pool=prefork", "--concurrency=2", "-Q", queue]
        + ["--without-gossip", "--without-mingle", "--without-heartbeat", "-l", "info"],
        cwd=settings.BASE_DIR,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    settings.CELERY_TASK_ALWAYS_EAGER = False
    saved = {key: app.conf[key] for key in ("task_always_eager", "broker_url", "task_default_queue")}
    app.conf.update(task_always_eager=False, broker_url=broker, task_default_queue=queue)
    forget_connections()
    try:
        yield
    finally:
        app.conf.update(saved)
        forget_connections()
        request.node.worker_log = stop(process)


def forget_connections() -> None:
    """The project's app caches its broker connections (as after a fork, Celery's own
    reset): drop them so the next task goes to the broker configured now."""
    pools.reset()
    app._pool = None
    app.amqp._producer_pool = None


@pytest.fixture
def sources():
    study = StudyFactory(slug="trials")
    return [make_source(study, f"trial-{i}", TRIAL, title=f"Drug {i}") for i in range(4)]


@pytest.mark.parametrize("workers", list(BROKERS), indirect=True)
def test_generate_waits_for_the_workers_and_prints_their_summaries(workers, sources, llm, capsys):
    call_command(
        "generate", "--study", "trials", "--pipeline", "litsumm", "--json", "--poll", "0.2", "--timeout", "120"
    )
    out = json.loads(capsys.readouterr().out)
    assert [s["status"] for s in out["summaries"]] == ["ok"] * 4
    assert [s["llm_calls"] for s in out["summaries"]] == [2] * 4
    assert Summary.objects.count() == 4
    assert LLMCall.objects.count() == len(llm.requests) == 8


@pytest.mark.parametrize("workers", ["redis"], indirect=True)
def test_a_job_left_running_by_a_dead_worker_is_taken_over_after_its_lease(workers, sources, llm, capsys):
    # A worker claimed this job a moment ago and died: no LLM call, no summary.
    job = held_job(sources[0], claimed_at=timezone.now())
    started = time.monotonic()
    call_command(
        "generate", "--study", "trials", "--pipeline", "litsumm", "--source", "trial-0", "--json", "--timeout", "120"
    )
    out = json.loads(capsys.readouterr().out)
    assert out["summaries"][0]["status"] == "ok"
    # The delivery found the job held, looked again after the 6 s lease, then ran it.
    assert time.monotonic() - started >= 6
    job.refresh_from_db()
    assert job.tries == 2 and job.summary is not None
    assert Summary.objects.count() == 1
