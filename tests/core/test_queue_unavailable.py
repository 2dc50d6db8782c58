"""With the broker unreachable (its URL points at a closed port), every kind of
run that a request or a command starts is marked failed with "the task queue is
unavailable" and the request answers 503 with that message (never 500); and a run that no
worker claimed within RUN_CLAIM_TIMEOUT is queued again once, then failed.

The broker here is real in the sense that matters: Celery and kombu try to connect to a
port where nothing listens (TEST_CLOSED_BROKER_URL overrides it) and fail as they would in
production. No broker needs to run."""

from __future__ import annotations

import json
import os
import socket
from datetime import timedelta
from io import StringIO

import pytest
from django.contrib.auth import get_user_model
from django.core.files.base import ContentFile
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command
from django.utils import timezone
from kombu import pools

from analysis.models import AnalysisResult
from annotate.models import Study
from config.celery import app
from core.background import QUEUE_UNAVAILABLE
from datasets import export_runs, import_runs
from datasets.models import ExportRun, ImportRun
from generation.models import EvaluationRun, GenerationJob
from tests.conftest import api_client_for

pytestmark = pytest.mark.django_db(transaction=True)


def closed_port_url() -> str:
    """A Redis URL at a port where nothing listens (bound, then closed: free right now)."""
    if os.environ.get("TEST_CLOSED_BROKER_URL"):
        return os.environ["TEST_CLOSED_BROKER_URL"]
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"redis://127.0.0.1:{port}/15"


def forget_connections() -> None:
    pools.reset()
    app._pool = None
    app.amqp._producer_pool = None


@pytest.fixture
def broker_down(settings, tmp_path):
    """The project's Celery app sends to a broker that cannot be reached."""
    # Read before the settings change: the app reads Django's settings once, when first asked.
    saved = {key: app.conf[key] for key in ("task_always_eager", "broker_url")}
    settings.CELERY_TASK_ALWAYS_EAGER = False
    settings.EXPORTS_DIR = tmp_path / "exports"
    settings.IMPORTS_DIR = tmp_path / "imports"
    app.conf.update(task_always_eager=False, broker_url=closed_port_url())
    forget_connections()
    yield
    app.conf.update(saved)
    forget_connections()


@pytest.fixture
def demo(settings):
    settings.DEBUG, settings.DEMO_PASSWORD = True, ""
    call_command("load_demo", stdout=StringIO())
    return Study.objects.get(slug="demo-litsumm")


@pytest.fixture
def admin(demo):
    return get_user_model().objects.get(username="admin")


def assert_503(response) -> None:
    assert response.status_code == 503, response.content[:500]
    assert QUEUE_UNAVAILABLE in response.content.decode().lower()


def test_the_report_api_and_page_answer_503_and_the_report_is_failed(broker_down, demo, admin, client):
    response = api_client_for(admin).get(f"/api/studies/{demo.slug}/analysis/")
    assert_503(response)
    assert response.json()["error"]["code"] == "queue_unavailable"
    result = AnalysisResult.objects.get(study=demo)
    assert result.status == "failed" and QUEUE_UNAVAILABLE in result.error.lower()
    # The page: asked again, the failed report is queued anew, and fails the same way.
    client.force_login(admin)
    page = client.get(f"/analysis/{demo.slug}/")
    assert_503(page)
    assert "<h1>Not available right now</h1>" in page.content.decode()
    assert AnalysisResult.objects.get(study=demo).status == "failed"


def test_an_export_answers_503_and_its_run_is_failed(broker_down, demo, admin):
    response = api_client_for(admin).post(f"/api/studies/{demo.slug}/exports/", {}, format="json")
    assert_503(response)
    [run] = export_runs.list_exports(study=demo)
    assert run.status == "failed" and QUEUE_UNAVAILABLE in run.error.lower() and run.finished_at


def test_the_admin_export_action_answers_503(broker_down, demo, admin, client):
    client.force_login(admin)
    response = client.post("/admin/annotate/study/", {"action": "export_dataset", "_selected_action": [demo.pk]})
    assert_503(response)
    assert [run.status for run in export_runs.list_exports(study=demo)] == ["failed"]


def test_an_import_answers_503_on_the_api_and_the_page_and_its_run_is_failed(broker_down, demo, admin, client):
    record = {"type": "source", "study": demo.slug, "key": "new-source", "text": "A trial. It ended."}
    content = (json.dumps(record) + "\n").encode()
    file = SimpleUploadedFile("one.jsonl", content, content_type="application/jsonl")
    response = api_client_for(admin).post(f"/api/studies/{demo.slug}/imports/", {"file": file}, format="multipart")
    assert_503(response)
    client.force_login(admin)
    page = client.post(f"/studies/{demo.slug}/imports/", {"file": SimpleUploadedFile("two.jsonl", content)})
    assert_503(page)
    runs = import_runs.list_imports(study=demo)
    assert [run.status for run in runs] == ["failed", "failed"]
    assert all(QUEUE_UNAVAILABLE in run.error.lower() for run in runs)


