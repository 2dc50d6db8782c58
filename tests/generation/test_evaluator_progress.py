"""The evaluators page follows a run's progress: done, running (its tables update), or
stopped before the end (its worker went away; starting it again resumes it)."""

from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.utils import timezone

from annotate.models import Study, Summary
from generation.models import EvaluationRun, EvaluationScore, JudgeAnswer, JudgeRun
from generation.selectors import evaluator_runs, run_state

pytestmark = pytest.mark.django_db


@pytest.fixture
def study(settings):
    settings.DEBUG, settings.DEMO_PASSWORD = True, ""
    call_command("load_demo")
    return Study.objects.get(slug="demo-factpico")


def test_run_state_by_hand():
    now = timezone.now()
    assert run_state(done=5, total=5, last_activity=now - timedelta(days=3), now=now, lease_seconds=600) == "done"
    assert run_state(done=2, total=5, last_activity=now - timedelta(seconds=600), now=now, lease_seconds=600) == (
        "running"
    )
    assert run_state(done=2, total=5, last_activity=now - timedelta(seconds=601), now=now, lease_seconds=600) == (
        "stopped"
    )
    assert run_state(done=0, total=5, last_activity=None, now=now, lease_seconds=600) == "stopped"


def test_the_page_reloads_while_a_run_is_in_progress_and_says_when_one_stopped(study, client, monkeypatch):
    monkeypatch.setenv("GENERATION_JOB_LEASE", "120")
    summaries = list(Summary.objects.filter(study=study).order_by("key"))
    run = EvaluationRun.objects.create(
        study=study,
        evaluator="factpico_fulltext",
        version="v1",
        config={},
        status="running",
        heartbeat_at=timezone.now(),
    )
    for summary in summaries[:3]:
        EvaluationScore.objects.create(run=run, summary=summary, name="population", value=2.0, status="ok")
    EvaluationScore.objects.create(run=run, summary=summaries[3], name="population", status="failed", error="x")
    judge = JudgeRun.objects.create(study=study, model="m", version="j1", config={}, status="done")
    for summary in summaries:
        JudgeAnswer.objects.create(run=judge, summary=summary, status="valid")

    now = timezone.now()
    page = evaluator_runs(study, now=now)
    assert [(r.scored, r.failed, r.state) for r in page["runs"]] == [(4, 1, "running")]
    assert [(r.judged, r.valid, r.state) for r in page["judge_runs"]] == [(len(summaries), len(summaries), "done")]
    assert page["active"] and page["n_summaries"] == len(summaries)

    client.force_login(get_user_model().objects.get(username="admin"))
    html = client.get(f"/studies/{study.slug}/evaluators/").content.decode()
    assert "js/evaluators.js" in html and 'id="evaluators-active"' in html
    assert "http-equiv" not in html  # the tables update in place; the page itself never reloads
    assert f"<td>4 of {len(summaries)}</td><td>1</td><td>running</td>" in html
    n = len(summaries)
    assert f"<td>{n} of {n}</td><td>{n}</td><td>0</td><td>0</td><td>done</td>" in html

    # The worker went away: no heartbeat for longer than RUN_LEASE (30 s by default).
    later = timezone.now() + timedelta(seconds=31)
    page = evaluator_runs(study, now=later)
    assert [r.state for r in page["runs"]] == ["died"] and not page["active"]
    EvaluationRun.objects.filter(pk=run.pk).update(heartbeat_at=timezone.now() - timedelta(seconds=31))
    html = client.get(f"/studies/{study.slug}/evaluators/").content.decode()
    assert "js/evaluators.js" not in html and 'id="evaluators-active"' not in html
    assert "stopped: the worker died</strong>; start it again to resume" in html
    # A run that ended before the study's last summary (a command's --limit) stopped before the end.
    EvaluationRun.objects.filter(pk=run.pk).update(status="done")
    assert (
        "stopped before the end: run it again to resume"
        in client.get(f"/studies/{study.slug}/evaluators/").content.decode()
    )
