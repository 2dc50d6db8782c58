"""Uploads and exports in an S3-compatible object store: a real S3 HTTP server
(moto in server mode, a process of its own on a port of this project's range) behind
django-storages and boto3, as STORAGE_BACKEND=s3 configures them. An import uploaded over
the API is stored in the bucket and imported from it; an export is stored there and
downloaded through the app after its permission checks; nothing lands on the local disk;
retention removes the objects; a download of another study's export, or of a tampered
id, is refused."""

from __future__ import annotations

import io
import json
import zipfile
from datetime import timedelta

import boto3
import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.utils import timezone

from annotate.models import StudyMembership
from annotate.services.members import add_study_member
from datasets.models import ExportRun, ImportRun
from datasets.retention import remove_expired_files
from tests.conftest import api_client_for
from tests.factories import StudyFactory, UserFactory
from tests.s3_server import CREDENTIALS, S3Server

pytestmark = pytest.mark.django_db
BUCKET = "ratings-test"


@pytest.fixture(scope="module")
def s3_server():
    with S3Server() as server:
        yield server


@pytest.fixture
def bucket(s3_server, settings, monkeypatch, tmp_path):
    """A fresh bucket, and the imports and exports storages in it (prefix per test)."""
    for name, value in CREDENTIALS.items():
        monkeypatch.setenv(name, value)
    client = boto3.client("s3", endpoint_url=s3_server.endpoint_url, region_name="us-east-1")
    if BUCKET not in {b["Name"] for b in client.list_buckets()["Buckets"]}:
        client.create_bucket(Bucket=BUCKET)
    prefix = f"{tmp_path.name}/"
    settings.STORAGES = {**settings.STORAGES, **s3_server.storages(BUCKET, prefix=prefix)}
    settings.IMPORTS_DIR = tmp_path / "imports"  # must stay empty: files go to the bucket
    settings.EXPORTS_DIR = tmp_path / "exports"

    def keys() -> list[str]:
        found = client.list_objects_v2(Bucket=BUCKET, Prefix=prefix).get("Contents", [])
        return sorted(o["Key"][len(prefix) :] for o in found)

    return keys


@pytest.fixture
def admin_of_study():
    study = StudyFactory(slug="trial-sums")
    admin = UserFactory(username="study-admin")
    add_study_member(study=study, user=admin, role=StudyMembership.Role.ADMIN)
    return study, admin


def jsonl(study, n) -> bytes:
    records = []
    for i in range(n):
        records.append({"type": "source", "study": study.slug, "key": f"s{i}", "text": f"Trial {i} ran. It ended."})
        records.append(
            {"type": "summary", "study": study.slug, "source": f"s{i}", "key": f"m{i}", "text": f"Trial {i} ran."}
            | {"generator": "gpt-x"}
        )
    return "".join(json.dumps(r) + "\n" for r in records).encode()


def test_an_import_round_trips_through_the_bucket(bucket, admin_of_study, tmp_path):
    study, admin = admin_of_study
    client = api_client_for(admin)
    file = SimpleUploadedFile("sums.jsonl", jsonl(study, 3), content_type="application/jsonl")
    response = client.post(f"/api/studies/{study.slug}/imports/", {"file": file}, format="multipart")
    assert response.status_code == 202, response.content
    run = response.json()
    assert run["status"] == "done", run["error"]
    assert run["counts"]["source"] == {"created": 3, "updated": 0, "unchanged": 0}
    assert bucket() == [f"imports/{study.slug}/{run['id']}/upload.jsonl"]
    assert not (tmp_path / "imports").exists()
    assert ImportRun.objects.get(uuid=run["id"]).progress == 6  # lines read
    # An error names its line and field, with the file read back from the bucket.
    bad = jsonl(study, 1) + b'{"type": "source", "study": "trial-sums", "key": "s9", "text": ""}\n'
    file = SimpleUploadedFile("bad.jsonl", bad, content_type="application/jsonl")
    failed = client.post(f"/api/studies/{study.slug}/imports/", {"file": file}, format="multipart").json()
    assert (failed["status"], failed["error_line"], failed["error_field"]) == ("failed", 3, "text")


