"""The report page's model (analysis.pages), without an HTTP client: what the page shows
is read from the stored report and the study's roles, computed nowhere else."""

from __future__ import annotations

import pytest

from analysis import pages, services
from analysis.models import AnalysisResult
from analysis.report_files import FILE_NAMES
from analysis.report_json import report_from_payload
from analysis.sections import StudyReport
from annotate.models import StudyMembership
from annotate.services.members import add_study_member
from tests.analysis.reports import compute_queued_reports, rated_study
from tests.factories import UserFactory


@pytest.fixture(autouse=True)
def few_resamples(monkeypatch):
    monkeypatch.setattr(services, "BOOTSTRAP_RESAMPLES", 20)


def queued(study) -> AnalysisResult:
    return services.request_study_report(study=study, phase="all", enqueue=lambda pk: None)


@pytest.fixture
def done(db):
    """A rated study, its admin, and its finished report."""
    study, admin = rated_study(n_summaries=8)
    queued(study)
    compute_queued_reports()
    return study, admin, queued(study)


def test_a_report_still_computing_has_no_body(db):
    study, admin = rated_study(n_summaries=4)
    page = pages.report_page(user=admin, study=study, phase="all", result=queued(study))
    assert page.result.status == AnalysisResult.Status.PENDING
    assert page.body is None
    context = page.context()
    assert context["study"] == study and "agreement" not in context and "report" not in context


def test_admins_may_recompute_and_viewers_may_not(done):
    study, admin, result = done
    viewer = UserFactory()
    add_study_member(study=study, user=viewer, role=StudyMembership.Role.VIEWER)
    assert pages.report_page(user=admin, study=study, phase="all", result=result).can_recompute
    assert not pages.report_page(user=viewer, study=study, phase="all", result=result).can_recompute


def test_the_body_is_read_from_the_stored_report(done):
    study, admin, result = done
    page = pages.report_page(user=admin, study=study, phase="all", result=result)
    body = page.body
    assert isinstance(body.study_report, StudyReport)
    assert body.study_report == report_from_payload(result.result)
    assert body.report == result.result
    # Three raters scored all 8 summaries on "overall" (rated_study).
    assert {r.rater: r.n_rated for r in body.study_report.raters} == {
        f"{study.slug}-{name}": 8 for name in ("ra", "rb", "rc")
    }
    assert body.n_resamples == 20
    assert page.items_rated == "summaries" and page.computed_from[0] == "24 submitted ratings"
    assert [d.name for d in body.downloads] == list(FILE_NAMES)
    assert all(d.url.endswith(f"/{d.name}?phase=all") for d in body.downloads)
    assert not body.cites_factpico


def test_agreement_rows_carry_their_label_and_subject(done):
    study, admin, result = done
    body = pages.report_page(user=admin, study=study, phase="all", result=result).body
    overall = [row for row in body.agreement if row["question"] == "overall"]
    statistics = [row["statistic"] for row in overall]
    assert "krippendorff_alpha.ordinal" in statistics and "fleiss_kappa" in statistics
    assert all(row["subject"] == "overall" and row["label"] for row in overall)
    # The tick-box question's options are nominal: no ordinal figure for any of them.
    ticked = [row for row in body.agreement if row["question"] == "failure_modes"]
    assert ticked and not [row for row in ticked if row["statistic"] == "krippendorff_alpha.ordinal"]
    assert all(row["subject"].startswith("failure_modes: ") for row in ticked)


def test_the_systems_table_is_display_text(done):
    study, admin, result = done
    systems = pages.report_page(user=admin, study=study, phase="all", result=result).body.systems
    assert systems.headers[:3] == ("generator", "summaries", "rated")
    assert "ROUGE-L" in systems.headers
    for row in systems.rows:
        assert len(row) == len(systems.headers) and all(isinstance(cell, str) for cell in row)


def test_plots_not_yet_drawn_are_counted_as_pending(done):
    study, admin, result = done
    body = pages.report_page(user=admin, study=study, phase="all", result=result).body
    assert body.plots and body.plots_pending == len(body.plots)  # no plot drawn yet
    assert all(not p.drawn and p.url.endswith(".svg?phase=all") for p in body.plots)
    with_drawn = pages.report_body(result, study=study, phase="all", drawn=None)
    assert with_drawn.plots_pending == 0


def test_the_inputs_are_named_singular_or_plural():
    assert pages.computed_from({"ratings": 1, "summaries": 2, "claims": 0, "sources": 3}) == [
        "1 submitted rating",
        "2 summaries",
        "3 sources",
        "0 evaluator runs",
    ]
    assert pages.computed_from({"summaries": 1}, answers=True) == [
        "0 submitted ratings",
        "1 answer",
        "0 evaluator runs",
    ]


def test_long_tables_show_their_first_rows_and_name_the_file_with_all(done):
    from django.template.loader import render_to_string

    study, admin, result = done
    body = pages.report_page(user=admin, study=study, phase="all", result=result).body
    # Three raters: three pairs per agreement, all shown.
    assert body.cohen.total == len(body.cohen.rows) > 0 and body.cohen.hidden == 0
    assert body.cohen.url.endswith("/cohen_kappa.csv?phase=all")
    assert render_to_string("analysis/long_table_note.html", {"table": body.cohen}).strip() == ""

    rows = [{"n": i} for i in range(pages.PAGE_ROWS + 5)]
    table = pages._long_table(rows, "drift.csv", study, "?phase=all")
    assert table.rows == tuple(rows[: pages.PAGE_ROWS]) and table.total == pages.PAGE_ROWS + 5
    assert table.hidden == 5
    note = render_to_string("analysis/long_table_note.html", {"table": table})
    assert f"The first {pages.PAGE_ROWS} of {pages.PAGE_ROWS + 5} rows" in note
    assert f'href="/analysis/{study.slug}/download/drift.csv?phase=all"' in note
