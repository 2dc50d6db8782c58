"""A worker killed with SIGKILL while it runs a study report, an export, an
import, an evaluator, the rubric judge, a generation job or an answer job is seen within
seconds, not a lease: the page and the API say "stopped: the worker died" and offer to
resume.

Real worker processes (`celery -A tests.broker.worker_app worker`, prefork, one pool
process) through real brokers (Redis, then RabbitMQ), on the suite's database (SQLite or
PostgreSQL: .ci/run runs both). The runs are started the way users start them (the API,
the pages, the services the commands call), so the real enqueue paths send the tasks.

Two deaths: the pool process that runs the task (kill -9 of the child: the worker's main
process sees Celery's WorkerLostError at once, and the task_failure handlers mark the run),
and the whole worker (kill -9 of the main process too: no one is left to say so, and the
heartbeat lease, RUN_LEASE = 3 s here, runs out).

Marked `broker`: deselected by default. Each test prints how many seconds the death took to
show (pytest -s), the figure docs/deployment.md quotes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from io import StringIO
from pathlib import Path

import pytest
from django.conf import settings as django_settings
from django.contrib.auth import get_user_model
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.test import Client

from analysis.models import AnalysisResult
from annotate.models import Source, Study
from config.celery import app
from core.background import WORKER_DIED
from datasets.models import ExportRun, ImportRun
from generation.models import AnswerJob, EvaluationRun, GenerationJob, JudgeRun
from tests.broker.test_celery_worker import BROKERS, database_url, rated_demo_study
from tests.broker.test_generation_worker import forget_connections
from tests.conftest import api_client_for
from tests.generation.scripted_server import TEST_ENV, Reply, ScriptedServer

pytestmark = [pytest.mark.broker, pytest.mark.django_db(transaction=True)]

LEASE = "3"
DIED = WORKER_DIED.capitalize()  # how an error that says so starts


def wait_for(condition, what: str, timeout: float = 300, worker=None):
    """condition()'s first true value, looked at every 0.1 s (a generous limit: the machine
    is shared and loaded)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        if worker is not None and worker.process.poll() is not None and worker.expect_alive:
            pytest.fail(f"the worker exited while waiting for {what}:\n{worker.log()}")
        time.sleep(0.1)
    pytest.fail(f"timed out after {timeout} s waiting for {what}" + (f"\n{worker.log()}" if worker else ""))


class Worker:
    """One `celery worker` (prefork, one pool process) on a queue of its own."""

    def __init__(self, name: str, broker: str, queue: str, env: dict[str, str], log: Path):
        self.name, self.log_path, self.expect_alive, self.killed = name, log, True, set()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "tests.broker.worker_app", "worker", "--pool=prefork"]
            + ["--concurrency=1", "-Q", queue, "--without-gossip", "--without-mingle", "--without-heartbeat"]
            + ["-l", "info"],
            cwd=django_settings.BASE_DIR,
            # The worker's own sends (a run queued again from its main process when its pool
            # process is lost) go to the test's queue too, not to Celery's default one.
            env={**os.environ, **env, "CELERY_BROKER_URL": broker, "TEST_TASK_QUEUE": queue},
            stdout=log.open("w"),
            stderr=subprocess.STDOUT,
        )

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")[-6000:]

    def children(self) -> list[int]:
        path = Path(f"/proc/{self.process.pid}/task/{self.process.pid}/children")
        try:
            return [int(pid) for pid in path.read_text().split()]
        except OSError:
            return []

    def kill_pool_process(self) -> float:
        """SIGKILL the pool process (running the task); the main process lives on and starts
        another, which takes the next task."""
        [child] = wait_for(
            lambda: [pid for pid in self.children() if pid not in self.killed], "the pool process", worker=self
        )
        os.kill(child, signal.SIGKILL)
        self.killed.add(child)
        return time.monotonic()

    def kill_everything(self) -> float:
        """SIGKILL the whole worker, main process first (nobody is left to tell)."""
        self.expect_alive = False
        children = self.children()
        self.process.send_signal(signal.SIGKILL)
        for child in children:
            os.kill(child, signal.SIGKILL)
        self.process.wait(timeout=60)
        return time.monotonic()

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        for child in self.children():
            try:
                os.kill(child, signal.SIGKILL)
            except ProcessLookupError:
                pass


@pytest.fixture
def llm():
    """An LLM endpoint that answers nothing for ten minutes: a worker is busy in its call."""
    with ScriptedServer(lambda request: Reply("Rating: 2"), latency=600) as server:
        yield server


