"""An export that fails or is abandoned leaves no half-written
files in its storage; uploads and export archives are kept for FILE_RETENTION_DAYS (default
30) and then removed, files and rows, by the periodic task or `manage.py
remove_expired_files`; a run whose worker process died (Celery's WorkerLostError) is handed
at once to another worker, and after run_state.MAX_TRIES claims says "stopped: the worker
died" and offers a retry."""

from __future__ import annotations

import json
from datetime import timedelta
from io import StringIO
from pathlib import Path

import pytest
from billiard.exceptions import WorkerLostError
from celery.signals import task_failure
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.core.files.base import ContentFile
from django.core.management import CommandError, call_command
from django.utils import timezone

from core.background import run_lease
from datasets import export_runs, import_runs, run_state
from datasets.models import ExportRun, ImportRun
from datasets.retention import file_retention
from datasets.run_state import MAX_TRIES
from datasets.tasks import remove_expired_files_task, run_api_export_task, run_api_import_task
from tests.conftest import api_client_for

pytestmark = pytest.mark.django_db


@pytest.fixture
def dirs(settings, tmp_path):
    settings.EXPORTS_DIR = tmp_path / "exports"
    settings.IMPORTS_DIR = tmp_path / "imports"
    return tmp_path


def never(**kwargs) -> None:
    """A broker that takes the message and no worker that runs it."""


def rewrite(model, run, **fields) -> None:
    model.objects.filter(uuid=run.id).update(**fields)


def export(study, admin, enqueue=never):
    run = export_runs.start_export(study=study, requested_by=admin, formats=["jsonl"], enqueue=enqueue)
    return run, Path(settings.EXPORTS_DIR) / study.slug / run.id


def running_elsewhere(model, run, *, tries: int) -> None:
    """What a worker on another machine records while it runs the run."""
    rewrite(model, run, status="running", worker="other-host:7/abc", tries=tries, heartbeat_at=timezone.now())


def worker_lost(task, **kwargs) -> None:
    """What Celery's worker process sends when the pool process running the task died."""
    task_failure.send(
        sender=task,
        task_id="t1",
        exception=WorkerLostError("Worker exited prematurely: signal 9 (SIGKILL)."),
        args=[],
        kwargs=kwargs,
    )


def test_an_export_that_fails_mid_way_stores_nothing(dirs, study, admin_user, monkeypatch):
    def disk_full(folder, archive):
        archive.write_bytes(b"PK half")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(export_runs, "_zip", disk_full)
    with pytest.raises(OSError):
        export(study, admin_user, enqueue=run_api_export_task.delay)  # in process: no broker
    [run] = export_runs.list_exports(study=study)
    assert run.status == "failed" and run.error == "The export failed unexpectedly."
    assert not (Path(settings.EXPORTS_DIR) / study.slug).exists()


def test_a_lost_worker_hands_the_export_to_another_worker_at_once(dirs, study, admin_user):
    run, folder = export(study, admin_user)
    running_elsewhere(ExportRun, run, tries=1)
    worker_lost(run_api_export_task, study_slug=study.slug, export_id=run.id)  # queued again: run in process
    status = export_runs.get_export(study=study, export_id=run.id)
    assert status.status == "done", status.error
    assert (folder / "dataset.zip").is_file()
    assert ExportRun.objects.get(uuid=run.id).tries == 2 and ExportRun.objects.count() == 1


def test_an_export_that_lost_its_worker_too_often_fails_and_the_api_retries_it(dirs, study, admin_user):
    run, folder = export(study, admin_user)
    running_elsewhere(ExportRun, run, tries=MAX_TRIES)
    worker_lost(run_api_export_task, study_slug=study.slug, export_id=run.id)
    status = export_runs.get_export(study=study, export_id=run.id)
    assert status.status == "failed" and status.error == export_runs.WORKER_DIED_ERROR
    assert not folder.exists()
    api = api_client_for(admin_user)
    retried = api.post(f"/api/studies/{study.slug}/exports/{run.id}/retry/")
    assert retried.status_code == 202 and retried.json()["status"] == "done" and retried.json()["id"] != run.id
    assert retried.json()["formats"] == ["jsonl"]
    again = api.post(f"/api/studies/{study.slug}/exports/{retried.json()['id']}/retry/")
    assert again.status_code == 409 and "only a failed export" in again.json()["error"]["message"]


def test_a_lost_worker_fails_the_import_after_its_tries_and_the_page_offers_to_retry_it(
    dirs, study, admin_user, client
):
    line = json.dumps({"type": "source", "study": study.slug, "key": "k1", "text": "A trial. It ended."}) + "\n"
    run = import_runs.start_import(
        study=study, requested_by=admin_user, upload=ContentFile(line.encode()), file_name="a.jsonl", enqueue=never
    )
    running_elsewhere(ImportRun, run, tries=MAX_TRIES)
    worker_lost(run_api_import_task, study_slug=study.slug, import_id=run.id)
    client.force_login(admin_user)
    page = client.get(f"/studies/{study.slug}/imports/").content.decode()
    assert "<strong>failed</strong>: Stopped: the worker died before this import finished." in page
    retry = f"/studies/{study.slug}/imports/{run.id}/retry/"
    assert f'action="{retry}"' in page
    client.post(retry)
    assert import_runs.get_import(study=study, import_id=run.id).status == "done"
    assert study.sources.filter(key="k1").count() == 1


