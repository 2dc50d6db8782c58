"""The study report is never served for data that changed.

Each change below is made through the code path a user's action takes (a rating submitted,
a summary generated or imported, an evaluator or the rubric judge run, claims verified, a
question's gold answer imported again, a consensus answer recorded after adjudication, the
study moved to a new rubric version, a batch made a calibration batch, a new report version,
a rater's answers excluded by an admin).
After each, the report page must queue a new report, and the new report must be computed
from the changed data."""

from __future__ import annotations

import json

import pytest
from django.urls import reverse

from analysis import selectors
from analysis.models import AnalysisResult
from annotate.models import Assignment, Batch
from annotate.services.rubrics import builtin_rubric_path, load_rubric, read_rubric_file
from annotate.services.summaries import create_summary, record_claims
from datasets.importing import import_records
from generation.evaluators import run_evaluation
from generation.judging import run_judge
from literature.importing import import_questions, read_rows
from tests.analysis.reports import change_first_rating, compute_queued_reports, rated_study
from tests.generation.scripted_server import Reply
from tests.planning.plans import pointwise_plan

# Not transactional: the page's enqueue waits for a commit that never comes, and
# compute_queued_reports plays the worker.
pytestmark = pytest.mark.django_db


@pytest.fixture
def study_and_client(client):
    study, admin = rated_study(n_summaries=4, raters=("ra", "rb"))
    client.force_login(admin)
    client.admin = admin
    return study, client


def report_of(client, study) -> AnalysisResult:
    """Open the report page, compute what it queued as a worker would, and return the report
    the page now shows (done)."""
    url = reverse("analysis:report", args=[study.slug])
    client.get(url)
    compute_queued_reports()
    assert client.get(url).status_code == 200
    result = AnalysisResult.objects.get(study=study, phase="all")
    assert result.status == AnalysisResult.Status.DONE, result.error
    return result


def a_new_rating(study, serve):
    change_first_rating(study)
    return lambda before, after: after["n_answers"] == before["n_answers"]  # a rating replaced, not added


def a_generated_summary(study, serve):
    source = study.sources.order_by("key").first()
    create_summary(study=study, source=source, key="generated-1", text="Drug A worked [x].", generator="model-b")
    return lambda before, after: after["n_summaries"] == before["n_summaries"] + 1


def an_import(study, serve):
    lines = [
        json.dumps({"type": "source", "study": study.slug, "key": "imported", "text": "New trial. It worked."}),
        json.dumps(
            {
                "type": "summary",
                "study": study.slug,
                "source": "imported",
                "key": "imported-1",
                "text": "It worked.",
                "generator": "m",
            }
        ),
    ]
    import_records(lines=lines, only_study=study.slug)
    return lambda before, after: after["n_summaries"] == before["n_summaries"] + 1


def a_reference_evaluator_run(study, serve):
    run_evaluation(study=study, evaluator_name="reference")
    n = study.summaries.count()
    return lambda before, after: (before["reference_metrics"]["stored"], after["reference_metrics"]["stored"]) == (0, n)


def a_rubric_judge_run(study, serve):
    serve(steps={"rubric_judge": [lambda request: Reply(json.dumps({"answers": {"overall": 3, "feedback": "ok"}}))]})
    run_judge(study=study)
    return lambda before, after: not before["judges"] and after["judges"]


def claims_and_their_verdicts(study, serve):
    summary = study.summaries.order_by("key").first()
    claim = {"text": summary.text, "start": 0, "end": len(summary.text), "refs": [], "verdict": "unverified"}
    record_claims(summary=summary, claims=[claim])
    return lambda before, after: True  # the claims' verdicts are checked apart below


def a_new_gold_answer(study, serve):
    rows = read_rows("key,question,gold_answer\nq1,Does drug A work?,It does.\n", name="questions.csv")
    import_questions(study=study, rows=rows)
    return lambda before, after: True


def a_new_rubric_version(study, serve):
    raw = read_rubric_file(builtin_rubric_path("litsumm"))
    raw["title"] = raw["title"] + " (revised wording)"
    study.rubric = load_rubric(definition=raw)
    study.save()
    return lambda before, after: True


def a_batch_made_calibration(study, serve):
    batch = Batch.objects.create(study=study, name="pilot", seed=1)
    Assignment.objects.filter(study=study).update(batch=batch)
    batch.kind = Batch.Kind.CALIBRATION
    batch.save()
    return lambda before, after: after["n_answers"] == 0  # calibration batches are left out


def a_consensus_answer(study, serve):
    from annotate.services.adjudication import record_consensus

    batch = Batch.objects.create(study=study, name="main", seed=1)
    Assignment.objects.filter(study=study).update(batch=batch)
    summary = study.summaries.order_by("key").first()
    admin = study.memberships.filter(role="admin").first().user
    record_consensus(batch=batch, summary=summary, question="overall", value=1, rationale="", decided_by=admin)
    return lambda before, after: (
        (
            before["after_adjudication"]["n_decisions"],
            after["after_adjudication"]["n_decisions"],
        )
        == (0, 1)
    )


def a_rater_excluded(study, serve):
    from annotate.services.monitoring import exclude_rater

    batch = Batch.objects.create(study=study, name="main", seed=1)
    Assignment.objects.filter(study=study).update(batch=batch)
    admin = study.memberships.filter(role="admin").first().user
    rater = Assignment.objects.filter(study=study).order_by("rater__username").last().rater
    exclude_rater(batch=batch, rater=rater, excluded_by=admin, reason="Straight-lined every item.")
    # Two raters rated every summary: without one of them half the answers are left.
    return lambda before, after: after["n_answers"] * 2 == before["n_answers"]


