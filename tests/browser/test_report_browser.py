"""The report page in a real Chromium: opened with nothing cached, it answers at
once with a progress bar, static/js/report.js follows the background computation through
the progress endpoint (under the CSP), and the page shows the report when it is done."""

import pytest

from analysis import services
from analysis.models import AnalysisResult
from tests.analysis.reports import rated_study
from tests.factories import PASSWORD

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_the_report_page_shows_progress_then_the_report(page, monkeypatch):
    # Enough resamples that the computation outlasts the first paint and the first polls.
    monkeypatch.setattr(services, "BOOTSTRAP_RESAMPLES", 1_000)
    study, admin = rated_study()
    refused: list[str] = []
    page.on("console", lambda m: refused.append(m.text) if "Content Security Policy" in m.text else None)
    page.goto("/accounts/login/")
    page.get_by_label("Username").fill(admin.username)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_function("() => !location.pathname.startsWith('/accounts/login')", timeout=30_000)

    page.goto(f"/analysis/{study.slug}/")
    page.get_by_role("heading", name="Computing the report").wait_for(timeout=30_000)
    assert page.locator("#report-progress").is_visible()
    # The script moves the bar as the background thread reports progress ...
    page.wait_for_function(
        "() => { const b = document.getElementById('report-progress'); return !b || b.value > 0; }",
        timeout=120_000,
    )
    # ... and reloads the page into the report once it is done.
    page.get_by_role("heading", name="Agreement", exact=True).wait_for(timeout=180_000)
    assert page.get_by_role("heading", name="Computing the report").count() == 0
    assert AnalysisResult.objects.get().status == AnalysisResult.Status.DONE
    assert refused == []


def test_the_report_says_when_it_was_computed_and_a_study_admin_can_recompute_it(page, monkeypatch):
    monkeypatch.setattr(services, "BOOTSTRAP_RESAMPLES", 100)
    study, admin = rated_study(n_summaries=6, raters=("ra", "rb"))
    refused: list[str] = []
    page.on("console", lambda m: refused.append(m.text) if "Content Security Policy" in m.text else None)
    page.set_default_timeout(240_000)  # a generous wait for each condition on a loaded machine
    page.goto("/accounts/login/")
    page.get_by_label("Username").fill(admin.username)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_function("() => !location.pathname.startsWith('/accounts/login')")

    page.goto(f"/analysis/{study.slug}/")
    page.get_by_role("heading", name="Agreement", exact=True).wait_for()
    computed = page.locator("#computed-at")
    assert "from 12 submitted ratings, 6 summaries, 6 sources, 0 evaluator runs" in computed.inner_text()
    first = computed.locator("time").get_attribute("datetime")
    # The worker draws the plots after the numbers; the page swaps them in as they come.
    page.wait_for_function("() => !document.querySelector('#report-plots[data-pending]')")
    assert page.locator("#report-plots figure.pending").count() == 0
    image = page.locator("#report-plots img").first
    image.scroll_into_view_if_needed()
    page.wait_for_function("(img) => img.complete && img.naturalWidth > 0", arg=image.element_handle())

    # Recompute: the same page follows the new computation to a newer report.
    page.get_by_role("button", name="Recompute").click()
    # The message and its copy in the live region (static/js/announce.js): the first is the message.
    page.get_by_text("The report is being computed again").first.wait_for()
    page.get_by_role("heading", name="Agreement", exact=True).wait_for()
    second = page.locator("#computed-at time").get_attribute("datetime")
    assert second > first
    result = AnalysisResult.objects.get()
    assert result.status == AnalysisResult.Status.DONE and result.computed_at.isoformat() == second
    assert refused == []
