"""The study report page: access, caching until new ratings arrive, computing off the
request with progress, plots and downloads. The page never computes: these tests on the
``db`` fixture queue a report by opening the page, then run the worker's service
(tests.analysis.reports.compute_queued_reports); test_report_background follows the real
background thread."""

from __future__ import annotations

import csv
import html as html_module
import io
import re
import xml.etree.ElementTree as ET

import pytest
from django.core.management import call_command
from django.urls import reverse

from analysis import services
from analysis.models import AnalysisResult
from analysis.plots import HISTOGRAM_PANELS, histogram_figure
from annotate.models import Assignment, Study
from datasets.demo import DEMO_STUDY
from tests.analysis.reports import change_first_rating, compute_queued_reports, open_computed
from tests.analysis.test_analyze_study import rate_demo

REPORT_URL = reverse("analysis:report", args=[DEMO_STUDY])


@pytest.fixture(autouse=True)
def few_resamples(monkeypatch):
    # The page's statistics are tested in test_analyze_study; 1,000 resamples only cost time here.
    monkeypatch.setattr(services, "BOOTSTRAP_RESAMPLES", 30)


@pytest.fixture
def rated_demo(db):
    call_command("load_demo", stdout=io.StringIO())
    rate_demo()
    return Study.objects.get(slug=DEMO_STUDY)


@pytest.fixture
def staff_client(client, rated_demo):
    from django.contrib.auth import get_user_model

    client.force_login(get_user_model().objects.get(username="admin"))
    return client


def test_anonymous_users_are_sent_to_login(client, rated_demo):
    response = client.get(REPORT_URL)
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))


def test_raters_are_refused(client, rated_demo):
    from django.contrib.auth import get_user_model

    client.force_login(get_user_model().objects.get(username="rater1"))
    # A rater gets 404, as on every study page: the report does not even admit the study exists.
    assert client.get(REPORT_URL).status_code == 404
    assert client.get(reverse("analysis:download", args=[DEMO_STUDY, "metrics.csv"])).status_code == 404
    assert DEMO_STUDY not in client.get(reverse("analysis:studies")).content.decode()


@pytest.mark.django_db
def test_study_viewers_see_the_report(client, rated_demo):
    from annotate.models import Study, StudyMembership
    from annotate.services.members import add_study_member
    from tests.factories import UserFactory

    viewer = UserFactory(username="viewer")
    add_study_member(study=Study.objects.get(slug=DEMO_STUDY), user=viewer, role=StudyMembership.Role.VIEWER)
    client.force_login(viewer)
    assert client.get(REPORT_URL).status_code == 200


def test_staff_see_agreement_distributions_failure_modes_and_plots(staff_client):
    response = open_computed(staff_client, REPORT_URL, plots=True)
    assert response.status_code == 200
    html = response.content.decode()
    for text in ("Agreement", "krippendorff_alpha.ordinal", "rater1 – rater2", "95% CI", "Answers with options",
                 "Reference misattribution", "Spearman", "rouge1", "histogram of overall"):  # fmt: skip
        assert text in html, text
    # Statistics named as people read them (the issue's own wording), with a note, and the
    # table downloadable as CSV.
    text = html_module.unescape(html)
    assert "Krippendorff's α (ordinal)" in text and "Fleiss' κ" in text and "Gwet's AC1" in text
    assert "a 4 against a 5 disagrees less than a 1 against a 5" in text
    csv_url = reverse("analysis:download", args=[DEMO_STUDY, "agreement.csv"]) + "?phase=all"
    assert f'href="{csv_url}"' in html
    rows = list(csv.DictReader(io.StringIO(staff_client.get(csv_url).content.decode())))
    assert "krippendorff_alpha.ordinal" in {r["statistic"] for r in rows}
    result = AnalysisResult.objects.get()
    assert result.status == AnalysisResult.Status.DONE and result.phase == "all"
    ordinal = result.result["agreement"][0]["report"]["krippendorff_alpha"]["ordinal"]
    assert f"{ordinal:.3f}" in html
    # Every metric against every scale question (LitSumm has one, "overall", and the avg).
    meta = result.result["meta_evaluation"]
    assert meta["questions"] == ["overall", "avg"] and 'id="h-meta"' in html
    cell = meta["summary_level"]["rouge1"]["overall"]
    if cell["kendall_tau_b"] is not None:
        interval = f" [{cell['ci_low']:.3f}, {cell['ci_high']:.3f}]" if cell.get("ci_low") is not None else ""
        assert f"{cell['kendall_tau_b']:.3f} ({cell['spearman_rho']:.3f}){interval}; n={cell['n']}" in html


