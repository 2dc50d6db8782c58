"""The study's Export page: a study admin who is not staff exports from the
study's pages, and the run's status is a page (not the API's JSON), with the download
once done; the Django admin's message links that page too. Nobody else reaches it."""

import io
import zipfile

import pytest
from django.test import Client

from annotate.models import StudyMembership
from annotate.services.members import add_study_member
from annotate.services.ratings import submit_rating
from datasets import export_runs
from datasets.models import ExportRun
from tests.conftest import GOOD_ANSWERS
from tests.factories import StudyFactory, UserFactory


@pytest.fixture
def rated(assignment_a, assignment_b, rater_a, rater_b, settings, tmp_path):
    settings.EXPORTS_DIR = tmp_path / "exports"
    for assignment, rater in ((assignment_a, rater_a), (assignment_b, rater_b)):
        submit_rating(assignment=assignment, rater=rater, answers=GOOD_ANSWERS, version=assignment.version)
    study = assignment_a.study
    pi = UserFactory(username="pi")
    add_study_member(study=study, user=pi, role=StudyMembership.Role.ADMIN)
    client = Client()
    client.force_login(pi)
    return study, client


@pytest.mark.django_db
def test_a_study_admin_exports_from_the_study_page_and_follows_a_status_page(rated):
    study, client = rated
    assert f"/studies/{study.slug}/exports/" in client.get(f"/studies/{study.slug}/").content.decode()
    response = client.post(f"/studies/{study.slug}/exports/", {"formats": ["jsonl", "csv"], "phase": "all"})
    (run,) = export_runs.list_exports(study=study)
    assert response.status_code == 302 and response["Location"] == f"/studies/{study.slug}/exports/{run.id}/"
    page = client.get(response["Location"])
    assert page["Content-Type"].startswith("text/html")
    body = page.content.decode()
    assert "Status: <strong>done</strong>" in body and run.formats == ["jsonl", "csv"]
    download = f"/api/studies/{study.slug}/exports/{run.id}/download/"
    assert f'href="{download}"' in body
    archive = zipfile.ZipFile(io.BytesIO(b"".join(client.get(download).streaming_content)))
    assert any(name.endswith("SHA256SUMS") for name in archive.namelist())
    assert run.id in client.get(f"/studies/{study.slug}/exports/").content.decode()


@pytest.mark.django_db
def test_a_running_export_page_refreshes_itself(rated):
    study, client = rated
    status = export_runs._status(
        ExportRun.objects.create(study=study, formats=["jsonl"], phase="all", requested_by="pi")
    )
    body = client.get(f"/studies/{study.slug}/exports/{status.id}/").content.decode()
    assert 'http-equiv="refresh"' in body and "Download (zip)" not in body


@pytest.mark.django_db
def test_no_format_is_refused(rated):
    study, client = rated
    response = client.post(f"/studies/{study.slug}/exports/", {"phase": "all"})
    assert response.status_code == 400 and export_runs.list_exports(study=study) == []


@pytest.mark.django_db
@pytest.mark.parametrize("role", ["rater", "viewer", "other-admin"])
def test_only_study_admins_reach_the_export_pages(rated, role):
    study, admin_client = rated
    admin_client.post(f"/studies/{study.slug}/exports/", {"formats": ["jsonl"], "phase": "all"})
    (run,) = export_runs.list_exports(study=study)
    person = UserFactory(username=f"p-{role}")
    target = StudyFactory() if role == "other-admin" else study
    add_study_member(study=target, user=person, role="admin" if role == "other-admin" else role)
    client = Client()
    client.force_login(person)
    assert client.get(f"/studies/{study.slug}/exports/").status_code == 404
    assert client.post(f"/studies/{study.slug}/exports/", {"formats": ["jsonl"], "phase": "all"}).status_code == 404
    assert client.get(f"/studies/{study.slug}/exports/{run.id}/").status_code == 404
    assert len(export_runs.list_exports(study=study)) == 1


@pytest.mark.django_db
def test_the_admin_actions_status_link_opens_the_page(rated, admin_user):
    study, _ = rated
    client = Client()
    client.force_login(admin_user)
    response = client.post(
        "/admin/annotate/study/", {"action": "export_dataset", "_selected_action": [study.pk]}, follow=True
    )
    (run,) = export_runs.list_exports(study=study)
    page = f"/studies/{study.slug}/exports/{run.id}/"
    assert f'<a href="{page}">status</a>' in response.content.decode()
    assert client.get(page)["Content-Type"].startswith("text/html")
