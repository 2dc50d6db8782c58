"""Imports over the API: a study admin uploads JSON Lines, the run is queued
(in process without a broker) and polled; errors name the line and field, and a failed
or refused import writes nothing."""

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from annotate.models import Source, StudyMembership, Summary
from annotate.services.members import add_study_member
from tests.conftest import api_client_for
from tests.factories import StudyFactory, UserFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_of_study(settings, tmp_path):
    settings.IMPORTS_DIR = tmp_path / "imports"
    study = StudyFactory(slug="trial-sums")
    admin = UserFactory(username="study-admin")
    add_study_member(study=study, user=admin, role=StudyMembership.Role.ADMIN)
    return study, admin


def jsonl(*records) -> bytes:
    return "".join(json.dumps(r) + "\n" for r in records).encode()


def pairs(study, n):
    for i in range(n):
        yield {"type": "source", "study": study.slug, "key": f"s{i}", "text": f"Trial {i} enrolled adults. It ended."}
        yield {
            "type": "summary",
            "study": study.slug,
            "source": f"s{i}",
            "key": f"m{i}",
            "text": f"Trial {i} was on adults.",
            "generator": "gpt-x",
        }


def upload(client, study, content: bytes, name="sums.jsonl"):
    file = SimpleUploadedFile(name, content, content_type="application/jsonl")
    return client.post(f"/api/studies/{study.slug}/imports/", {"file": file}, format="multipart")


def test_an_admin_imports_a_file_and_polls_its_run(admin_of_study):
    study, admin = admin_of_study
    client = api_client_for(admin)
    response = upload(client, study, jsonl(*pairs(study, 20)))
    assert response.status_code == 202, response.content
    run = response.json()
    assert run["status"] == "done", run["error"]  # no broker: the run finished in the request
    assert run["counts"]["source"] == {"created": 20, "updated": 0, "unchanged": 0}
    assert run["counts"]["summary"]["created"] == 20
    assert (run["requested_by"], run["file_name"]) == ("study-admin", "sums.jsonl")
    assert Summary.objects.filter(study=study).count() == 20
    polled = client.get(response["Location"])
    assert polled.status_code == 200 and polled.json() == run
    # Again: idempotent by keys, and both runs are listed, newest first.
    again = upload(client, study, jsonl(*pairs(study, 20))).json()
    assert again["counts"]["summary"] == {"created": 0, "updated": 0, "unchanged": 20}
    listed = client.get(f"/api/studies/{study.slug}/imports/").json()
    assert [r["id"] for r in listed["results"]] == [again["id"], run["id"]]


@pytest.mark.parametrize(
    "bad_record,field,message",
    [
        (
            {"type": "summary", "key": "m9", "source": "nope", "text": "T.", "generator": "g"},
            "source",
            "no source 'nope'",
        ),
        ({"type": "source", "key": "s9", "text": ""}, "text", ""),
        ({"type": "source", "study": "another-study", "key": "s9", "text": "T."}, "study", "must be 'trial-sums'"),
        (
            {"type": "study", "slug": "other-study", "title": "T", "rubric": "litsumm"},
            "slug",
            "must be 'trial-sums', the study this file is imported into",
        ),
    ],
    ids=["unknown-source", "empty-text", "other-study", "another-study-record"],
)
def test_a_bad_line_fails_the_run_names_the_line_and_writes_nothing(admin_of_study, bad_record, field, message):
    study, admin = admin_of_study
    records = list(pairs(study, 3))
    if bad_record["type"] != "study":
        bad_record = {"study": study.slug, **bad_record}
    records.insert(4, bad_record)  # line 5
    run = upload(api_client_for(admin), study, jsonl(*records)).json()
    assert run["status"] == "failed"
    assert (run["error_line"], run["error_field"]) == (5, field)
    assert run["error"].startswith(f'line 5: field "{field}"') and message in run["error"]
    assert not Source.objects.filter(study=study).exists()


def test_a_file_that_is_not_utf8_fails_cleanly(admin_of_study):
    study, admin = admin_of_study
    run = upload(api_client_for(admin), study, b'{"type": "source", "text": "caf\xe9"}\n').json()
    assert run["status"] == "failed" and "UTF-8" in run["error"]
    assert not Source.objects.filter(study=study).exists()


def test_a_file_over_the_limit_is_refused_and_nothing_is_kept(admin_of_study, settings):
    study, admin = admin_of_study
    settings.MAX_IMPORT_BYTES = 1000
    response = upload(api_client_for(admin), study, jsonl(*pairs(study, 20)))
    assert response.status_code == 413
    assert "MAX_IMPORT_BYTES" in response.json()["error"]["message"]
    assert (
        not list((settings.IMPORTS_DIR / study.slug).glob("*"))
        if (settings.IMPORTS_DIR / study.slug).exists()
        else True
    )
    assert not Source.objects.filter(study=study).exists()


def test_an_upload_without_a_file_is_a_400(admin_of_study):
    study, admin = admin_of_study
    response = api_client_for(admin).post(f"/api/studies/{study.slug}/imports/", {}, format="multipart")
    assert response.status_code == 400
    assert set(response.json()) == {"error"}


def test_raters_cannot_import_or_see_imports(admin_of_study):
    study, _ = admin_of_study
    rater = UserFactory(username="a-rater")
    add_study_member(study=study, user=rater, role=StudyMembership.Role.RATER)
    client = api_client_for(rater)
    assert upload(client, study, jsonl(*pairs(study, 1))).status_code == 404
    assert client.get(f"/api/studies/{study.slug}/imports/").status_code == 404
    assert not Source.objects.filter(study=study).exists()
