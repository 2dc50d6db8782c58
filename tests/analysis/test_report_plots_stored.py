"""The report's plots are drawn by the worker, right after the report's numbers, and stored
with it; the web process only serves them. A worker that stops half-way through
the plots is replaced by the next request once its lease ran out."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from analysis import plots, services, tasks
from analysis.models import AnalysisResult, ReportPlot
from tests.analysis.reports import compute_queued_reports, rated_study

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def few_resamples(monkeypatch):
    monkeypatch.setattr(services, "BOOTSTRAP_RESAMPLES", 30)


@pytest.fixture
def study_and_client(client):
    study, admin = rated_study(n_summaries=5, raters=("ra", "rb"))
    client.force_login(admin)
    return study, client


def test_the_worker_stores_every_plot_in_both_formats_and_the_page_draws_none(study_and_client, monkeypatch):
    study, client = study_and_client
    url = reverse("analysis:report", args=[study.slug])
    client.get(url)
    compute_queued_reports(plots=True)
    result = AnalysisResult.objects.get(study=study)
    names = plots.plot_names(result.result)
    assert names and result.plots_expected == len(names) and result.plots_done_at is not None
    stored = {(p.kind, p.subject, p.format): bytes(p.image) for p in ReportPlot.objects.filter(result=result)}
    assert set(stored) == {(kind, subject, fmt) for kind, subject, _ in names for fmt in ("png", "svg")}
    # The page shows the SVGs: every one is stored before the first PNG (the downloads).
    order = list(ReportPlot.objects.filter(result=result).order_by("pk").values_list("format", flat=True))
    assert order == ["svg"] * len(names) + ["png"] * len(names)
    # The stored SVG is what matplotlib draws for that report (the same bytes: no date inside).
    kind, subject, _ = names[0]
    assert stored[kind, subject, "svg"] == plots.render_plot(result.result, kind, subject, ["svg"])["svg"]
    assert stored[kind, subject, "png"].startswith(b"\x89PNG")

    # The web process never draws: with matplotlib's figures out of reach, every plot is served.
    def no_drawing(*args, **kwargs):
        raise AssertionError("a plot was drawn in the request")

    monkeypatch.setattr(plots, "render_plot", no_drawing)
    monkeypatch.setattr(services, "render_plot", no_drawing)
    page = client.get(url).content.decode()
    assert "being drawn" not in page and "report-plots" in page
    for kind, subject, _ in names:
        for fmt, content_type in (("svg", "image/svg+xml"), ("png", "image/png")):
            response = client.get(reverse("analysis:plot", args=[study.slug, kind, subject, fmt]) + "?phase=all")
            assert response.status_code == 200 and response["Content-Type"] == content_type
            assert response.content == stored[kind, subject, fmt]


def test_plots_a_stopped_worker_left_undrawn_are_drawn_after_one_lease(
    study_and_client, monkeypatch, django_capture_on_commit_callbacks
):
    study, client = study_and_client
    url = reverse("analysis:report", args=[study.slug])
    # The worker stores the numbers and two plots, then its process dies.
    real = services.draw_report_plots

    def dies_after_two(report, **kwargs):
        for i, images in enumerate(real(report, **kwargs)):
            if i == 2:
                raise KeyboardInterrupt  # not an Exception: nothing records it, as with a killed process
            yield images

    monkeypatch.setattr(services, "draw_report_plots", dies_after_two)
    client.get(url)
    with pytest.raises(KeyboardInterrupt):
        compute_queued_reports(plots=True)
    monkeypatch.setattr(services, "draw_report_plots", real)
    result = AnalysisResult.objects.get(study=study)
    assert result.status == AnalysisResult.Status.DONE and result.plots_done_at is None
    assert ReportPlot.objects.filter(result=result).values("kind", "subject").distinct().count() == 2

    # The numbers are shown; the missing plots are placeholders the page follows (report.js).
    page = client.get(url).content.decode()
    pending = result.plots_expected - 2
    assert "Agreement" in page and f"{pending} of {result.plots_expected} still to come" in page
    assert page.count("being drawn") == pending and "js/report.js" in page

    # Within the lease the drawer may still be alive: nothing is queued.
    queued = []
    monkeypatch.setattr(tasks, "enqueue_study_report", queued.append)
    with django_capture_on_commit_callbacks(execute=True):
        client.get(url)
    assert queued == []
    # One lease later without a plot stored, the next request queues it once, and a worker
    # draws only what is missing.
    AnalysisResult.objects.filter(pk=result.pk).update(updated_at=timezone.now() - timedelta(hours=1))
    with django_capture_on_commit_callbacks(execute=True):
        client.get(url)
        client.get(url)
    assert queued == [result.pk]
    tasks.run_study_report_task(result.pk)  # what the worker runs: nothing to compute, the plots to finish
    result.refresh_from_db()
    assert result.plots_done_at is not None
    assert ReportPlot.objects.filter(result=result).count() == 2 * result.plots_expected
    assert "being drawn" not in client.get(url).content.decode()