@pytest.fixture
def start_worker(request, settings, monkeypatch, tmp_path, llm):
    """start_worker(lease) -> a worker on `request.param`'s broker, whose runs hold a lease
    of `lease` seconds (RUN_LEASE); this process's Celery app sends to it. With a lease
    far longer than the test, a run can only be seen dead within seconds through Celery's
    WorkerLostError; with a short one, the lease tells when nobody is left to."""
    broker = BROKERS[request.param]
    queue = f"killed-test-{uuid.uuid4().hex[:8]}"
    env = {
        **TEST_ENV,
        "DJANGO_SETTINGS_MODULE": "tests.settings",
        "DATABASE_URL": database_url(),
        "OPENAI_BASE_URL": llm.base_url,
        "GENERATION_TIMEOUT": "900",
        "EXPORTS_DIR": str(tmp_path / "exports"),
        "IMPORTS_DIR": str(tmp_path / "imports"),
        "TEST_SLOW_REPORTS": "1",
    }
    for name, value in env.items():
        if name != "DJANGO_SETTINGS_MODULE":
            monkeypatch.setenv(name, value)
    settings.EXPORTS_DIR, settings.IMPORTS_DIR = env["EXPORTS_DIR"], env["IMPORTS_DIR"]
    saved = {key: app.conf[key] for key in ("task_always_eager", "broker_url", "task_default_queue")}
    settings.CELERY_TASK_ALWAYS_EAGER = False
    app.conf.update(task_always_eager=False, broker_url=broker, task_default_queue=queue)
    forget_connections()
    started: list[Worker] = []

    def start(lease: str) -> Worker:
        monkeypatch.setenv("RUN_LEASE", lease)
        log = tmp_path / f"worker-{len(started)}.log"
        started.append(Worker(request.param, broker, queue, {**env, "RUN_LEASE": lease}, log))
        return started[-1]

    try:
        yield start
    finally:
        for worker in started:
            worker.stop()
        app.conf.update(saved)
        forget_connections()


def demo_admin():
    return get_user_model().objects.get(username="admin")


def report_death(kind: str, broker: str, seconds: float, how: str) -> None:
    print(f"\n[worker killed] {kind} via {broker}, {how}: shown {seconds:.1f} s after the kill")


BOTH = list(BROKERS)


# --- the pool process dies: WorkerLostError, seen at once ---------------------------------


def _report(study, worker) -> None:
    api = api_client_for(demo_admin())
    url = f"/api/studies/{study.slug}/analysis/"
    assert api.get(url).status_code == 202
    wait_for(lambda: AnalysisResult.objects.get(study=study).status == "running", "the report to run", worker=worker)
    killed = worker.kill_pool_process()
    dead = wait_for(lambda: (r := api.get(url)).data["status"] == "failed" and r, "the report to fail")
    report_death("report", worker.name, time.monotonic() - killed, "pool process")
    assert dead.status_code == 200 and dead.data["error"].startswith(DIED)
    # The page says so and offers to compute it again.
    client = Client()
    client.force_login(demo_admin())
    page = client.get(f"/analysis/{study.slug}/").content.decode()
    assert "Stopped: the worker died" in page and "Compute it again" in page


def _export(study, worker) -> None:
    # Enough text that writing three formats and a zip takes a while.
    words = " ".join(f"w{i}" for i in range(6000))
    Source.objects.bulk_create(
        [Source(study=study, key=f"bulk-{i}", text=f"Trial {i}. {words}") for i in range(600)], batch_size=100
    )
    api = api_client_for(demo_admin())
    started = api.post(f"/api/studies/{study.slug}/exports/", {"include_restricted": True}, format="json")
    assert started.status_code == 202
    export_id = started.json()["id"]
    url = f"/api/studies/{study.slug}/exports/{export_id}/"
    wait_for(lambda: api.get(url).json()["status"] == "running", "the export to run", worker=worker)
    first = ExportRun.objects.get(uuid=export_id).worker
    killed = worker.kill_pool_process()
    # The run goes back to the queue at once and the worker's next pool process
    # takes it over from nothing (a second claim, a new holder), rather than failing it.
    done = wait_for(lambda: (r := api.get(url).json())["status"] == "done" and r, "the export to be taken over")
    report_death("export", worker.name, time.monotonic() - killed, "pool process, taken over")
    row = ExportRun.objects.get(uuid=export_id)
    assert row.tries == 2 and row.worker != first, (row.tries, row.worker)
    assert api.get(done["download"]).status_code == 200
    Source.objects.filter(study=study, key__startswith="bulk-").delete()


def _import(study, worker) -> None:
    lines = "".join(
        json.dumps({"type": "source", "study": study.slug, "key": f"imp-{i}", "text": f"Trial {i} ended. " * 20}) + "\n"
        for i in range(20000)
    )
    api = api_client_for(demo_admin())
    file = SimpleUploadedFile("big.jsonl", lines.encode(), content_type="application/jsonl")
    started = api.post(f"/api/studies/{study.slug}/imports/", {"file": file}, format="multipart")
    assert started.status_code == 202
    url = f"/api/studies/{study.slug}/imports/{started.json()['id']}/"
    wait_for(lambda: api.get(url).json()["status"] == "running", "the import to run", worker=worker)
    killed = worker.kill_pool_process()
    done = wait_for(lambda: (r := api.get(url).json())["status"] == "done" and r, "the import to be taken over")
    report_death("import", worker.name, time.monotonic() - killed, "pool process, taken over")
    # The dead worker's transaction left nothing; the one that took it over imported all, once.
    assert done["counts"]["source"]["created"] == 20000, done
    assert study.sources.filter(key__startswith="imp-").count() == 20000
    assert ImportRun.objects.get(uuid=started.json()["id"]).tries == 2