def test_an_evaluator_started_from_its_page_answers_503_and_its_run_is_failed(broker_down, demo, admin, client):
    client.force_login(admin)
    response = client.post(f"/studies/{demo.slug}/evaluators/", {"evaluator": "reference"})
    assert_503(response)
    run = EvaluationRun.objects.get(study=demo, evaluator="reference")
    assert run.status == "failed" and QUEUE_UNAVAILABLE in run.error.lower()
    page = client.get(f"/studies/{demo.slug}/evaluators/").content.decode()
    assert "<strong>failed</strong>: The task queue is unavailable" in page


def test_a_judge_run_started_from_its_page_answers_503(broker_down, demo, admin, client, serve):
    serve()
    client.force_login(admin)
    assert_503(client.post(f"/studies/{demo.slug}/evaluators/", {"evaluator": "rubric_judge"}))
    from generation.models import JudgeRun

    assert JudgeRun.objects.get(study=demo).status == "failed"


def test_generate_fails_its_jobs_and_says_the_queue_is_unavailable(broker_down, serve, demo):
    serve()
    with pytest.raises(CommandError, match="task queue is unavailable"):
        call_command("generate", "--study", demo.slug, "--pipeline", "litsumm", "--limit", "2", stdout=StringIO())
    jobs = GenerationJob.objects.all()
    assert jobs.count() == 2
    assert {job.status for job in jobs} == {"failed"}
    assert all(QUEUE_UNAVAILABLE in job.error for job in jobs)


def test_answer_questions_fails_its_jobs_and_says_the_queue_is_unavailable(broker_down, serve, settings):
    from generation.models import AnswerJob

    settings.DEBUG, settings.DEMO_PASSWORD = True, ""
    call_command("load_question_demo", stdout=StringIO())
    serve()
    from literature.demo import QUESTION_STUDY

    study = Study.objects.get(slug=QUESTION_STUDY)
    with pytest.raises(CommandError, match="task queue is unavailable"):
        call_command("answer_questions", "--study", study.slug, "--limit", "1", stdout=StringIO())
    [job] = AnswerJob.objects.all()
    assert job.status == "failed" and QUEUE_UNAVAILABLE in job.error


# --- a run that no worker claims: queued again once, then failed ----------------------


def test_a_pending_report_no_worker_took_is_queued_again_once_then_failed(demo, admin, monkeypatch):
    from analysis import services, tasks

    queued = []
    monkeypatch.setattr(tasks, "enqueue_study_report", queued.append)
    monkeypatch.setenv("RUN_CLAIM_TIMEOUT", "60")
    api = api_client_for(admin)
    url = f"/api/studies/{demo.slug}/analysis/"
    assert api.get(url).data["status"] == "pending" and len(queued) == 1
    result = AnalysisResult.objects.get(study=demo)
    assert api.get(url).status_code == 202 and len(queued) == 1  # within the timeout: waiting
    AnalysisResult.objects.filter(pk=result.pk).update(updated_at=timezone.now() - timedelta(seconds=61))
    assert api.get(url).data["status"] == "pending" and queued == [result.pk, result.pk]
    assert AnalysisResult.objects.get(pk=result.pk).requeued
    AnalysisResult.objects.filter(pk=result.pk).update(updated_at=timezone.now() - timedelta(seconds=61))
    failed = api.get(url)
    assert failed.status_code == 200 and failed.data["status"] == "failed"
    assert failed.data["error"] == services.UNCLAIMED_ERROR and len(queued) == 2
    # Asked again, it is queued anew (a failed report is), once more with one re-queue to spare.
    again = api.get(url)
    assert again.data["status"] == "pending" and len(queued) == 3
    assert not AnalysisResult.objects.get(pk=result.pk).requeued


def _age_status(model, run, seconds: int) -> None:
    then = timezone.now() - timedelta(seconds=seconds)
    model.objects.filter(uuid=run.id).update(created_at=then, queued_at=then)


