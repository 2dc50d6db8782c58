"""Export runs (datasets.export_runs): a redelivered task (Celery acks_late) does no
harm while the first delivery runs, and takes over the export after the worker running
it died (its lease ran out); the admin action needs the change permission and writes
under EXPORTS_DIR (the local storage)."""

import os
from pathlib import Path

import pytest
from django.conf import settings
from django.contrib.auth.models import Permission
from django.test import Client
from django.utils import timezone

import datasets.exporting
from annotate.models import Study
from annotate.services.ratings import submit_rating
from core.background import run_lease
from datasets import export_runs
from datasets.exporting import verify_checksums
from datasets.models import ExportRun
from tests.conftest import GOOD_ANSWERS
from tests.factories import UserFactory


class WorkerDied(BaseException):
    """Stands for a killed worker: no `except Exception` handler runs, and its heartbeat
    stops (for a real process, with the process)."""


@pytest.fixture
def exports_dir(settings, tmp_path):
    settings.EXPORTS_DIR = tmp_path / "exports"
    return tmp_path / "exports"


@pytest.fixture
def rated_study(assignment_a, assignment_b, rater_a, rater_b):
    for assignment, rater in ((assignment_a, rater_a), (assignment_b, rater_b)):
        submit_rating(assignment=assignment, rater=rater, answers=GOOD_ANSWERS, version=assignment.version)
    return assignment_a.study


def pending_export(study, user) -> export_runs.ExportStatus:
    """An export recorded but not run yet (as when a broker holds the task)."""
    row = ExportRun.objects.create(
        study=study, formats=["jsonl", "csv"], phase="all", requested_by=user.username, queued_at=timezone.now()
    )
    return export_runs._status(row)


def expire_lease(status) -> None:
    """What the clock does to a dead worker's run: its last heartbeat falls behind RUN_LEASE."""
    ExportRun.objects.filter(uuid=status.id).update(heartbeat_at=timezone.now() - 2 * run_lease())


def folder_of(status) -> Path:
    return Path(settings.EXPORTS_DIR) / status.study / status.id


def assert_complete(status) -> None:
    folder = folder_of(status)
    final = export_runs.get_export(study=Study.objects.get(slug=status.study), export_id=status.id)
    assert final.status == "done", final.error
    verify_checksums(folder / "dataset")
    assert (folder / "dataset.zip").is_file()
    assert sorted(p.name for p in folder.iterdir()) == ["dataset", "dataset.zip"]
    assert ExportRun.objects.count() == 1


@pytest.mark.django_db
def test_a_task_redelivered_while_the_first_runs_does_nothing(rated_study, admin_user, exports_dir, monkeypatch):
    status = pending_export(rated_study, admin_user)
    real_export = datasets.exporting.export_dataset
    calls, seen_by_second = [], []

    def export(**kwargs):
        calls.append(kwargs["out_dir"])
        if len(calls) == 1:
            # The broker hands the same message to a second worker while the first runs.
            seen_by_second.append(export_runs.run_export(study_slug=status.study, export_id=status.id))
        return real_export(**kwargs)

    monkeypatch.setattr(datasets.exporting, "export_dataset", export)
    first = export_runs.run_export(study_slug=status.study, export_id=status.id)
    assert first.status == "done", first.error
    assert len(calls) == 1  # the second delivery wrote nothing
    assert seen_by_second[0].status == "running"
    assert ExportRun.objects.get(uuid=status.id).tries == 1
    assert_complete(status)


@pytest.mark.django_db
def test_a_task_redelivered_after_the_worker_died_mid_export_takes_it_over(
    rated_study, admin_user, exports_dir, monkeypatch
):
    status = pending_export(rated_study, admin_user)
    real_export = datasets.exporting.export_dataset

    def dies_half_way(**kwargs):
        out = kwargs["out_dir"]
        (out / "jsonl").mkdir(parents=True)
        (out / "jsonl" / "sources.jsonl").write_text('{"half": "written"', encoding="utf-8")
        raise WorkerDied

    monkeypatch.setattr(datasets.exporting, "export_dataset", dies_half_way)
    with pytest.raises(WorkerDied):
        export_runs.run_export(study_slug=status.study, export_id=status.id)
    assert ExportRun.objects.get(uuid=status.id).status == "running"  # what the dead worker left
    monkeypatch.setattr(datasets.exporting, "export_dataset", real_export)
    # Within the lease the run still counts as held: a redelivery does nothing.
    assert export_runs.run_export(study_slug=status.study, export_id=status.id).status == "running"
    assert not folder_of(status).exists()

    expire_lease(status)
    again = export_runs.run_export(study_slug=status.study, export_id=status.id)  # the redelivery
    assert again.status == "done", again.error
    assert ExportRun.objects.get(uuid=status.id).tries == 2
    assert_complete(status)
    assert "half" not in (folder_of(status) / "dataset" / "jsonl" / "sources.jsonl").read_text(encoding="utf-8")


@pytest.mark.django_db
def test_a_worker_whose_run_was_taken_over_records_nothing(rated_study, admin_user, exports_dir, monkeypatch):
    """The first worker stalls past its lease (a long pause, a partition): another takes the
    run over and finishes it; when the first wakes up it neither stores files nor records."""
    status = pending_export(rated_study, admin_user)
    real_export = datasets.exporting.export_dataset
    seen = []

    def stalls(**kwargs):
        result = real_export(**kwargs)
        if not seen:
            seen.append(None)
            expire_lease(status)
            seen[0] = export_runs.run_export(study_slug=status.study, export_id=status.id)
        return result

    monkeypatch.setattr(datasets.exporting, "export_dataset", stalls)
    first = export_runs.run_export(study_slug=status.study, export_id=status.id)
    assert seen[0].status == "done"
    row = ExportRun.objects.get(uuid=status.id)
    assert (first.status, row.status, row.tries) == ("done", "done", 2)
    assert first.finished_at == seen[0].finished_at  # recorded once, by the second worker
    assert_complete(status)