def _automatic_run(study, model, name: str, worker) -> None:
    client = Client()
    client.force_login(demo_admin())
    url = f"/studies/{study.slug}/evaluators/"
    assert client.post(url, {"evaluator": name}).status_code == 302
    wait_for(lambda: model.objects.filter(study=study, status="running").exists(), f"{name} to run", worker=worker)
    killed = worker.kill_pool_process()
    wait_for(lambda: model.objects.filter(study=study, status="failed").exists(), f"{name} to fail")
    report_death(name, worker.name, time.monotonic() - killed, "pool process")
    assert model.objects.get(study=study).error.startswith(DIED)
    page = client.get(url).content.decode()
    assert "<strong>failed</strong>: Stopped: the worker died" in page
    assert f'value="{name}"' in page  # the button that resumes it


def _generation_job(study, worker) -> None:
    from generation import services
    from generation.tasks import generate_summary_task

    services.start_generation_run(study=study, pipeline="litsumm", limit=1, enqueue=generate_summary_task.delay)
    wait_for(lambda: GenerationJob.objects.filter(status="running").exists(), "the job to run", worker=worker)
    killed = worker.kill_pool_process()
    wait_for(lambda: GenerationJob.objects.filter(status="failed").exists(), "the job to fail")
    report_death("generation job", worker.name, time.monotonic() - killed, "pool process")
    assert GenerationJob.objects.get().error == services.WORKER_DIED_ERROR


def _answer_job(worker) -> None:
    from generation import services
    from generation.tasks import answer_question_task
    from literature.demo import QUESTION_STUDY

    study = Study.objects.get(slug=QUESTION_STUDY)
    services.start_answer_run(
        study=study, engine="local", regime="unrestricted", limit=1, enqueue=answer_question_task.delay
    )
    wait_for(lambda: AnswerJob.objects.filter(status="running").exists(), "the job to run", worker=worker)
    killed = worker.kill_pool_process()
    wait_for(lambda: AnswerJob.objects.filter(status="failed").exists(), "the job to fail")
    report_death("answer job", worker.name, time.monotonic() - killed, "pool process")
    assert AnswerJob.objects.get().error == services.WORKER_DIED_ERROR


@pytest.mark.parametrize("start_worker", BOTH, indirect=True)
def test_every_kind_of_run_whose_pool_process_is_killed_says_the_worker_died(start_worker):
    """One worker, its pool process killed in turn under each kind of run (the worker's
    main process starts a new one each time); the lease is longer than the test."""
    litsumm = rated_demo_study()
    call_command("load_question_demo", stdout=StringIO())
    worker = start_worker("600")
    _report(litsumm, worker)
    _export(litsumm, worker)
    _import(litsumm, worker)
    _automatic_run(Study.objects.get(slug="demo-factpico"), EvaluationRun, "factpico_fulltext", worker)
    _automatic_run(litsumm, JudgeRun, "rubric_judge", worker)
    _generation_job(litsumm, worker)
    _answer_job(worker)


# --- the whole worker dies: its heartbeat stops, and the short lease runs out -------------


@pytest.mark.parametrize("start_worker", BOTH, indirect=True)
def test_runs_whose_whole_worker_is_killed_say_so_after_a_short_lease(start_worker):
    litsumm = rated_demo_study()
    api = api_client_for(demo_admin())
    url = f"/api/studies/{litsumm.slug}/analysis/"
    worker = start_worker(LEASE)
    api.get(url)
    wait_for(lambda: AnalysisResult.objects.get(study=litsumm).status == "running", "the report to run", worker=worker)
    killed = worker.kill_everything()
    dead = wait_for(lambda: (r := api.get(url)).data["status"] == "failed" and r, "the report to fail")
    report_death("report", worker.name, time.monotonic() - killed, "whole worker (lease)")
    assert dead.data["error"].startswith(DIED)

    factpico = Study.objects.get(slug="demo-factpico")
    client = Client()
    client.force_login(demo_admin())
    page = f"/studies/{factpico.slug}/evaluators/"
    worker = start_worker(LEASE)
    client.post(page, {"evaluator": "factpico_fulltext"})
    wait_for(lambda: EvaluationRun.objects.filter(status="running").exists(), "the run to start", worker=worker)
    killed = worker.kill_everything()
    wait_for(lambda: "stopped: the worker died" in client.get(page).content.decode(), "the page to say so")
    report_death("evaluator", worker.name, time.monotonic() - killed, "whole worker (lease)")
    # The periodic sweep records it, as it does for runs no page looks at.
    from generation.tasks import sweep_generation_runs_task

    assert sweep_generation_runs_task() >= 1
    assert EvaluationRun.objects.get(study=factpico).error.startswith(DIED)