def test_an_import_over_the_limit_stores_nothing_in_the_bucket(bucket, admin_of_study, settings):
    study, admin = admin_of_study
    settings.MAX_IMPORT_BYTES = 100
    file = SimpleUploadedFile("sums.jsonl", jsonl(study, 5), content_type="application/jsonl")
    response = api_client_for(admin).post(f"/api/studies/{study.slug}/imports/", {"file": file}, format="multipart")
    assert response.status_code == 413 and "MAX_IMPORT_BYTES" in response.json()["error"]["message"]
    assert bucket() == [] and not ImportRun.objects.exists()


def test_an_export_round_trips_through_the_bucket_and_downloads_through_the_app(bucket, admin_of_study, tmp_path):
    study, admin = admin_of_study
    client = api_client_for(admin)
    client.post(
        f"/api/studies/{study.slug}/imports/",
        {"file": SimpleUploadedFile("s.jsonl", jsonl(study, 2))},
        format="multipart",
    )
    started = client.post(f"/api/studies/{study.slug}/exports/", {"formats": ["jsonl"]}, format="json")
    assert started.status_code == 202, started.content
    run = started.json()
    assert run["status"] == "done", run["error"]
    keys = [k for k in bucket() if k.startswith("exports/")]
    assert f"exports/{study.slug}/{run['id']}/dataset.zip" in keys
    assert f"exports/{study.slug}/{run['id']}/dataset/README.md" in keys
    assert not (tmp_path / "exports").exists()
    download = client.get(run["download"])
    assert download.status_code == 200 and download["Content-Type"] == "application/zip"
    archive = zipfile.ZipFile(io.BytesIO(b"".join(download.streaming_content)))
    sources = archive.read("dataset/jsonl/sources.jsonl").decode().splitlines()
    assert sorted(json.loads(line)["source_key"] for line in sources) == ["s0", "s1"]
    # Only the study's admins download it; another study's path, or a tampered id, is a 404.
    outsider = UserFactory(username="someone")
    assert api_client_for(outsider).get(run["download"]).status_code in (403, 404)
    other = StudyFactory(slug="other-study")
    add_study_member(study=other, user=admin, role=StudyMembership.Role.ADMIN)
    assert client.get(run["download"].replace(study.slug, other.slug)).status_code == 404
    tampered = run["id"][:-1] + ("1" if run["id"].endswith("0") else "0")  # always a different id
    assert client.get(run["download"].replace(run["id"], tampered)).status_code == 404
    assert client.get(run["download"].replace(run["id"], "..%2F..%2Fimports")).status_code == 404


def test_retention_removes_the_objects_of_expired_runs(bucket, admin_of_study):
    study, admin = admin_of_study
    client = api_client_for(admin)
    imported = client.post(
        f"/api/studies/{study.slug}/imports/",
        {"file": SimpleUploadedFile("s.jsonl", jsonl(study, 1))},
        format="multipart",
    ).json()
    old = client.post(f"/api/studies/{study.slug}/exports/", {"formats": ["jsonl"]}, format="json").json()
    kept = client.post(f"/api/studies/{study.slug}/exports/", {"formats": ["csv"]}, format="json").json()
    long_ago = timezone.now() - timedelta(days=40)
    ExportRun.objects.filter(uuid=old["id"]).update(finished_at=long_ago)
    ImportRun.objects.filter(uuid=imported["id"]).update(finished_at=long_ago)
    removed = remove_expired_files()
    assert (removed.exports, removed.imports) == (1, 1)
    remaining = bucket()
    assert not [k for k in remaining if old["id"] in k or imported["id"] in k]
    assert f"exports/{study.slug}/{kept['id']}/dataset.zip" in remaining
    assert list(ExportRun.objects.values_list("uuid", flat=True)) == [__import__("uuid").UUID(kept["id"])]


def test_readyz_answers_with_the_bucket_and_fails_cleanly_without_it(bucket, client, s3_server, settings):
    ready = client.get("/readyz")
    assert ready.status_code == 200 and ready.json()["checks"]["storage"] == "ok"
    settings.STORAGES = {**settings.STORAGES, **s3_server.storages("no-such-bucket")}
    missing = client.get("/readyz")
    assert missing.status_code == 503 and missing.json()["checks"]["storage"].startswith("failed")
    assert missing.json()["checks"]["database"] == "ok"
