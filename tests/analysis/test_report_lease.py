"""Reports that never finish: a running report is held under a lease its worker renews.
A report whose worker died is answered as failed, with the reason, when it is next looked
at, and the next request computes it anew; a live worker's report is left alone.

The first test kills a real worker process mid-report (SIGKILL) on the test database and
follows the report through the API, as a client would."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from datetime import timedelta
from io import StringIO
from pathlib import Path

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.exceptions import ImproperlyConfigured
from django.core.management import call_command
from django.db import connection
from django.urls import reverse
from django.utils import timezone

from analysis import services, tasks
from analysis.conf import report_lease
from analysis.models import AnalysisResult
from analysis.selectors import report_inputs
from annotate.models import Study
from datasets.demo import DEMO_STUDY
from tests.analysis.reports import compute_queued_reports
from tests.analysis.test_analyze_study import rate_demo
from tests.conftest import api_client_for

API_URL = reverse("api:study-analysis", args=[DEMO_STUDY])
PAGE_URL = reverse("analysis:report", args=[DEMO_STUDY])
LEASE_SECONDS = 5
Status = AnalysisResult.Status

# What a Celery worker process runs for the task, with the number of bootstrap resamples
# chosen by the test (a million: it is still computing when it is killed). The vectorised
# bootstrap does a million resamples of the demo in a few seconds in chunks of 250, which
# is less than two leases; in chunks of 10 the same work takes tens of seconds, so the
# worker is still computing, and renewing its lease, when the test kills it.
WORKER = """
import sys

import django

django.setup()
from analysis import services
from stats import agreement_bootstrap
from analysis.tasks import run_study_report_task

