"""Test helpers for study reports, which are never computed in the request.

``compute_queued_reports`` is a worker's part for tests on the ``db`` fixture: their data
lives in a transaction that a background thread's connection cannot see, and their
``on_commit`` callbacks (the enqueue) never run. It runs the real service a worker runs
(analysis.services.run_study_report) on every queued report.
"""

from __future__ import annotations

from analysis import services
from analysis.models import AnalysisResult


def compute_queued_reports(*, plots: bool = False) -> int:
    """Compute every pending report, as a worker would; returns how many were computed.
    With `plots`, draw their plots too, as the worker's task does next (analysis.tasks);
    most tests leave them out: matplotlib takes seconds per report."""
    done = 0
    for pk in AnalysisResult.objects.filter(status=AnalysisResult.Status.PENDING).values_list("pk", flat=True):
        if services.run_study_report(result_id=pk) is not None:
            done += 1
            if plots:
                services.draw_missing_plots(result_id=pk)
    return done


def open_computed(client, url: str, *, plots: bool = False, **params):
    """Open a report page (or API) once to queue the report, compute it as a worker would
    (with its plots when asked), and open it again: the response with the finished report."""
    client.get(url, params or None)
    compute_queued_reports(plots=plots)
    return client.get(url, params or None)


def rated_study(*, n_summaries: int = 12, raters: tuple[str, ...] = ("ra", "rb", "rc"), seed: int = 5):
    """A LitSumm-rubric study of its own (not the demo, whose shape other work changes):
    every rater scores every summary with seeded answers. Returns (study, admin user)."""
    import random

    from annotate.models import StudyMembership
    from annotate.services.members import add_study_member
    from annotate.services.ratings import submit_rating
    from tests.factories import AssignmentFactory, StudyFactory, SummaryFactory, UserFactory

    rng = random.Random(seed)
    study = StudyFactory()
    admin = UserFactory(username=f"{study.slug}-admin")
    add_study_member(study=study, user=admin, role=StudyMembership.Role.ADMIN)
    users = [UserFactory(username=f"{study.slug}-{name}") for name in raters]
    for user in users:
        add_study_member(study=study, user=user, role=StudyMembership.Role.RATER)
    for _ in range(n_summaries):
        summary = SummaryFactory(source__study=study)
        for user in users:
            assignment = AssignmentFactory(summary=summary, rater=user)
            submit_rating(
                assignment=assignment,
                rater=user,
                answers={"overall": rng.randint(1, 5), "failure_modes": [], "feedback": "Fine."},
                version=assignment.version,
            )
    return study, admin


def change_first_rating(study) -> None:
    """Reopen the study's first rating and submit a different answer: a rating replaced,
    not added (what makes a computed report stale)."""
    from annotate.models import Assignment
    from annotate.services.ratings import reopen_rating, submit_rating

    assignment = Assignment.objects.filter(study=study).order_by("pk").first()
    reopen_rating(assignment=assignment, rater=assignment.rater, version=assignment.version)
    assignment.refresh_from_db()
    submit_rating(
        assignment=assignment,
        rater=assignment.rater,
        answers={"overall": 1, "failure_modes": [], "feedback": "Changed my mind."},
        version=assignment.version,
    )
