"""An admin follows an evaluator's run on the Automatic evaluators page in a real browser:
the runs table updates in place while the run goes on (no reload: keyboard focus stays where
it was), and stops updating once the run is done. Works at 800 px wide."""

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from annotate.models import Summary
from generation.models import EvaluationRun, EvaluationScore
from tests.browser.conftest import log_in
from tests.factories import PASSWORD, StudyFactory, SummaryFactory, UserFactory

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_the_runs_table_follows_a_run_without_moving_the_keyboard_focus(page, settings, monkeypatch):
    settings.DEBUG = True
    # A worker is running it: its heartbeat stays fresh for the whole test, however slow.
    monkeypatch.setenv("RUN_LEASE", "3600")
    UserFactory(username="admin", is_staff=True, is_superuser=True)
    study = StudyFactory()
    summaries = [SummaryFactory(study=study, key=f"s{i}") for i in range(3)]
    run = EvaluationRun.objects.create(
        study=study,
        evaluator="factpico_fulltext",
        version="v1",
        config={},
        status=EvaluationRun.Status.RUNNING,
        heartbeat_at=timezone.now(),
    )
    EvaluationScore.objects.create(run=run, summary=summaries[0], name="population", value=2.0, status="ok")

    page.set_viewport_size({"width": 800, "height": 900})
    log_in(page, "admin", PASSWORD)
    page.goto(f"/studies/{study.slug}/evaluators/")
    rows = page.locator("#evaluation-runs tbody tr")
    expect(rows.first).to_contain_text("1 of 3")
    expect(rows.first).to_contain_text("running")
    button = page.get_by_role("button", name="Run reference")
    button.focus()
    page.evaluate("window.__sameDocument = true")  # gone if the page reloads

    for summary in Summary.objects.filter(pk__in=[s.pk for s in summaries[1:]]):
        EvaluationScore.objects.create(run=run, summary=summary, name="population", value=3.0, status="ok")
    EvaluationRun.objects.filter(pk=run.pk).update(status=EvaluationRun.Status.DONE)
    expect(rows.first).to_contain_text("3 of 3", timeout=120_000)
    expect(rows.first).to_contain_text("done")
    expect(page.locator("#evaluators-active")).to_have_count(0)
    assert page.evaluate("window.__sameDocument === true")
    expect(button).to_be_focused()
    # At 800 px the page does not scroll sideways.
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