services.BOOTSTRAP_RESAMPLES = int(sys.argv[2])
agreement_bootstrap.CHUNK = 10
run_study_report_task(int(sys.argv[1]))
"""


def database_url() -> str:
    """The test database, for a process of its own."""
    db = connection.settings_dict
    if "sqlite" in db["ENGINE"]:
        return f"sqlite:///{db['NAME']}"
    password = f":{db['PASSWORD']}" if db.get("PASSWORD") else ""
    host, port = db.get("HOST") or "127.0.0.1", db.get("PORT") or 5432
    return f"postgres://{db.get('USER') or 'postgres'}{password}@{host}:{port}/{db['NAME']}"


def start_worker(result_id: int, resamples: int, lease_seconds: int, log) -> subprocess.Popen:
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "tests.settings",
        "DATABASE_URL": database_url(),
        "ANALYSIS_REPORT_LEASE": str(lease_seconds),
    }
    return subprocess.Popen(
        [sys.executable, "-c", WORKER, str(result_id), str(resamples)],
        cwd=settings.BASE_DIR,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )


def wait_for(condition, what: str, timeout: float = 120, workers=(), log=None):
    """condition()'s first true value, checked every 0.1 s; fails after `timeout` seconds
    or as soon as a worker process exits early (showing the workers' output)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        for worker in workers:
            if worker.poll() is not None:
                output = Path(log.name).read_text() if log else ""
                pytest.fail(f"the worker exited ({worker.returncode}) while waiting for {what}:\n{output}")
        time.sleep(0.1)
    pytest.fail(f"timed out after {timeout} s waiting for {what}")


def report_row() -> AnalysisResult:
    return AnalysisResult.objects.get(study__slug=DEMO_STUDY, phase="all")


@pytest.mark.django_db(transaction=True)
def test_a_report_whose_worker_is_killed_fails_with_the_reason_and_is_computed_again(monkeypatch, tmp_path):
    call_command("load_demo", stdout=StringIO())
    rate_demo()
    lease = timedelta(seconds=LEASE_SECONDS)
    log = (tmp_path / "workers.log").open("w")
    workers: list[subprocess.Popen] = []
    # The first worker (a million resamples: still computing when it is killed) holds a short
    # lease, so that its death shows soon. The second holds the default lease: with a short
    # one, a loaded machine can spend longer than the lease in a stage that does not renew
    # it (the text metrics) and a poll would rightly take it for dead.
    runs = [(1_000_000, LEASE_SECONDS), (30, 600)]

    def deliver(result_id: int) -> None:
        # The broker's part: each delivery goes to a worker process of its own.
        resamples, lease_seconds = runs.pop(0)
        workers.append(start_worker(result_id, resamples, lease_seconds, log))

    monkeypatch.setattr(tasks, "enqueue_study_report", deliver)
    client = api_client_for(get_user_model().objects.get(username="admin"))
    try:
        first = client.get(API_URL)
        assert first.status_code == 202 and first.json()["status"] == Status.PENDING
        assert len(workers) == 1

        # Running for longer than one lease: the worker renewed it, and a poll leaves it alone.
        wait_for(
            lambda: (
                (row := report_row()).status == Status.RUNNING and row.lease_expires_at > row.claimed_at + 2 * lease
            ),
            "the worker to renew its lease",
            workers=workers,
            log=log,
        )
        alive = client.get(API_URL)
        assert alive.status_code == 202 and alive.json()["status"] == Status.RUNNING
        assert alive.json()["error"] == ""

        workers[0].send_signal(signal.SIGKILL)
        assert workers[0].wait(timeout=30) == -signal.SIGKILL
        assert report_row().status == Status.RUNNING  # what the dead worker left behind

        # Polled until the answer is not 202 any more: failed, with the reason.
        dead = wait_for(lambda: (r := client.get(API_URL)).status_code != 202 and r, "the report to fail")
        assert dead.status_code == 200
        assert dead.json()["status"] == Status.FAILED and dead.json()["result"] is None
        assert dead.json()["error"] == services.ABANDONED_ERROR
        assert dead.json()["error"].startswith("Stopped: the worker died")

        # It stays failed, with the reason, until someone resumes it (a POST), then it is
        # computed anew, on a new worker, and completes.
        assert client.get(API_URL).json()["status"] == Status.FAILED and len(workers) == 1
        again = client.post(API_URL, {"phase": "all"}, format="json")
        assert again.status_code == 202 and again.json()["status"] == Status.PENDING
        assert again.json()["uuid"] == first.json()["uuid"] and len(workers) == 2
        done = wait_for(lambda: (r := client.get(API_URL)).status_code != 202 and r, "the report to be done")
        assert done.json()["status"] == Status.DONE, done.json()["error"]
        assert done.json()["progress"] == 100 and done.json()["result"]["agreement"][0]["question"] == "overall"
        assert done.json()["result"]["agreement"][0]["n_resamples"] == 30  # computed by the second worker
        assert workers[1].wait(timeout=600) == 0  # it draws the plots after the numbers
        assert AnalysisResult.objects.count() == 1
    finally:
        for worker in workers:
            if worker.poll() is None:
                worker.kill()
                worker.wait()
        log.close()


# --- the same rules, on rows in the states a worker leaves behind --------------------------


@pytest.fixture
def rated_demo(db, monkeypatch):
    monkeypatch.setattr(services, "BOOTSTRAP_RESAMPLES", 30)
    call_command("load_demo", stdout=StringIO())
    rate_demo()
    return Study.objects.get(slug=DEMO_STUDY)


@pytest.fixture
def admin_api(rated_demo):
    return api_client_for(get_user_model().objects.get(username="admin"))


def running_report(study: Study, *, lease_expires_at) -> AnalysisResult:
    """A report a worker claimed, holding its lease until `lease_expires_at`."""
    inputs = report_inputs(study=study, phase="all")
    fingerprint, n = inputs.fingerprint, inputs.ratings[0]
    return AnalysisResult.objects.create(
        study=study,
        phase="all",
        fingerprint=fingerprint,
        n_revisions=n,
        status=Status.RUNNING,
        progress=40,
        claimed_at=timezone.now() - timedelta(hours=1),
        lease_expires_at=lease_expires_at,
    )


def test_a_running_report_with_a_fresh_lease_is_not_marked_failed(rated_demo, admin_api):
    # Claimed an hour ago, but its worker renewed the lease a moment ago.
    result = running_report(rated_demo, lease_expires_at=timezone.now() + timedelta(minutes=5))
    response = admin_api.get(API_URL)
    assert response.status_code == 202
    assert (response.json()["status"], response.json()["progress"], response.json()["error"]) == ("running", 40, "")
    result.refresh_from_db()
    assert result.status == Status.RUNNING


def test_a_report_whose_lease_ran_out_is_failed_then_computed_by_the_next_request(rated_demo, admin_api):
    result = running_report(rated_demo, lease_expires_at=timezone.now() - timedelta(seconds=1))
    response = admin_api.get(API_URL)
    assert response.status_code == 200
    assert (response.json()["status"], response.json()["error"]) == ("failed", services.ABANDONED_ERROR)
    response = admin_api.get(API_URL)  # still failed: the API says the worker died until resumed
    assert response.status_code == 200 and response.json()["status"] == "failed"
    response = admin_api.post(API_URL, {"phase": "all"}, format="json")  # queued anew, never computed here
    assert response.status_code == 202 and response.json()["status"] == "pending"
    assert compute_queued_reports() == 1  # the worker's part
    response = admin_api.get(API_URL)
    assert response.status_code == 200 and response.json()["status"] == "done"
    assert response.json()["uuid"] == str(result.uuid) and response.json()["result"]["agreement"]


def test_the_report_page_shows_why_a_report_stopped_and_offers_to_compute_it_again(rated_demo, client):
    running_report(rated_demo, lease_expires_at=timezone.now() - timedelta(seconds=1))
    client.force_login(get_user_model().objects.get(username="admin"))
    html = client.get(PAGE_URL).content.decode()
    assert "Stopped: the worker died: the worker running this report stopped before it finished" in html
    assert "Compute it again" in html and "location.reload" not in html
    assert "Computing the report" not in html
    assert "Computing the report" not in client.get(PAGE_URL).content.decode()  # still says why
    # Any viewer may resume it (the button), not only an admin.
    from annotate.models import StudyMembership
    from annotate.services.members import add_study_member
    from tests.factories import UserFactory

    viewer = UserFactory(username="viewer")

    add_study_member(study=rated_demo, user=viewer, role=StudyMembership.Role.VIEWER)
    client.force_login(viewer)
    resumed = client.post(reverse("analysis:resume", args=[DEMO_STUDY]), {"phase": "all"}, follow=True)
    assert "Computing the report" in resumed.content.decode()  # queued anew
    compute_queued_reports()
    assert "Computing the report" not in client.get(PAGE_URL).content.decode()
    assert AnalysisResult.objects.get().status == Status.DONE


def test_a_redelivered_task_takes_over_a_report_whose_lease_ran_out(rated_demo):
    result = running_report(rated_demo, lease_expires_at=timezone.now() - timedelta(seconds=1))
    assert services.run_study_report(result_id=result.pk).status == Status.DONE
    # ... but not one whose worker is alive.
    result.delete()
    alive = running_report(rated_demo, lease_expires_at=timezone.now() + timedelta(minutes=5))
    assert services.run_study_report(result_id=alive.pk) is None
    alive.refresh_from_db()
    assert alive.status == Status.RUNNING and alive.result is None


def test_a_worker_that_lost_its_report_stops_and_overwrites_nothing(rated_demo, monkeypatch):
    """A worker that stalled past its lease (a paused machine) finds, on its next renewal,
    that the report was marked abandoned meanwhile: it stops, and its result is not stored."""
    inputs = report_inputs(study=rated_demo, phase="all")
    fingerprint, n = inputs.fingerprint, inputs.ratings[0]
    result = AnalysisResult.objects.create(study=rated_demo, phase="all", fingerprint=fingerprint, n_revisions=n)
    compute = services.compute_study_report

    def stalled_then_compute(**kwargs):
        # The stall: a poll sees the lease run out and marks the report failed.
        AnalysisResult.objects.filter(pk=result.pk).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
        assert services.fail_abandoned_report(result=AnalysisResult.objects.get(pk=result.pk)).status == Status.FAILED
        return compute(**kwargs)

    monkeypatch.setattr(services, "compute_study_report", stalled_then_compute)
    stopped = services.run_study_report(result_id=result.pk)
    assert (stopped.status, stopped.error, stopped.result) == (Status.FAILED, services.ABANDONED_ERROR, None)


def test_the_lease_comes_from_the_environment(monkeypatch):
    monkeypatch.delenv("ANALYSIS_REPORT_LEASE", raising=False)
    monkeypatch.delenv("RUN_LEASE", raising=False)
    assert report_lease() == timedelta(seconds=30)  # RUN_LEASE's default: a heartbeat renews it
    monkeypatch.setenv("RUN_LEASE", "12")
    assert report_lease() == timedelta(seconds=12)
    monkeypatch.setenv("ANALYSIS_REPORT_LEASE", "90")
    assert report_lease() == timedelta(seconds=90)
    for bad in ("soon", "0", "-5"):
        monkeypatch.setenv("ANALYSIS_REPORT_LEASE", bad)
        with pytest.raises(ImproperlyConfigured, match="ANALYSIS_REPORT_LEASE"):
            report_lease()
