"""Reports computed ahead of the first visit: `manage.py
compute_reports` fills the report cache the page reads, and `make run`'s master queues the
demo's missing reports (config.demo_reports) so that a visit waits for that process
rather than computing its own. The cache stays the page's: a changed answer makes the
computed report stale."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.urls import reverse

from analysis import services
from analysis.models import AnalysisResult, ReportPlot
from config.demo_reports import queue_demo_reports
from tests.analysis.reports import change_first_rating, rated_study

pytestmark = pytest.mark.django_db


@pytest.fixture
def study(monkeypatch):
    monkeypatch.setattr(services, "BOOTSTRAP_RESAMPLES", 50)
    study, admin = rated_study(n_summaries=4, raters=("ra", "rb"))
    study.admin = admin
    return study


@pytest.fixture(name="visit")
def visit_fixture(django_capture_on_commit_callbacks):
    """What a visit to the report page does (request_study_report): the report, and the ids
    it handed to the worker (its on_commit callbacks run, as after the request's commit)."""

    def visit(study):
        queued: list[int] = []
        with django_capture_on_commit_callbacks(execute=True):
            result = services.request_study_report(study=study, phase="all", enqueue=queued.append)
        return result, queued

    return visit


def test_computed_reports_are_served_by_the_first_visit(client, study, visit):
    call_command("compute_reports", study.slug)

    result, queued = visit(study)
    assert queued == []  # nothing to compute: the cached report is served
    assert result.status == AnalysisResult.Status.DONE and result.plots_done_at is not None
    formats = set(ReportPlot.objects.filter(result=result).values_list("format", flat=True))
    assert formats == {"svg", "png"}
    client.force_login(study.admin)
    page = client.get(reverse("analysis:report", args=[study.slug])).content.decode()
    assert 'id="report-progress"' not in page and "data-pending" not in page
    assert "Agreement" in page


def test_a_changed_answer_makes_the_computed_report_stale(client, study, visit):
    call_command("compute_reports", study.slug)
    computed = AnalysisResult.objects.get(study=study)

    change_first_rating(study)

    result, queued = visit(study)
    assert result.status == AnalysisResult.Status.PENDING and queued == [result.pk]
    assert not AnalysisResult.objects.filter(pk=computed.pk).exists()


def test_the_master_queues_the_missing_demo_reports_and_a_visit_waits_for_them(client, study, visit):
    study.slug = "demo-litsumm"
    study.save()

    assert queue_demo_reports() == ["demo-litsumm"]
    queued_row = AnalysisResult.objects.get(study=study)
    assert queued_row.status == AnalysisResult.Status.PENDING
    # A visit before compute_reports has started finds the report queued: not computed again here.
    result, queued = visit(study)
    assert result.pk == queued_row.pk and queued == []

    call_command("compute_reports", "demo-litsumm")
    assert queue_demo_reports() == []  # nothing left to compute on the next start
    result, queued = visit(study)
    assert result.pk == queued_row.pk and result.status == AnalysisResult.Status.DONE and queued == []


def test_svgs_first_the_plots_are_done_only_with_every_format(study, visit):
    result, _ = visit(study)
    services.run_study_report(result_id=result.pk)

    svgs = services.draw_missing_plots(result_id=result.pk, formats=("svg",))
    result.refresh_from_db()
    assert svgs > 0 and result.plots_done_at is None  # the PNGs are still to come
    assert set(ReportPlot.objects.filter(result=result).values_list("format", flat=True)) == {"svg"}
    assert services.draw_missing_plots(result_id=result.pk) == svgs  # only the PNGs
    result.refresh_from_db()
    assert result.plots_done_at is not None