def a_protocol_frozen(study, serve):
    from planning.services import freeze_protocol

    admin = study.memberships.filter(role="admin").first().user
    plan = pointwise_plan(planned_n=100)
    protocol = freeze_protocol(study=study, by=admin, plan=plan)
    return lambda before, after: before.get("protocol") is None and after["protocol"]["sha256"] == protocol.sha256


CHANGES = [
    a_protocol_frozen,
    a_rater_excluded,
    a_new_rating,
    a_consensus_answer,
    a_generated_summary,
    an_import,
    a_reference_evaluator_run,
    a_rubric_judge_run,
    claims_and_their_verdicts,
    a_new_gold_answer,
    a_new_rubric_version,
    a_batch_made_calibration,
]


@pytest.mark.parametrize("change", CHANGES, ids=[c.__name__ for c in CHANGES])
def test_each_input_of_the_report_gives_a_new_report(change, study_and_client, serve):
    study, client = study_and_client
    old = report_of(client, study)
    before = old.result
    check = change(study, serve)
    study.refresh_from_db()
    assert selectors.report_inputs(study=study, phase="all").fingerprint != old.fingerprint
    new = report_of(client, study)
    assert new.pk != old.pk and new.computed_at > old.computed_at
    assert not AnalysisResult.objects.filter(pk=old.pk).exists()  # the stale report is gone
    assert check(before, new.result)


def test_a_claims_verdict_changing_gives_a_new_report(study_and_client):
    study, client = study_and_client
    summary = study.summaries.order_by("key").first()
    claim = {"text": summary.text, "start": 0, "end": len(summary.text), "refs": [], "verdict": "unverified"}
    record_claims(summary=summary, claims=[claim])
    old = report_of(client, study)
    record_claims(summary=summary, claims=[{**claim, "verdict": "not_supported", "probability": 0.1}])
    new = report_of(client, study)
    assert new.pk != old.pk


def test_a_question_gold_answer_changing_gives_a_new_report(study_and_client):
    study, client = study_and_client
    import_questions(study=study, rows=read_rows("key,question,gold_answer\nq1,Q?,Yes.\n", name="q.csv"))
    old = report_of(client, study)
    import_questions(study=study, rows=read_rows('key,question,gold_answer\nq1,Q?,"No, it does not."\n', name="q.csv"))
    new = report_of(client, study)
    assert new.pk != old.pk


def test_a_new_report_version_gives_a_new_report(study_and_client, monkeypatch):
    study, client = study_and_client
    old = report_of(client, study)
    monkeypatch.setattr(selectors, "REPORT_VERSION", selectors.REPORT_VERSION + 1)
    new = report_of(client, study)
    assert new.pk != old.pk and new.fingerprint.startswith(f"v{selectors.REPORT_VERSION}:")


def test_nothing_changed_nothing_recomputed(study_and_client):
    study, client = study_and_client
    old = report_of(client, study)
    client.get(reverse("analysis:report", args=[study.slug]))
    assert compute_queued_reports() == 0
    assert AnalysisResult.objects.get(study=study).pk == old.pk


def test_the_page_says_when_and_from_what_it_was_computed(study_and_client):
    study, client = study_and_client
    result = report_of(client, study)
    page = client.get(reverse("analysis:report", args=[study.slug])).content.decode()
    assert result.inputs["ratings"] == 8 and result.inputs["summaries"] == 4
    assert "from 8 submitted ratings, 4 summaries, 4 sources, 0 evaluator runs." in page
    assert f'datetime="{result.computed_at.isoformat()}' in page or result.computed_at.strftime("%H:%M") in page


def test_recompute_is_for_study_admins_by_post_with_csrf(study_and_client):
    from django.test import Client

    from annotate.models import StudyMembership
    from annotate.services.members import add_study_member
    from tests.factories import UserFactory

    study, client = study_and_client
    old = report_of(client, study)
    url = reverse("analysis:recompute", args=[study.slug])
    # A viewer may read the report but not recompute it; nobody may by GET.
    viewer = UserFactory(username="viewer-1")
    add_study_member(study=study, user=viewer, role=StudyMembership.Role.VIEWER)
    as_viewer = Client()
    as_viewer.force_login(viewer)
    assert as_viewer.get(reverse("analysis:report", args=[study.slug])).status_code == 200
    assert "Recompute" not in as_viewer.get(reverse("analysis:report", args=[study.slug])).content.decode()
    assert as_viewer.post(url, {"phase": "all"}).status_code == 404
    assert client.get(url).status_code == 405
    # Without the CSRF token, refused.
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(client.admin)
    assert strict.post(url, {"phase": "all"}).status_code == 403
    assert AnalysisResult.objects.get(pk=old.pk).status == AnalysisResult.Status.DONE
    # The admin's POST puts it back to be computed, with its plots gone, and a worker computes it anew.
    response = client.post(url, {"phase": "all"})
    assert response.status_code == 302
    again = AnalysisResult.objects.get(pk=old.pk)
    assert again.status == AnalysisResult.Status.PENDING and not again.plots.exists()
    assert compute_queued_reports() == 1
    again.refresh_from_db()
    assert again.status == AnalysisResult.Status.DONE and again.computed_at > old.computed_at
    assert again.result == old.result  # the same inputs give the same report (seeded bootstrap)
