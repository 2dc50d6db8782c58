"""The report is never computed in the request: the page answers at once with
nothing cached and shows progress, and the report is computed by the real in-process path
(analysis.tasks.enqueue_study_report's background thread, no broker), then shown.

Transactional tests: the background thread has a connection of its own, which sees only
committed rows."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from analysis import services, tasks
from analysis.models import AnalysisResult
from core.background import wait_for_pool
from tests.analysis.reports import rated_study

pytestmark = pytest.mark.django_db(transaction=True)
Status = AnalysisResult.Status


def wait_for(condition, what: str, timeout: float = 240.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := condition():
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture
def study_and_client():
    study, admin = rated_study()
    client = Client()
    client.force_login(admin)
    return study, client


def test_the_page_answers_at_once_with_nothing_cached_and_the_report_follows(study_and_client, monkeypatch):
    # The page answers with the report still to come: it was not computed in the request
    # (how long the page takes is a figure of `make bench`, not a limit here).
    monkeypatch.setattr(services, "BOOTSTRAP_RESAMPLES", 300)
    study, client = study_and_client
    url = reverse("analysis:report", args=[study.slug])
    assert not AnalysisResult.objects.exists()
    response = client.get(url)
    assert response.status_code == 200
    html = response.content.decode()
    assert "Computing the report" in html and 'id="report-progress"' in html
    # The background thread computes it; the progress endpoint follows it to the end.
    progress_url = reverse("analysis:progress", args=[study.slug])
    seen = set()
    wait_for(lambda: seen.add(client.get(progress_url).json()["status"]) or "done" in seen, "the report", 300)
    assert seen <= {"pending", "running", "done"}
    html = client.get(url).content.decode()
    assert "Computing the report" not in html and "Agreement" in html
    result = AnalysisResult.objects.get()
    assert result.status == Status.DONE and result.result["agreement"][0]["n_resamples"] == 300


def test_the_api_answers_202_at_once_then_the_report(study_and_client, monkeypatch):
    monkeypatch.setattr(services, "BOOTSTRAP_RESAMPLES", 100)
    study, client = study_and_client
    url = reverse("api:study-analysis", args=[study.slug])
    first = client.get(url)
    assert first.status_code == 202 and first.json()["status"] in ("pending", "running")
    done = wait_for(lambda: (r := client.get(url)).status_code == 200 and r, "the report to be done")
    assert done.json()["status"] == "done" and done.json()["result"]["agreement"][0]["question"] == "overall"


def test_a_pending_report_no_worker_took_is_queued_again_after_the_claim_timeout(study_and_client, monkeypatch):
    """As after a restart: the row is pending, but the process that was to compute it is gone."""
    monkeypatch.setattr(services, "BOOTSTRAP_RESAMPLES", 100)
    monkeypatch.setenv("RUN_CLAIM_TIMEOUT", "30")
    study, client = study_and_client
    inputs = services.selectors.report_inputs(study=study, phase="all")
    fingerprint, n = inputs.fingerprint, inputs.ratings[0]
    forgotten = AnalysisResult.objects.create(study=study, phase="all", fingerprint=fingerprint, n_revisions=n)
    progress_url = reverse("analysis:progress", args=[study.slug])
    # Within the lease it may still be in a queue: left alone.
    assert client.get(progress_url).json() == {"status": "pending", "progress": 0}
    wait_for_pool(tasks.POOL, timeout=240)  # a (wrong) enqueue would have run by now
    assert AnalysisResult.objects.get().status == Status.PENDING
    AnalysisResult.objects.filter(pk=forgotten.pk).update(updated_at=timezone.now() - timedelta(seconds=31))
    client.get(progress_url)
    wait_for(lambda: AnalysisResult.objects.get().status == Status.DONE, "the re-queued report to be done")
    assert AnalysisResult.objects.get().pk == forgotten.pk
