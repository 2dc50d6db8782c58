"""The study page's import form: study admins upload JSON Lines through the
same service as the API and follow the runs; the page escapes file names and errors."""

import json
import re
from datetime import datetime

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from annotate.models import StudyMembership, Summary
from annotate.services.members import add_study_member
from datasets import import_runs
from tests.factories import StudyFactory, UserFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def study_and_admin(settings, tmp_path):
    settings.IMPORTS_DIR = tmp_path / "imports"
    study = StudyFactory(slug="page-import")
    admin = UserFactory(username="page-admin")
    add_study_member(study=study, user=admin, role=StudyMembership.Role.ADMIN)
    return study, admin


def jsonl(study, summary_key="m1", source_key="s1") -> bytes:
    records = [
        {"type": "source", "study": study.slug, "key": source_key, "text": "Adults were enrolled. It ended."},
        {
            "type": "summary",
            "study": study.slug,
            "source": source_key,
            "key": summary_key,
            "text": "Adults took part.",
            "generator": "gpt-x",
        },
    ]
    return "".join(json.dumps(r) + "\n" for r in records).encode()


def test_an_admin_uploads_a_file_and_sees_the_run(client, study_and_admin):
    study, admin = study_and_admin
    client.force_login(admin)
    url = f"/studies/{study.slug}/imports/"
    page = client.get(url)
    assert page.status_code == 200 and b'enctype="multipart/form-data"' in page.content
    dashboard = client.get(f"/studies/{study.slug}/")
    assert url.encode() in dashboard.content  # the dashboard links to it
    upload = SimpleUploadedFile("two.jsonl", jsonl(study), content_type="application/jsonl")
    response = client.post(url, {"file": upload}, follow=True)
    assert response.redirect_chain[-1][0] == url
    assert b"Imported two.jsonl." in response.content
    assert b"two.jsonl" in response.content and b"1 new, 0 changed" in response.content
    assert Summary.objects.filter(study=study, key="m1").exists()


def test_a_failed_import_shows_its_error_escaped(client, study_and_admin):
    study, admin = study_and_admin
    client.force_login(admin)
    hostile = '<script>alert("x")</script>'
    content = jsonl(study, source_key="s1").replace(
        b'"source": "s1", "key"', f'"source": {json.dumps(hostile)}, "key"'.encode()
    )
    upload = SimpleUploadedFile(f"{hostile}.jsonl", content, content_type="application/jsonl")
    response = client.post(f"/studies/{study.slug}/imports/", {"file": upload}, follow=True)
    assert b"<script>alert" not in response.content
    assert b"&lt;script&gt;alert" in response.content
    assert b"line 2" in response.content
    assert not Summary.objects.filter(study=study).exists()


def test_an_empty_upload_is_refused_on_the_form(client, study_and_admin):
    study, admin = study_and_admin
    client.force_login(admin)
    response = client.post(f"/studies/{study.slug}/imports/", {"file": SimpleUploadedFile("e.jsonl", b"")})
    assert response.status_code == 400


def test_raters_and_strangers_get_no_import_page(client, study_and_admin):
    study, _ = study_and_admin
    rater = UserFactory(username="page-rater")
    add_study_member(study=study, user=rater, role=StudyMembership.Role.RATER)
    assert client.get(f"/studies/{study.slug}/imports/").status_code == 302  # to the login page
    client.force_login(rater)
    assert client.get(f"/studies/{study.slug}/imports/").status_code == 404
    upload = SimpleUploadedFile("two.jsonl", jsonl(study))
    assert client.post(f"/studies/{study.slug}/imports/", {"file": upload}).status_code == 404
    assert not Summary.objects.filter(study=study).exists()


def test_run_times_read_as_a_date_and_time_with_their_zone(client, study_and_admin):
    """The Started column showed raw ISO text (2026-11-26T00:40:14), no zone."""
    study, admin = study_and_admin
    client.force_login(admin)
    url = f"/studies/{study.slug}/imports/"
    client.post(url, {"file": SimpleUploadedFile("two.jsonl", jsonl(study), content_type="application/jsonl")})
    (run,) = import_runs.list_imports(study=study)
    started = datetime.fromisoformat(run.created_at)
    page = client.get(url).content.decode()
    # The run file's own time, as the page's words say it: "26 Nov 2026, 00:40:14 UTC".
    shown = f"{started.day} {started:%b %Y, %H:%M:%S} UTC"
    assert f'<time datetime="{started.isoformat()}">{shown}</time>' in page
    text = re.sub(r"<[^>]+>", " ", page)  # what the reader sees
    assert not re.search(r"\d{4}-\d\d-\d\dT\d\d:", text)
    assert page.count("<time ") == 2  # started and finished
