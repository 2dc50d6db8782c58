"""Studies and rubrics from the browser and the API: who may create a study
(superusers and the permission annotate.add_study), the creator becomes its study admin,
a rubric YAML uploaded on a page is validated and versioned as `load_rubric` does, and
any stored rubric can be named in an import."""

import json
from pathlib import Path

import pytest
import yaml
from django.conf import settings as django_settings
from django.contrib.auth.models import Permission
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.test import Client

from annotate.models import Rubric, Study, StudyMembership
from datasets.importing import import_records
from tests.conftest import api_client_for
from tests.factories import StudyFactory, UserFactory

LITSUMM = Path(django_settings.BASE_DIR) / "fixtures" / "rubrics" / "litsumm.yaml"


def creator(username="pi"):
    user = UserFactory(username=username)
    user.user_permissions.add(Permission.objects.get(codename="add_study", content_type__app_label="annotate"))
    return user


def lab_rubric(title="Lab clarity", **changes) -> dict:
    """A custom rubric: LitSumm's definition under a key of the lab's own."""
    definition = yaml.safe_load(LITSUMM.read_text())
    definition.update(key="labclarity", title=title, **changes)
    return definition


def upload(client, definition_or_text):
    text = definition_or_text if isinstance(definition_or_text, str) else yaml.safe_dump(definition_or_text)
    return client.post("/studies/rubrics/", {"file": SimpleUploadedFile("r.yaml", text.encode())}, follow=True)


def logged_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


STUDY = {"title": "Lab study", "slug": "lab", "rubric": "litsumm", "licence": "CC-BY-4.0", "guidelines": "Be fair."}


@pytest.mark.django_db
def test_a_user_with_the_permission_creates_a_study_on_the_page_and_administers_it():
    pi = creator()
    client = logged_in(pi)
    assert "litsumm" in client.get("/studies/new/").content.decode()
    response = client.post("/studies/new/", STUDY)
    assert response.status_code == 302 and response["Location"] == "/studies/lab/"
    study = Study.objects.get(slug="lab")
    assert (study.title, study.rubric.key, study.licence, study.guidelines) == (
        "Lab study",
        "litsumm",
        "CC-BY-4.0",
        "Be fair.",
    )
    assert StudyMembership.objects.filter(study=study, user=pi, role="admin").exists()
    dashboard = client.get("/studies/lab/").content.decode()
    assert "/studies/lab/members/" in dashboard and "/studies/lab/exports/" in dashboard


@pytest.mark.django_db
@pytest.mark.parametrize(
    "change,field_message",
    [
        ({"slug": "new"}, "is the name of a page"),
        ({"slug": "has space"}, "Enter a valid"),
        ({"rubric": "nope"}, "Select a valid choice"),
        ({"title": ""}, "This field is required"),
    ],
)
def test_a_bad_study_is_refused_on_the_page_and_nothing_is_created(change, field_message):
    client = logged_in(creator())
    response = client.post("/studies/new/", {**STUDY, **change})
    assert response.status_code == 400 and field_message in response.content.decode()
    assert not Study.objects.exists()


@pytest.mark.django_db
def test_a_taken_slug_is_refused(study):
    client = logged_in(creator())
    response = client.post("/studies/new/", {**STUDY, "slug": study.slug})
    assert response.status_code == 400 and "exists already" in response.content.decode()


@pytest.mark.django_db
@pytest.mark.parametrize("who", ["plain", "study-admin", "staff-without-permission"])
def test_without_the_permission_nobody_creates_studies_or_uploads_rubrics(who, study):
    person = UserFactory(username=who)
    if who == "study-admin":
        StudyMembership.objects.create(study=study, user=person, role="admin", order_seed=1)
    if who == "staff-without-permission":
        person.is_staff = True
        person.save()
    client = logged_in(person)
    assert client.get("/studies/new/").status_code == 403
    assert client.post("/studies/new/", STUDY).status_code == 403
    assert upload(client, lab_rubric()).status_code == 403
    api = api_client_for(person).post("/api/studies/", STUDY, format="json")
    assert api.status_code == 403 and api.json()["error"]["code"] == "permission_denied"
    assert Study.objects.count() == 1 and not Rubric.objects.filter(key="labclarity").exists()


@pytest.mark.django_db
def test_a_superuser_creates_studies_without_the_permission(admin_user):
    assert logged_in(admin_user).post("/studies/new/", STUDY).status_code == 302