def test_a_pending_export_no_worker_took_is_queued_again_once_then_failed(demo, admin, settings, tmp_path, monkeypatch):
    settings.EXPORTS_DIR = tmp_path / "exports"
    monkeypatch.setenv("RUN_CLAIM_TIMEOUT", "60")
    lost = []  # a broker that accepts the message, and a worker that never comes
    run = export_runs.start_export(
        study=demo, requested_by=admin, formats=["jsonl"], enqueue=lambda **kw: lost.append(kw)
    )
    assert export_runs.sweep_exports(enqueue=lambda **kw: lost.append(kw)) == []  # within the timeout
    _age_status(ExportRun, run, 61)
    assert export_runs.get_export(study=demo, export_id=run.id).status == "pending"  # a poll only reads
    [changed] = export_runs.sweep_exports(enqueue=lambda **kw: lost.append(kw))
    assert changed.requeued and changed.status == "pending"
    assert lost == [{"study_slug": demo.slug, "export_id": run.id}] * 2
    assert export_runs.sweep_exports(enqueue=lambda **kw: lost.append(kw)) == []
    _age_status(ExportRun, run, 61)
    failed = export_runs.get_export(study=demo, export_id=run.id)
    assert failed.status == "failed" and failed.error.lower().startswith(QUEUE_UNAVAILABLE) and len(lost) == 2


def test_a_pending_import_is_queued_again_by_the_sweep_command_then_failed(
    demo, admin, settings, tmp_path, monkeypatch
):
    from datasets import tasks

    settings.IMPORTS_DIR = tmp_path / "imports"
    monkeypatch.setenv("RUN_CLAIM_TIMEOUT", "60")
    record = {"type": "source", "study": demo.slug, "key": "late-source", "text": "A trial. It ended."}
    run = import_runs.start_import(
        study=demo,
        requested_by=admin,
        upload=ContentFile((json.dumps(record) + "\n").encode()),
        file_name="a.jsonl",
        enqueue=lambda **kw: None,
    )
    _age_status(ImportRun, run, 61)
    delivered = []
    monkeypatch.setattr(tasks.run_api_import_task, "delay", lambda **kw: delivered.append(kw))
    out = StringIO()
    call_command("sweep_runs", stdout=out)
    assert out.getvalue().startswith("1 run changed")
    assert delivered == [{"study_slug": demo.slug, "import_id": run.id}]
    _age_status(ImportRun, run, 61)
    call_command("sweep_runs", stdout=StringIO())
    assert import_runs.get_import(study=demo, import_id=run.id).status == "failed"
    # The page and the API offer to retry it: the kept upload is imported, by the real task now.
    monkeypatch.undo()
    retried = api_client_for(admin).post(f"/api/studies/{demo.slug}/imports/{run.id}/retry/")
    assert retried.status_code == 202 and retried.data["status"] == "done"  # no broker: in process
    assert demo.sources.filter(key="late-source").exists()


def test_pending_evaluator_runs_and_generation_jobs_are_queued_again_once_then_failed(demo, monkeypatch, serve):
    from generation import services
    from generation import tasks as generation_tasks
    from generation.run_records import UNCLAIMED_ERROR

    serve()
    monkeypatch.setenv("RUN_CLAIM_TIMEOUT", "60")
    run = EvaluationRun.objects.create(study=demo, evaluator="reference", version="v", config={})
    services.start_generation_run(study=demo, pipeline="litsumm", limit=2, enqueue=lambda job_id: None)
    job, other = GenerationJob.objects.order_by("pk")
    # Eager settings would run the work when queued again: these stand for the broker.
    sent = []
    monkeypatch.setattr(generation_tasks, "enqueue_automatic_run", lambda *args: sent.append(args))
    monkeypatch.setattr(generation_tasks.generate_summary_task, "delay", lambda job_id: sent.append(job_id))
    monkeypatch.setattr(services.settings, "CELERY_TASK_ALWAYS_EAGER", False)
    old = timezone.now() - timedelta(seconds=61)

    def age():
        EvaluationRun.objects.filter(pk=run.pk).update(updated_at=old)
        GenerationJob.objects.filter(pk=job.pk).update(updated_at=old)

    assert generation_tasks.sweep_generation_runs_task() == 0
    # A worker took another job of the run a moment ago: the job is waiting in line, not lost.
    GenerationJob.objects.filter(pk=other.pk).update(status="running", claimed_at=timezone.now())
    age()
    assert generation_tasks.sweep_generation_runs_task() == 1 and sent == [(demo.pk, "reference")]
    sent.clear()
    EvaluationRun.objects.filter(pk=run.pk).update(requeued=False)
    GenerationJob.objects.filter(pk=other.pk).update(status="ok", claimed_at=old)
    age()
    assert generation_tasks.sweep_generation_runs_task() == 2
    assert sorted(map(str, sent)) == sorted([str((demo.pk, "reference")), str(job.pk)])
    age()
    assert generation_tasks.sweep_generation_runs_task() == 2 and len(sent) == 2
    run.refresh_from_db()
    job.refresh_from_db()
    assert (run.status, run.error) == ("failed", UNCLAIMED_ERROR)
    assert (job.status, job.error) == ("failed", services.UNCLAIMED_ERROR)