@pytest.mark.django_db
def test_a_poll_reports_an_export_whose_worker_was_killed_as_failed(rated_study, admin_user, exports_dir, monkeypatch):
    """Without a broker the export ran in the request's process: once its lease ran out
    nothing would ever finish it, so the next poll says it failed instead of "running"."""
    status = pending_export(rated_study, admin_user)

    def dies(**kwargs):
        raise WorkerDied

    monkeypatch.setattr(datasets.exporting, "export_dataset", dies)
    with pytest.raises(WorkerDied):
        export_runs.run_export(study_slug=status.study, export_id=status.id)
    assert export_runs.get_export(study=rated_study, export_id=status.id).status == "running"  # lease held
    expire_lease(status)
    polled = export_runs.get_export(study=rated_study, export_id=status.id)
    assert polled.status == "failed"
    assert "the worker died" in polled.error
    assert [s.status for s in export_runs.list_exports(study=rated_study)] == ["failed"]


@pytest.mark.django_db
def test_a_poll_while_a_worker_holds_the_export_says_running(rated_study, admin_user, exports_dir, monkeypatch):
    status = pending_export(rated_study, admin_user)
    polls = []

    def export(**kwargs):
        polls.append(export_runs.get_export(study=rated_study, export_id=status.id))
        raise WorkerDied

    monkeypatch.setattr(datasets.exporting, "export_dataset", export)
    with pytest.raises(WorkerDied):
        export_runs.run_export(study_slug=status.study, export_id=status.id)
    assert [p.status for p in polls] == ["running"]
    assert f":{os.getpid()}/" in polls[0].worker


@pytest.mark.django_db
def test_a_task_redelivered_after_the_export_finished_does_nothing(rated_study, admin_user, exports_dir):
    status = pending_export(rated_study, admin_user)
    export_runs.run_export(study_slug=status.study, export_id=status.id)
    archive = folder_of(status) / "dataset.zip"
    before = archive.stat().st_mtime_ns
    expire_lease(status)  # even with its lease long gone: done is done
    again = export_runs.run_export(study_slug=status.study, export_id=status.id)
    assert again.status == "done" and archive.stat().st_mtime_ns == before


# --- the admin action -----------------------------------------------------------------------------


def admin_browser(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def start_from_admin(client, study):
    return client.post(
        "/admin/annotate/study/", {"action": "export_dataset", "_selected_action": [study.pk]}, follow=True
    )


@pytest.mark.django_db
def test_staff_who_may_only_view_studies_are_not_offered_the_export_and_cannot_start_it(
    rated_study, exports_dir, django_capture_on_commit_callbacks
):
    viewer = UserFactory(username="staff_viewer", is_staff=True)
    viewer.user_permissions.add(Permission.objects.get(codename="view_study", content_type__app_label="annotate"))
    client = admin_browser(viewer)
    page = client.get("/admin/annotate/study/")
    assert page.status_code == 200
    assert rated_study.slug in page.content.decode()  # they do see the study
    form = page.context["action_form"]  # None when no action is offered at all
    assert form is None or "export_dataset" not in dict(form.fields["action"].choices)
    with django_capture_on_commit_callbacks(execute=True):  # anything deferred runs too
        response = start_from_admin(client, rated_study)
    assert response.status_code == 200
    assert not (exports_dir / rated_study.slug).exists()
    assert not (Path(settings.BASE_DIR) / "var" / "exports" / rated_study.slug).exists()
    assert export_runs.list_exports(study=rated_study) == []


@pytest.mark.django_db
def test_staff_who_may_change_studies_start_an_export_under_exports_dir(rated_study, exports_dir):
    editor = UserFactory(username="staff_editor", is_staff=True)
    for codename in ("view_study", "change_study"):
        editor.user_permissions.add(Permission.objects.get(codename=codename, content_type__app_label="annotate"))
    response = start_from_admin(admin_browser(editor), rated_study)
    assert response.status_code == 200
    (run,) = export_runs.list_exports(study=rated_study)
    assert run.status == "done" and run.requested_by == "staff_editor"


@pytest.mark.django_db
def test_a_superuser_exports_from_the_admin_into_exports_dir(rated_study, admin_user, exports_dir):
    response = start_from_admin(admin_browser(admin_user), rated_study)
    assert response.status_code == 200
    (run,) = export_runs.list_exports(study=rated_study)
    assert run.status == "done", run.error
    assert run.id in response.content.decode()  # the message names the run to poll
    # ... and links its download, which the admin's session may follow.
    download = f"/api/studies/{rated_study.slug}/exports/{run.id}/download/"
    assert f'<a href="{download}">download (zip)</a>' in response.content.decode()
    # Done, and said so once (it read "is done ... download (zip) once it has finished").
    (message,) = [str(m) for m in response.context["messages"]]
    assert message.startswith(f"Export {run.id} of {rated_study.slug} is done")
    assert "once it has finished" not in message
    archive = admin_browser(admin_user).get(download)
    assert archive.status_code == 200 and archive["Content-Type"] == "application/zip"
    folder = exports_dir / rated_study.slug / run.id
    verify_checksums(folder / "dataset")
    assert "license: cc-by-4.0" in (folder / "dataset" / "README.md").read_text(encoding="utf-8")