def test_a_lost_worker_hands_the_import_to_another_worker_which_imports_it_once(dirs, study, admin_user):
    line = json.dumps({"type": "source", "study": study.slug, "key": "k1", "text": "A trial. It ended."}) + "\n"
    run = import_runs.start_import(
        study=study, requested_by=admin_user, upload=ContentFile(line.encode()), file_name="a.jsonl", enqueue=never
    )
    running_elsewhere(ImportRun, run, tries=1)
    worker_lost(run_api_import_task, study_slug=study.slug, import_id=run.id)
    status = import_runs.get_import(study=study, import_id=run.id)
    assert status.status == "done" and status.counts["source"] == {"created": 1, "updated": 0, "unchanged": 0}
    assert study.sources.filter(key="k1").count() == 1


def test_files_past_the_retention_period_are_removed_and_the_rest_kept(dirs, study, admin_user, monkeypatch):
    monkeypatch.delenv("FILE_RETENTION_DAYS", raising=False)
    old = timezone.now() - timedelta(days=31)
    recent = timezone.now() - timedelta(days=29)
    expired, expired_folder = export(study, admin_user, enqueue=run_api_export_task.delay)
    kept, kept_folder = export(study, admin_user, enqueue=run_api_export_task.delay)
    waiting, waiting_folder = export(study, admin_user)
    assert (expired_folder / "dataset.zip").is_file()
    rewrite(ExportRun, expired, finished_at=old, created_at=old)
    rewrite(ExportRun, kept, finished_at=recent, created_at=old)
    rewrite(ExportRun, waiting, created_at=old, queued_at=timezone.now())  # never expired while pending
    assert not waiting_folder.exists()  # nothing stored until it runs
    line = json.dumps({"type": "source", "study": study.slug, "key": "k2", "text": "A trial. It ended."}) + "\n"
    upload = import_runs.start_import(
        study=study,
        requested_by=admin_user,
        upload=ContentFile(line.encode()),
        file_name="a.jsonl",
        enqueue=run_api_import_task.delay,
    )
    upload_folder = Path(settings.IMPORTS_DIR) / study.slug / upload.id
    assert (upload_folder / "upload.jsonl").is_file()
    rewrite(ImportRun, upload, finished_at=old)
    out = StringIO()
    call_command("remove_expired_files", stdout=out)
    assert out.getvalue().strip() == "Removed 1 export and 1 import older than 30 days."
    assert not expired_folder.exists() and not upload_folder.exists()
    assert (kept_folder / "dataset.zip").is_file()
    assert not ImportRun.objects.exists()
    assert {r.id for r in export_runs.list_exports(study=study)} == {kept.id, waiting.id}
    # The periodic task does the same with FILE_RETENTION_DAYS from the environment.
    monkeypatch.setenv("FILE_RETENTION_DAYS", "7")
    assert remove_expired_files_task() == 1
    assert not kept_folder.exists()
    assert [r.id for r in export_runs.list_exports(study=study)] == [waiting.id]


def test_the_retention_period_comes_from_the_environment(monkeypatch):
    monkeypatch.delenv("FILE_RETENTION_DAYS", raising=False)
    assert file_retention() == timedelta(days=30)
    monkeypatch.setenv("FILE_RETENTION_DAYS", "90")
    assert file_retention() == timedelta(days=90)
    for bad in ("0", "a month"):
        monkeypatch.setenv("FILE_RETENTION_DAYS", bad)
        with pytest.raises(ImproperlyConfigured, match="FILE_RETENTION_DAYS"):
            file_retention()
    with pytest.raises(CommandError, match="--days must be at least 1"):
        call_command("remove_expired_files", "--days", "0")


def test_an_import_taken_over_after_its_lease_ran_out_is_recorded_once(dirs, study, admin_user):
    """Worker 1 claims the import and stalls (a long pause) past its lease; worker 2 takes
    it over and imports the file; when worker 1 resumes, its "done" finds the run no longer
    its own, so its transaction is rolled back: the run keeps worker 2's outcome."""
    lines = "".join(
        json.dumps({"type": "source", "study": study.slug, "key": f"k{i}", "text": f"Trial {i}. It ended."}) + "\n"
        for i in range(3)
    )
    run = import_runs.start_import(
        study=study, requested_by=admin_user, upload=ContentFile(lines.encode()), file_name="a.jsonl", enqueue=never
    )
    first = run_state.claim(ImportRun, run.id)
    assert first is not None and run_state.claim(ImportRun, run.id) is None  # held: nobody else
    first_claim = first.worker
    rewrite(ImportRun, run, heartbeat_at=timezone.now() - 2 * run_lease())
    second = import_runs.run_import(study_slug=study.slug, import_id=run.id)
    assert second.status == "done" and second.counts["source"]["created"] == 3
    resumed = import_runs._run_claimed(first)
    assert resumed == second  # nothing recorded by the worker that lost the run
    assert study.sources.filter(key__startswith="k").count() == 3
    row = ImportRun.objects.get(uuid=run.id)
    assert (row.tries, row.worker) == (2, second.worker) and row.worker != first_claim


def test_the_sweep_hands_an_export_whose_lease_ran_out_to_another_worker(dirs, study, admin_user):
    """The whole worker died (its machine gone): nobody reports WorkerLostError, so the
    periodic sweep sees the lease run out, puts the run back and queues it again."""
    run, folder = export(study, admin_user)
    running_elsewhere(ExportRun, run, tries=1)
    queued = []
    assert export_runs.sweep_exports(enqueue=lambda **kw: queued.append(kw)) == []  # its lease still holds
    rewrite(ExportRun, run, heartbeat_at=timezone.now() - 2 * run_lease())
    [changed] = export_runs.sweep_exports(enqueue=lambda **kw: queued.append(kw))
    assert changed.status == "pending" and changed.worker == ""
    assert queued == [{"study_slug": study.slug, "export_id": run.id}]
    done = export_runs.run_export(**queued[0])  # the worker that takes the message
    assert done.status == "done" and (folder / "dataset.zip").is_file()
    assert ExportRun.objects.get(uuid=run.id).tries == 2 and ExportRun.objects.count() == 1
