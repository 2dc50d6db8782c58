"""An import's `study` line changes only the settings it gives, and says what it changed:
on the import page, in the API's run and in `manage.py import_jsonl`'s output. Each change
is a record on the study's settings page."""

import json
from io import StringIO

import pytest
from django.contrib.auth.models import Permission
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command

from annotate.models import Study, StudySettingChange
from tests.conftest import api_client_for
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def lab_admin(settings, tmp_path):
    settings.IMPORTS_DIR = tmp_path / "imports"
    user = UserFactory(username="lab-admin")
    user.user_permissions.add(Permission.objects.get(codename="add_study"))
    return user


def made_on_new_study_page(client, admin) -> Study:
    client.force_login(admin)
    response = client.post(
        "/studies/new/",
        {
            "title": "Lab day one",
            "slug": "lab-day",
            "rubric": "litsumm",
            "licence": "CC-BY-4.0",
            "guidelines": "Some guidelines.",
            "description": "",
        },
    )
    assert response.status_code == 302, response.content
    return Study.objects.get(slug="lab-day")


def jsonl(*records) -> bytes:
    return "".join(json.dumps(r) + "\n" for r in records).encode()


STUDY_LINE = {"type": "study", "slug": "lab-day", "title": "Lab day one, revised", "rubric": "litsumm"}
SOURCE = {"type": "source", "study": "lab-day", "key": "s1", "text": "Adults were enrolled. It ended."}


def test_a_study_line_without_guidelines_keeps_them_and_the_page_lists_the_change(client, lab_admin):
    made_on_new_study_page(client, lab_admin)
    upload = SimpleUploadedFile("day.jsonl", jsonl(STUDY_LINE, SOURCE), content_type="application/jsonl")
    response = client.post("/studies/lab-day/imports/", {"file": upload}, follow=True)
    assert response.status_code == 200
    study = Study.objects.get(slug="lab-day")
    assert study.guidelines == "Some guidelines."  # not given: untouched
    assert study.title == "Lab day one, revised"
    page = response.content.decode()
    assert "Study settings changed: title: &#x27;Lab day one&#x27; → &#x27;Lab day one, revised&#x27;." in page
    assert "Study settings this file changed:" in page
    change = StudySettingChange.objects.get(study=study)
    assert (change.field, change.before, change.after, change.via) == (
        "title",
        "Lab day one",
        "Lab day one, revised",
        "import",
    )
    history = client.get("/studies/lab-day/settings/").content.decode()
    assert "Lab day one, revised" in history and "(import)" in history


def test_the_api_run_lists_every_setting_the_study_line_changed(client, lab_admin):
    made_on_new_study_page(client, lab_admin)
    line = {**STUDY_LINE, "title": "Lab day one", "guidelines": ""}
    file = SimpleUploadedFile("day.jsonl", jsonl(line, SOURCE), content_type="application/jsonl")
    run = api_client_for(lab_admin).post("/api/studies/lab-day/imports/", {"file": file}, format="multipart").json()
    assert run["status"] == "done", run
    assert run["settings_changed"] == [
        {"study": "lab-day", "field": "guidelines", "before": "Some guidelines.", "after": ""}
    ]
    assert "settings_changed" not in run["counts"]


def test_import_jsonl_prints_the_settings_it_changed(client, lab_admin, tmp_path):
    made_on_new_study_page(client, lab_admin)
    path = tmp_path / "day.jsonl"
    path.write_bytes(jsonl({**STUDY_LINE, "licence": "CC0-1.0"}, SOURCE))
    out = StringIO()
    call_command("import_jsonl", str(path), stdout=out)
    printed = out.getvalue()
    assert "study settings changed:" in printed
    assert "lab-day title: 'Lab day one' → 'Lab day one, revised'" in printed
    assert "lab-day licence: 'CC-BY-4.0' → 'CC0-1.0'" in printed
    study = Study.objects.get(slug="lab-day")
    assert study.guidelines == "Some guidelines."
    assert set(StudySettingChange.objects.values_list("field", "changed_by")) == {("title", None), ("licence", None)}
