"""A lab's principal investigator, in Chromium, reads which system is better and how sure
the report is: the per-system table with intervals and every two systems paired,
and the consensus answers after adjudication beside the raters'."""

import pytest

from analysis import services
from annotate.services.adjudication import record_consensus
from tests.analysis.test_report_compare_systems import study_with_systems  # noqa: F401 (a fixture)
from tests.browser.conftest import log_in
from tests.factories import PASSWORD

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_the_report_compares_the_systems_with_intervals(page, monkeypatch, study_with_systems):  # noqa: F811
    monkeypatch.setattr(services, "BOOTSTRAP_RESAMPLES", 200)
    study, admin, batch, summaries = study_with_systems
    record_consensus(
        batch=batch, summary=summaries["beta", "abs-5"], question="overall", value=3, rationale="", decided_by=admin
    )
    page.set_default_timeout(240_000)  # a generous wait for each condition on a loaded machine
    log_in(page, admin.username, PASSWORD)
    page.goto(f"/analysis/{study.slug}/")
    page.get_by_role("heading", name="Systems compared, with intervals").wait_for()

    by_generator = page.locator("table.compare-groups[data-field=generator][data-question=overall]")
    rows = by_generator.locator("tbody tr")
    assert rows.count() == 3
    alpha = rows.filter(has_text="alpha").locator("td")
    # summaries, mean, interval, SD, median, IQR
    assert [alpha.nth(i).inner_text() for i in (0, 1, 2, 5)] == ["alpha", "6", "4.50", "4.50"]
    assert alpha.nth(3).inner_text().startswith("[") and alpha.nth(6).inner_text() == "1.00 (4.00–5.00)"

    pairs = page.locator("table.compare-pairs[data-field=generator][data-question=overall] tbody tr")
    assert pairs.count() == 3
    first = pairs.first.locator("td")
    assert [first.nth(i).inner_text() for i in (0, 1, 2, 5)] == ["alpha", "beta", "6", "1.83"]  # 11/6

    page.get_by_role("heading", name="After adjudication").wait_for()
    decision = page.locator("#adjudicated-items tbody tr")
    assert decision.count() == 1
    assert (
        decision.locator("td").nth(3).inner_text() == "rater-one: 1"
        and decision.locator("td").nth(4).inner_text() == "3"
    )
    beta = page.locator("#adjudicated-by-system tbody tr", has_text="beta").locator("td")
    # beta: 3 5 3 2 2 1 -> 16/6 = 2.67; abs-5 decided 3 -> 18/6 = 3.00.
    assert (beta.nth(3).inner_text(), beta.nth(5).inner_text()) == ("2.67", "3.00")
