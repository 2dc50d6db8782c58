"""Issue 27, F12: an export that fails or is abandoned leaves no dataset.partial/ behind;
uploads and export archives are kept for FILE_RETENTION_DAYS (default 30) and then removed
by the periodic task or `manage.py remove_expired_files`; a run whose worker process died
(Celery's WorkerLostError) says "stopped: the worker died" at once and offers a retry."""

from __future__ import annotations

import json
from datetime import timedelta
from io import StringIO

import pytest
from billiard.exceptions import WorkerLostError
from celery.signals import task_failure
from django.core.exceptions import ImproperlyConfigured
from django.core.management import CommandError, call_command
from django.utils import timezone

from datasets import export_runs, import_runs
from datasets.retention import file_retention
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


def rewrite(folder, **fields) -> None:
    path = folder / "status.json"
    status = json.loads(path.read_text())
    status.update(fields)
    path.write_text(json.dumps(status))


def export(study, admin, enqueue=never):
    run = export_runs.start_export(study=study, requested_by=admin, formats=["jsonl"], enqueue=enqueue)
    return run, export_runs.export_folder(study_slug=study.slug, export_id=run.id)


def test_an_abandoned_export_is_failed_and_its_partial_folder_removed(dirs, study, admin_user):
    run, folder = export(study, admin_user)
    # What a killed worker leaves: "running", half a dataset folder, half a zip, no lock held.
    rewrite(folder, status="running")
    (folder / "dataset.partial" / "tables").mkdir(parents=True)
    (folder / "dataset.partial" / "tables" / "ratings.jsonl").write_text("{}\n")
    (folder / "dataset.zip.tmp").write_bytes(b"PK")
    polled = api_client_for(admin_user).get(f"/api/studies/{study.slug}/exports/{run.id}/").json()
    assert polled["status"] == "failed" and polled["error"].startswith("Stopped: the worker died")
    assert not (folder / "dataset.partial").exists() and not (folder / "dataset.zip.tmp").exists()
    # Left by a worker that died after its run was recorded failed: removed when next looked at.
    (folder / "dataset.partial").mkdir()
    assert export_runs.list_exports(study=study)[0].status == "failed"
    assert not (folder / "dataset.partial").exists()


def test_an_export_that_fails_mid_way_removes_its_partial_folder(dirs, study, admin_user, monkeypatch):
    def disk_full(folder, archive):
        archive.with_suffix(".zip.tmp").write_bytes(b"PK half")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(export_runs, "_zip", disk_full)
    with pytest.raises(OSError):
        export(study, admin_user, enqueue=run_api_export_task.delay)  # in process: no broker
    [run] = export_runs.list_exports(study=study)
    folder = export_runs.export_folder(study_slug=study.slug, export_id=run.id)
    assert run.status == "failed" and run.error == "The export failed unexpectedly."
    assert sorted(p.name for p in folder.iterdir()) == ["claim.lock", "status.json"]


def test_a_lost_worker_fails_the_export_at_once_and_the_api_retries_it(dirs, study, admin_user):
    run, folder = export(study, admin_user)
    rewrite(folder, status="running")
    (folder / "dataset.partial").mkdir()
    # What Celery's worker process sends when the pool process running the task died.
    task_failure.send(
        sender=run_api_export_task,
        task_id="t1",
        exception=WorkerLostError("Worker exited prematurely: signal 9 (SIGKILL)."),
        args=[],
        kwargs={"study_slug": study.slug, "export_id": run.id},
    )
    status = export_runs.get_export(study=study, export_id=run.id)
    assert status.status == "failed" and status.error == export_runs.WORKER_DIED_ERROR
    assert not (folder / "dataset.partial").exists()
    api = api_client_for(admin_user)
    retried = api.post(f"/api/studies/{study.slug}/exports/{run.id}/retry/")
    assert retried.status_code == 202 and retried.json()["status"] == "done" and retried.json()["id"] != run.id
    assert retried.json()["formats"] == ["jsonl"]
    again = api.post(f"/api/studies/{study.slug}/exports/{retried.json()['id']}/retry/")
    assert again.status_code == 409 and "only a failed export" in again.json()["error"]["message"]


def test_a_lost_worker_fails_the_import_and_the_page_offers_to_retry_it(dirs, study, admin_user, client):
    line = json.dumps({"type": "source", "study": study.slug, "key": "k1", "text": "A trial. It ended."}) + "\n"
    run = import_runs.start_import(
        study=study, requested_by=admin_user, chunks=[line.encode()], file_name="a.jsonl", enqueue=never
    )
    task_failure.send(
        sender=run_api_import_task,
        task_id="t2",
        exception=WorkerLostError("Worker exited prematurely: signal 9 (SIGKILL)."),
        args=[],
        kwargs={"study_slug": study.slug, "import_id": run.id},
    )
    client.force_login(admin_user)
    page = client.get(f"/studies/{study.slug}/imports/").content.decode()
    assert "<strong>failed</strong>: Stopped: the worker died before this import finished." in page
    retry = f"/studies/{study.slug}/imports/{run.id}/retry/"
    assert f'action="{retry}"' in page
    client.post(retry)
    assert import_runs.get_import(study=study, import_id=run.id).status == "done"
    assert study.sources.filter(key="k1").exists()


def test_files_past_the_retention_period_are_removed_and_the_rest_kept(dirs, study, admin_user, monkeypatch):
    monkeypatch.delenv("FILE_RETENTION_DAYS", raising=False)
    old = (timezone.now() - timedelta(days=31)).isoformat()
    recent = (timezone.now() - timedelta(days=29)).isoformat()
    expired, expired_folder = export(study, admin_user, enqueue=run_api_export_task.delay)
    kept, kept_folder = export(study, admin_user, enqueue=run_api_export_task.delay)
    waiting, waiting_folder = export(study, admin_user)
    assert (expired_folder / "dataset.zip").is_file()
    rewrite(expired_folder, finished_at=old, created_at=old)
    rewrite(kept_folder, finished_at=recent, created_at=old)
    rewrite(waiting_folder, created_at=old, queued_at=timezone.now().isoformat())  # never expired while pending
    line = json.dumps({"type": "source", "study": study.slug, "key": "k2", "text": "A trial. It ended."}) + "\n"
    upload = import_runs.start_import(
        study=study,
        requested_by=admin_user,
        chunks=[line.encode()],
        file_name="a.jsonl",
        enqueue=run_api_import_task.delay,
    )
    upload_folder = import_runs.import_folder(study_slug=study.slug, import_id=upload.id)
    rewrite(upload_folder, finished_at=old)
    out = StringIO()
    call_command("remove_expired_files", stdout=out)
    assert out.getvalue().strip() == "Removed 1 export and 1 import older than 30 days."
    assert not expired_folder.exists() and not upload_folder.exists()
    assert (kept_folder / "dataset.zip").is_file() and waiting_folder.is_dir()
    assert {r.id for r in export_runs.list_exports(study=study)} == {kept.id, waiting.id}
    # The periodic task does the same with FILE_RETENTION_DAYS from the environment.
    monkeypatch.setenv("FILE_RETENTION_DAYS", "7")
    assert remove_expired_files_task() == 1
    assert not kept_folder.exists() and waiting_folder.is_dir()


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