def test_cached_page_is_bounded_in_queries_and_does_not_recompute(staff_client, django_assert_max_num_queries):
    open_computed(staff_client, REPORT_URL, plots=True)
    first = AnalysisResult.objects.get()
    with django_assert_max_num_queries(6):
        response = staff_client.get(REPORT_URL)
    assert response.status_code == 200
    assert AnalysisResult.objects.get().pk == first.pk


def test_the_rendered_report_is_kept_and_its_payload_not_read_again(staff_client, rated_demo):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    def page(response) -> str:  # without the form's CSRF token, masked anew each time
        return re.sub(r'name="csrfmiddlewaretoken" value="[^"]*"', "", response.content.decode())

    first = page(open_computed(staff_client, REPORT_URL, plots=True))
    assert AnalysisResult.objects.get().plots_done_at is not None  # every plot drawn: the body is kept
    with CaptureQueriesContext(connection) as queries:
        again = page(staff_client.get(REPORT_URL))
    assert again == first and 'id="h-agreement"' in again
    assert not [q["sql"] for q in queries if '"result"' in q["sql"] and "analysis_analysisresult" in q["sql"]]
    # Another report (a rating changed) is rendered anew.
    change_first_rating(rated_demo)
    newer = page(open_computed(staff_client, REPORT_URL, plots=True))
    assert newer != first and 'id="h-agreement"' in newer


def test_a_new_rating_invalidates_the_cached_report(staff_client, rated_demo):
    open_computed(staff_client, REPORT_URL)
    old = AnalysisResult.objects.get()
    change_first_rating(rated_demo)
    open_computed(staff_client, REPORT_URL)
    new = AnalysisResult.objects.get()  # the stale one is gone
    assert new.pk != old.pk and new.fingerprint != old.fingerprint
    assert new.status == AnalysisResult.Status.DONE


def test_phases_are_cached_separately_and_an_empty_phase_says_why(staff_client):
    response = open_computed(staff_client, REPORT_URL, phase="post_discussion")
    assert response.status_code == 200
    assert "at least 2 raters" in response.content.decode()
    staff_client.get(REPORT_URL, {"phase": "initial"})
    assert sorted(AnalysisResult.objects.values_list("phase", flat=True)) == ["initial", "post_discussion"]
    assert staff_client.get(REPORT_URL, {"phase": "bogus"}).status_code == 404