# --- the API -------------------------------------------------------------------------------


@pytest.mark.django_db
def test_the_api_creates_a_study_and_its_creator_administers_it():
    pi = creator()
    client = api_client_for(pi)
    response = client.post("/api/studies/", {**STUDY, "description": "Our note"}, format="json")
    assert response.status_code == 201, response.json()
    body = response.json()
    assert response["Location"].endswith("/api/studies/lab/")
    assert body["slug"] == "lab" and body["rubric"]["key"] == "litsumm" and body["access"] == "admin"
    assert body["roles"] == ["admin"] and body["guidelines"] == "Be fair." and body["description"] == "Our note"
    # The creator can now import into it through the API.
    lines = [
        {"type": "source", "study": "lab", "key": "s1", "text": "Drug A lowered blood pressure."},
        {"type": "summary", "study": "lab", "source": "s1", "key": "m1", "text": "A works.", "generator": "sysA"},
    ]
    data = "\n".join(json.dumps(line) for line in lines).encode()
    run = client.post(
        "/api/studies/lab/imports/", {"file": SimpleUploadedFile("lab.jsonl", data)}, format="multipart"
    ).json()
    assert run["status"] == "done" and run["counts"]["summary"]["created"] == 1


@pytest.mark.django_db
@pytest.mark.parametrize(
    "change,status,field",
    [
        ({"rubric": "nope"}, 400, None),
        ({"slug": "has space"}, 400, "slug"),
        ({"title": ""}, 400, "title"),
        ({"slug": "rubrics"}, 400, "slug"),
    ],
)
def test_the_api_refuses_a_bad_study_with_a_message(change, status, field):
    response = api_client_for(creator()).post("/api/studies/", {**STUDY, **change}, format="json")
    assert response.status_code == status
    error = response.json()["error"]
    assert error["message"]
    if field:
        assert field in error.get("fields", {}) or field in error["message"]
    if change.get("rubric") == "nope":
        assert "unknown rubric 'nope'" in error["message"]
    assert not Study.objects.exists()


@pytest.mark.django_db
def test_the_api_answers_409_for_a_taken_slug(study):
    response = api_client_for(creator()).post("/api/studies/", {**STUDY, "slug": study.slug}, format="json")
    assert response.status_code == 409 and "exists already" in response.json()["error"]["message"]


@pytest.mark.django_db
def test_anonymous_clients_cannot_create_studies():
    assert api_client_for(None).post("/api/studies/", STUDY, format="json").status_code in (401, 403)
    assert not Study.objects.exists()


# --- rubrics -------------------------------------------------------------------------------


@pytest.mark.django_db
def test_an_uploaded_rubric_is_versioned_like_load_rubric():
    client = logged_in(creator())
    assert "stored as version 1" in upload(client, lab_rubric()).content.decode()
    assert "unchanged: still version 1" in upload(client, lab_rubric()).content.decode()
    page = upload(client, lab_rubric(title="Lab clarity, second wording")).content.decode()
    assert "stored as version 2" in page
    assert list(Rubric.objects.filter(key="labclarity").values_list("version", flat=True)) == [1, 2]
    # A study created now pins the newest version.
    client.post("/studies/new/", {**STUDY, "rubric": "labclarity"})
    assert Study.objects.get(slug="lab").rubric.version == 2


@pytest.mark.django_db
@pytest.mark.parametrize(
    "text,message",
    [
        ("key: [unclosed", "not valid YAML"),
        (yaml.safe_dump({**lab_rubric(), "key": "litsumm"}), "is a built-in rubric"),
        (yaml.safe_dump({**lab_rubric(), "questions": []}), "question"),
    ],
    ids=["yaml", "builtin-key", "no-questions"],
)
def test_a_bad_rubric_is_refused_with_its_problem_and_stores_nothing(text, message):
    client = logged_in(creator())
    before = Rubric.objects.count()
    response = client.post("/studies/rubrics/", {"file": SimpleUploadedFile("r.yaml", text.encode())})
    assert response.status_code == 400 and message in response.content.decode()
    assert Rubric.objects.count() == before


