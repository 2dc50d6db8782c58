"""A broker or an object store that accepts connections and never answers (tests/silent_server.py):
an export or import request answers 503 in the one error shape within the timeouts of
config/settings.py (BROKER_*, S3_*), the run is marked failed with the reason, and nothing
is left pending. No broker or object store needs to run: the silent listener is a thread
of this process.

Each request runs in a thread the test waits on for at most ANSWER_WITHIN seconds, far
above the timeouts: it detects a request that hangs, and is not a benchmark."""

from __future__ import annotations

import json
import runpy
import threading
from pathlib import Path

import pytest
from django.conf import settings as django_settings
from django.core.files.uploadedfile import SimpleUploadedFile

from config.celery import app
from core.background import QUEUE_UNAVAILABLE
from datasets import export_runs, import_runs
from datasets.models import ImportRun
from tests.conftest import api_client_for
from tests.core.test_queue_unavailable import forget_connections
from tests.factories import StudyFactory, UserFactory
from tests.silent_server import SilentServer

pytestmark = pytest.mark.django_db(transaction=True)

ANSWER_WITHIN = 60.0


def answered(call):
    """What `call()` returns, or a test failure if it has not returned within ANSWER_WITHIN s."""
    outcome: dict = {}

    def run() -> None:
        try:
            outcome["value"] = call()
        except BaseException as exc:  # handed to the test below
            outcome["error"] = exc

    thread = threading.Thread(target=run, daemon=True, name="request-under-test")
    thread.start()
    thread.join(ANSWER_WITHIN)
    if thread.is_alive():
        pytest.fail(f"no answer within {ANSWER_WITHIN:g} s: the request hangs on a silent dependency")
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


@pytest.fixture
def silent():
    with SilentServer() as server:
        yield server


@pytest.fixture(params=["redis", "amqp"])
def silent_broker(request, silent, settings, tmp_path):
    """The project's Celery app sends to a broker that accepts and never answers, with the
    transport options and publish policy of config/settings.py."""
    saved = {key: app.conf[key] for key in ("task_always_eager", "broker_url")}
    settings.CELERY_TASK_ALWAYS_EAGER = False
    settings.EXPORTS_DIR = tmp_path / "exports"
    settings.IMPORTS_DIR = tmp_path / "imports"
    app.conf.update(task_always_eager=False, broker_url=silent.url(request.param))
    forget_connections()
    yield silent
    app.conf.update(saved)
    forget_connections()


@pytest.fixture
def admin_of_study():
    study = StudyFactory(slug="silent-deps")
    return study, UserFactory(username="silent-admin", is_staff=True, is_superuser=True)


def jsonl(study) -> bytes:
    record = {"type": "source", "study": study.slug, "key": "s1", "text": "A trial. It ended."}
    return (json.dumps(record) + "\n").encode()


def assert_queue_unavailable(response) -> None:
    assert response.status_code == 503, response.content[:500]
    error = response.json()["error"]
    assert error["code"] == "queue_unavailable" and QUEUE_UNAVAILABLE in error["message"].lower()


def test_an_export_answers_503_and_its_run_is_failed_when_the_broker_never_answers(silent_broker, admin_of_study):
    study, admin = admin_of_study
    response = answered(lambda: api_client_for(admin).post(f"/api/studies/{study.slug}/exports/", {}, format="json"))
    assert_queue_unavailable(response)
    assert silent_broker.accepted >= 1  # the broker was reached, and said nothing
    [run] = export_runs.list_exports(study=study)
    assert run.status == "failed" and QUEUE_UNAVAILABLE in run.error.lower() and run.finished_at


def test_an_import_answers_503_and_its_run_is_failed_when_the_broker_never_answers(silent_broker, admin_of_study):
    study, admin = admin_of_study
    file = SimpleUploadedFile("one.jsonl", jsonl(study), content_type="application/jsonl")
    response = answered(
        lambda: api_client_for(admin).post(f"/api/studies/{study.slug}/imports/", {"file": file}, format="multipart")
    )
    assert_queue_unavailable(response)
    [run] = import_runs.list_imports(study=study)
    assert run.status == "failed" and QUEUE_UNAVAILABLE in run.error.lower()


def s3_storages(endpoint_url: str, monkeypatch) -> dict:
    """STORAGES as config/settings.py builds them from the environment for an object store
    at `endpoint_url` (the settings file run afresh; Django's own settings untouched)."""
    for name, value in {
        "STORAGE_BACKEND": "s3",
        "S3_BUCKET": "ratings",
        "S3_REGION": "us-east-1",
        "S3_ENDPOINT_URL": endpoint_url,
        "S3_CONNECT_TIMEOUT": "1",
        "S3_READ_TIMEOUT": "1",
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
    }.items():
        monkeypatch.setenv(name, value)
    return runpy.run_path(str(Path(django_settings.BASE_DIR) / "config" / "settings.py"))["STORAGES"]


def test_an_import_answers_503_and_leaves_no_run_when_the_object_store_never_answers(
    silent, admin_of_study, settings, monkeypatch
):
    settings.STORAGES = s3_storages(silent.url("http"), monkeypatch)
    study, admin = admin_of_study
    file = SimpleUploadedFile("one.jsonl", jsonl(study), content_type="application/jsonl")
    response = answered(
        lambda: api_client_for(admin).post(f"/api/studies/{study.slug}/imports/", {"file": file}, format="multipart")
    )
    assert response.status_code == 503, response.content[:500]
    assert response.json()["error"]["code"] == "storage_unavailable"
    assert response["Retry-After"] == "60"
    assert silent.accepted >= 1
    # The file is stored before the run is recorded: nothing is left pending.
    assert not ImportRun.objects.filter(study=study).exists()