def test_the_page_queues_the_report_and_shows_progress(staff_client, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        response = staff_client.get(REPORT_URL)
    html = response.content.decode()
    assert "Computing the report" in html and 'id="report-progress"' in html and "/static/js/report.js" in html
    progress_url = reverse("analysis:progress", args=[DEMO_STUDY])
    assert f'data-progress-url="{progress_url}?phase=all"' in html
    assert AnalysisResult.objects.get().status == AnalysisResult.Status.PENDING
    assert len(callbacks) == 1  # the enqueue, once the request's transaction commits
    polled = staff_client.get(progress_url, {"phase": "all"})
    assert polled.json() == {"status": "pending", "progress": 0} and polled["Cache-Control"] == "no-store"
    assert compute_queued_reports() == 1  # what the queued worker does
    assert staff_client.get(progress_url, {"phase": "all"}).json() == {"status": "done", "progress": 100}
    assert "Computing the report" not in staff_client.get(REPORT_URL).content.decode()


def test_the_progress_endpoint_follows_the_page_access_rules(client, rated_demo):
    from django.contrib.auth import get_user_model

    progress_url = reverse("analysis:progress", args=[DEMO_STUDY])
    assert client.get(progress_url).status_code == 302
    client.force_login(get_user_model().objects.get(username="rater1"))
    assert client.get(progress_url).status_code == 404
    assert not AnalysisResult.objects.exists()


def test_a_redelivered_task_does_nothing(staff_client):
    open_computed(staff_client, REPORT_URL)
    result = AnalysisResult.objects.get()
    assert services.run_study_report(result_id=result.pk) is None
    assert AnalysisResult.objects.get().status == AnalysisResult.Status.DONE


def test_plots_are_served_as_svg_and_png(staff_client):
    open_computed(staff_client, REPORT_URL, plots=True)
    svg = staff_client.get(reverse("analysis:plot", args=[DEMO_STUDY, "scatter", "rouge1", "svg"]))
    assert svg.status_code == 200 and svg["Content-Type"] == "image/svg+xml"
    assert ET.fromstring(svg.content).tag.endswith("svg")
    png = staff_client.get(reverse("analysis:plot", args=[DEMO_STUDY, "histogram", "overall", "png"]))
    assert png["Content-Type"] == "image/png" and png.content.startswith(b"\x89PNG")
    assert staff_client.get(reverse("analysis:plot", args=[DEMO_STUDY, "scatter", "nope", "svg"])).status_code == 404
    assert staff_client.get(reverse("analysis:plot", args=[DEMO_STUDY, "scatter", "rouge1", "gif"])).status_code == 404


def test_downloads_are_the_report_files(staff_client):
    open_computed(staff_client, REPORT_URL)
    response = staff_client.get(reverse("analysis:download", args=[DEMO_STUDY, "histograms.csv"]))
    assert response.status_code == 200
    assert "attachment" in response["Content-Disposition"]
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert sum(int(r["count"]) for r in rows) == 24  # 2 raters x 12 items of the demo's main batch
    assert staff_client.get(reverse("analysis:download", args=[DEMO_STUDY, "secrets.txt"])).status_code == 404


@pytest.mark.parametrize("n_raters", [1, HISTOGRAM_PANELS + 1])  # bar charts, then a heat map
def test_plot_text_from_data_never_becomes_svg_markup(n_raters):
    # Text is drawn as glyph paths; matplotlib only repeats it, escaped, in an XML comment.
    name = "--><script>alert(1)</script><!-- $x$"
    raters = [{"rater": f"{name}{i}", "counts": [1, 2]} for i in range(n_raters)]
    report = {"histograms": [{"question": "overall", "scale": [1, 2], "raters": raters}]}
    svg = histogram_figure(report, "overall", ["svg"])["svg"]
    assert b"<script" not in svg
    root = ET.fromstring(svg)
    assert not [element for element in root.iter() if element.tag.rsplit("}", 1)[-1] in ("script", "foreignObject")]
    assert not [element for element in root.iter() if any(k.startswith("on") for k in element.attrib)]


def test_csv_downloads_quote_formula_text_and_keep_numbers(staff_client, rated_demo):
    # Usernames and summary keys reach the report's CSV files; "@" and "-" are allowed in
    # Django usernames, and an account can be renamed to anything in the database. A CR
    # inside a cell must be quoted, or readers end the row there and "=2+2" starts one.
    from django.contrib.auth import get_user_model

    from annotate.models import Summary
    from core.csv_cells import original_text

    users = get_user_model().objects
    users.filter(username="rater1").update(username="@SUM(1+1)*cmd\r=2+2")
    users.filter(username="rater2").update(username='=HYPERLINK("http://evil.example","x")')
    summary = Summary.objects.filter(study=rated_demo, assignments__batch__name="main").order_by("key").first()
    Summary.objects.filter(pk=summary.pk).update(key="-1+1")
    open_computed(staff_client, REPORT_URL)

    def download(name):
        response = staff_client.get(reverse("analysis:download", args=[DEMO_STUDY, name]))
        assert response.status_code == 200 and response["Content-Type"].startswith("text/csv")
        return list(csv.reader(io.StringIO(response.content.decode(), newline="")))

    negatives = 0
    for name in ("agreement.csv", "cohen_kappa.csv", "histograms.csv", "item_means.csv", "option_counts.csv",
                 "metrics.csv", "correlation.csv", "by_group.csv"):  # fmt: skip
        for row in download(name):
            for cell in row:
                assert cell[:1] not in ("=", "+", "@", "\t", "\r"), (name, cell)
                if cell.startswith("-"):
                    float(cell)  # only a number may start with a minus sign
                    negatives += 1
    assert negatives > 0  # the demo's agreement has negative statistics, written as numbers

    raters = {row[1] for row in download("histograms.csv")[1:]}
    assert raters == {"'@SUM(1+1)*cmd\r=2+2", '\'=HYPERLINK("http://evil.example","x")'}
    assert {original_text(r) for r in raters} == {"@SUM(1+1)*cmd\r=2+2", '=HYPERLINK("http://evil.example","x")'}
    assert "'-1+1" in {row[2] for row in download("item_means.csv")[1:]}
    # The JSON downloads keep the exact text.
    report = staff_client.get(reverse("analysis:download", args=[DEMO_STUDY, "report.json"])).json()
    assert "@SUM(1+1)*cmd\r=2+2" in {r["rater"] for h in report["histograms"] for r in h["raters"]}


@pytest.mark.django_db
def test_a_question_study_report_counts_answers_not_summaries(client, settings):
    """The report of the questions demo said "summaries" of its rated answers."""
    from django.contrib.auth import get_user_model

    from literature.demo import QUESTION_STUDY

    settings.DEBUG = True
    call_command("load_question_demo", "--with-answers", stdout=io.StringIO())
    study = Study.objects.get(slug=QUESTION_STUDY)
    client.force_login(get_user_model().objects.get(username="admin"))
    page = open_computed(client, reverse("analysis:report", args=[study.slug])).content.decode()
    rated = Assignment.objects.filter(study=study, state="submitted").values("summary").distinct().count()
    assert f"{rated} of {study.summaries.count()} answers rated by 2 raters" in page
    assert "summaries rated" not in page
    assert f"submitted ratings, {study.summaries.count()} answers, " in page  # the "computed from" line
    # The report leads back to its study.
    assert f'href="/studies/{study.slug}/" id="back-to-study"' in page
