"""An existing database upgrades without losing anything: from the schema of the last
release (the migrations below) to the current one, on SQLite and PostgreSQL alike.

The rows are written with the historical models of the old schema, the way a
database of that release holds them, then every migration since is applied."""

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

# The newest migration of each app in the last release (stop 10, before the datasets app).
RELEASED = [
    ("annotate", "0005_assisted_condition"),
    ("generation", "0001_initial"),
    ("analysis", "0001_initial"),
]


def _executor() -> MigrationExecutor:
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    return executor


@pytest.mark.django_db(transaction=True)
def test_a_database_of_the_last_release_upgrades_with_its_ratings_intact():
    executor = _executor()
    latest = executor.loader.graph.leaf_nodes()
    executor.migrate(RELEASED)
    try:
        old = _executor().loader.project_state(RELEASED).apps
        User = old.get_model("auth", "User")
        rater = User.objects.create(username="old-rater")
        rubric = old.get_model("annotate", "Rubric").objects.create(
            key="litsumm", version=1, title="LitSumm", definition={"questions": []}, content_hash="h"
        )
        study = old.get_model("annotate", "Study").objects.create(slug="old", title="Old study", rubric=rubric)
        source = old.get_model("annotate", "Source").objects.create(study=study, key="S1", text="A source.")
        summary = old.get_model("annotate", "Summary").objects.create(
            study=study, source=source, key="S1-a", text="A summary."
        )
        assignment = old.get_model("annotate", "Assignment").objects.create(
            study=study, summary=summary, rater=rater, position=0, state="submitted"
        )
        revision = old.get_model("annotate", "Revision").objects.create(
            assignment=assignment, number=1, status="submitted", rubric=rubric, submitted_at=timezone.now()
        )
        rating = old.get_model("annotate", "Rating").objects.create(
            revision=revision, question="overall", score=4, value=4, scale_min=1, scale_max=5
        )
        old.get_model("annotate", "Rationale").objects.create(rating=rating, text="Kept as written.")
        old.get_model("analysis", "AnalysisResult").objects.create(
            study=study, phase="all", fingerprint="f", n_revisions=1, status="done", result={"ok": True}
        )
        before = {
            "rating": (rating.uuid, rating.score, rating.value),
            "revision": (revision.uuid, revision.status),
            "assignment": (assignment.uuid, assignment.state),
        }
    finally:
        _executor().migrate(latest)

    from analysis.models import AnalysisResult
    from annotate.models import Assignment, Rating, Revision

    rating = Rating.objects.select_related("rationale").get(uuid=before["rating"][0])
    assert (rating.uuid, rating.score, rating.value) == before["rating"]
    assert rating.rationale.text == "Kept as written."
    assert (lambda r: (r.uuid, r.status))(Revision.objects.get(uuid=before["revision"][0])) == before["revision"]
    assert (lambda a: (a.uuid, a.state))(Assignment.objects.get(uuid=before["assignment"][0])) == before["assignment"]
    assert AnalysisResult.objects.get(study__slug="old").result == {"ok": True}
    assert not _executor().migration_plan(latest), "every migration is applied after the upgrade"


@pytest.mark.django_db(transaction=True)
def test_duplicate_assignments_are_withdrawn_not_deleted_by_the_upgrade():
    """annotate 0006: of a rater's live assignments of one summary, the one with the most
    work stays live and the others are withdrawn, with every revision kept."""
    executor = _executor()
    latest = executor.loader.graph.leaf_nodes()
    executor.migrate(RELEASED)
    try:
        old = _executor().loader.project_state(RELEASED).apps
        rater = old.get_model("auth", "User").objects.create(username="dup-rater")
        rubric = old.get_model("annotate", "Rubric").objects.create(
            key="litsumm", version=1, title="LitSumm", definition={"questions": []}, content_hash="h"
        )
        study = old.get_model("annotate", "Study").objects.create(slug="dup", title="Dup", rubric=rubric)
        source = old.get_model("annotate", "Source").objects.create(study=study, key="S", text="A source.")
        Summary = old.get_model("annotate", "Summary")
        one = Summary.objects.create(study=study, source=source, key="one", text="One.")
        two = Summary.objects.create(study=study, source=source, key="two", text="Two.")
        Batch = old.get_model("annotate", "Batch")
        first = Batch.objects.create(study=study, name="first", seed=0, raters_per_item=1)
        second = Batch.objects.create(study=study, name="second", seed=0, raters_per_item=1)
        Assignment = old.get_model("annotate", "Assignment")
        # "one": submitted in the first batch, pending again in the second: the submitted one stays.
        done = Assignment.objects.create(
            study=study, batch=first, summary=one, rater=rater, position=0, state="submitted"
        )
        old.get_model("annotate", "Revision").objects.create(
            assignment=done, number=1, status="submitted", rubric=rubric, submitted_at=timezone.now()
        )
        again = Assignment.objects.create(study=study, batch=second, summary=one, rater=rater, position=1)
        # "two": pending in both: the older stays live.
        older = Assignment.objects.create(study=study, batch=first, summary=two, rater=rater, position=2)
        newer = Assignment.objects.create(study=study, batch=second, summary=two, rater=rater, position=3)
        uuids = {name: a.uuid for name, a in {"done": done, "again": again, "older": older, "newer": newer}.items()}
    finally:
        _executor().migrate(latest)

    from annotate.models import Assignment, Revision

    states = {name: Assignment.objects.get(uuid=u).state for name, u in uuids.items()}
    assert states == {"done": "submitted", "again": "withdrawn", "older": "pending", "newer": "withdrawn"}
    assert Assignment.objects.filter(uuid=uuids["again"]).get().withdrawn_at is not None
    assert Assignment.objects.filter(study__slug="dup").count() == 4
    assert Revision.objects.filter(assignment__uuid=uuids["done"], status="submitted").count() == 1


# Migrations renamed for their intent (they were auto-named); each `replaces` its old name.
RENAMED = {
    ("generation", "0002_answerjob_llmcall_answer_job_and_more"): ("generation", "0002_clinical_question_answer_jobs"),
    ("generation", "0003_judgerun_judgeanswer_and_more"): ("generation", "0003_rubric_judge_runs"),
    ("generation", "0004_evaluationrun_evaluationscore_and_more"): ("generation", "0004_evaluator_runs_and_scores"),
}


@pytest.mark.django_db
def test_a_database_that_applied_the_old_migration_names_has_nothing_to_apply():
    from django.db.migrations.recorder import MigrationRecorder

    recorded = MigrationRecorder(connection).migration_qs
    for (app, old), (_, new) in RENAMED.items():
        assert recorded.filter(app=app, name=new).update(name=old) == 1  # as the last release recorded it
    executor = _executor()
    for old, new in RENAMED.items():
        assert old in executor.loader.applied_migrations and new in executor.loader.applied_migrations
    assert executor.migration_plan(executor.loader.graph.leaf_nodes()) == []
    # migrate then records the new names beside the old ones (Django's check_replacements).
    executor.check_replacements()
    names = set(recorded.filter(app="generation").values_list("name", flat=True))
    assert {new for _, new in RENAMED.values()} <= names