@pytest.mark.django_db
def test_a_rubric_loaded_with_load_rubric_is_usable_by_name_in_an_import(tmp_path):
    """A lab's report: `load_rubric labclarity.yaml` then an import naming "labclarity" failed
    with "no file fixtures/rubrics/labclarity.yaml"."""
    path = tmp_path / "labclarity.yaml"
    path.write_text(yaml.safe_dump(lab_rubric()))
    call_command("load_rubric", str(path))
    lines = [json.dumps({"type": "study", "slug": "lab", "title": "Lab", "rubric": "labclarity"})]
    result = import_records(lines=lines)
    assert result.created["study"] == 1
    assert Study.objects.get(slug="lab").rubric.key == "labclarity"


@pytest.mark.django_db
def test_an_unknown_rubric_in_an_import_names_both_ways_to_get_one():
    from datasets.importing import ImportLineError

    with pytest.raises(ImportLineError) as caught:
        import_records(lines=[json.dumps({"type": "study", "slug": "lab", "title": "Lab", "rubric": "nope"})])
    assert caught.value.message.startswith("line 1: field \"rubric\": unknown rubric 'nope'")
    assert "load_rubric" in caught.value.message and "rubric page" in caught.value.message


@pytest.mark.django_db
def test_the_import_page_accepts_the_studys_own_line_and_refuses_another_study():
    """A file written for `import_jsonl` (study line first) uploads as it is."""
    pi = creator()
    client = logged_in(pi)
    client.post("/studies/new/", STUDY)
    lines = [
        {"type": "study", "slug": "lab", "title": "Lab study, renamed", "rubric": "litsumm", "guidelines": "New."},
        {"type": "source", "study": "lab", "key": "s1", "text": "Drug A lowered blood pressure."},
    ]
    data = "\n".join(json.dumps(line) for line in lines).encode()
    client.post("/studies/lab/imports/", {"file": SimpleUploadedFile("lab.jsonl", data)})
    study = Study.objects.get(slug="lab")
    assert (study.title, study.guidelines, study.sources.count()) == ("Lab study, renamed", "New.", 1)
    other = StudyFactory(slug="other")
    bad = [{"type": "study", "slug": other.slug, "title": "X", "rubric": "litsumm"}]
    client.post("/studies/lab/imports/", {"file": SimpleUploadedFile("x.jsonl", json.dumps(bad[0]).encode())})
    page = client.get("/studies/lab/imports/").content.decode()
    assert "must be &#x27;lab&#x27;, the study this file is imported into" in page
    assert Study.objects.get(slug="other").title == other.title
    wrong_rubric = [{"type": "study", "slug": "lab", "title": "Lab", "rubric": "factpico"}]
    client.post("/studies/lab/imports/", {"file": SimpleUploadedFile("y.jsonl", json.dumps(wrong_rubric[0]).encode())})
    assert "already uses rubric" in client.get("/studies/lab/imports/").content.decode()


@pytest.mark.django_db
def test_the_admins_add_study_form_offers_the_built_in_rubrics_on_an_empty_install(admin_user):
    assert not Rubric.objects.exists()
    client = logged_in(admin_user)
    form = client.get("/admin/annotate/study/add/").context["adminform"].form
    offered = {rubric.key for rubric in form.fields["rubric"].queryset}
    assert offered == {"litsumm", "factpico", "clinfo", "claims", "pairwise"}


@pytest.mark.django_db
@pytest.mark.parametrize("key", ["../fixtures/rubrics/litsumm", "litsumm.yaml", "a\x00b", ""])
def test_a_rubric_key_is_never_a_path(key):
    response = api_client_for(creator()).post("/api/studies/", {**STUDY, "rubric": key}, format="json")
    assert response.status_code == 400 and not Study.objects.exists()


@pytest.mark.django_db
def test_rubric_by_key_refuses_a_path():
    from annotate.rubrics import RubricDefinitionError
    from annotate.services.rubrics import rubric_by_key

    with pytest.raises(RubricDefinitionError, match="a rubric key is"):
        rubric_by_key(key="../rubrics/litsumm")
    assert not Rubric.objects.exists()


@pytest.mark.django_db
def test_an_import_cannot_create_a_study_that_a_page_would_hide():
    from datasets.importing import ImportLineError

    with pytest.raises(ImportLineError, match="line 1: field \"slug\": 'rubrics' is the name of a page"):
        import_records(lines=[json.dumps({"type": "study", "slug": "rubrics", "title": "R", "rubric": "litsumm"})])
    assert not Study.objects.exists()
