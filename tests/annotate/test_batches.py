"""Batches: building them (filters, stratified samples, designs), withdrawing and
moving assignments, disagreements, consensus and the re-rating round."""

from collections import Counter

import pytest
from django.core.management import CommandError, call_command

from annotate.models import Assignment, Batch, ConsensusAnswer, Revision
from annotate.rubrics import AnswerValidationError
from annotate.selectors.batches import batch_progress
from annotate.selectors.contents import filter_summaries
from annotate.selectors.disagreements import batch_disagreements
from annotate.selectors.frames import ratings_frame
from annotate.selectors.queue import assignments_for_rater, revision_answers
from annotate.services.adjudication import open_rerating, record_consensus
from annotate.services.assignments import move_assignment, withdraw_assignment
from annotate.services.batches import create_batch, plan_batch
from annotate.services.ratings import reopen_rating, save_draft, submit_rating
from core.exceptions import ApplicationError, InvalidStateError
from tests.factories import SourceFactory, SummaryFactory, UserFactory, revision_history


@pytest.fixture
def pool(study):
    """12 summaries: 8 on 'cardio' sources, 4 on 'neuro'; two generators; 2 per source."""
    summaries = []
    for i in range(6):
        source = SourceFactory(study=study, metadata={"topic": "cardio" if i < 4 else "neuro"})
        for generator in ("model-a", "model-b"):
            summaries.append(SummaryFactory(source=source, generator=generator, flags=["checked"] if i % 2 else []))
    return summaries


@pytest.fixture
def raters(db):
    return [UserFactory(username=f"r{i}") for i in range(3)]


def pairs_of(batch):
    return sorted(batch.assignments.values_list("summary_id", "rater_id"))


@pytest.mark.django_db
def test_k_raters_batch_gives_every_item_k_distinct_raters_and_balanced_loads(study, pool, raters):
    batch = create_batch(study=study, name="main", raters=raters, design="k_raters", k=2, seed=7)
    per_item = Counter(s for s, _ in pairs_of(batch))
    assert set(per_item.values()) == {2} and len(per_item) == 12
    loads = Counter(r for _, r in pairs_of(batch))
    assert max(loads.values()) - min(loads.values()) <= 1
    assert batch.blinded and batch.raters_per_item == 2 and batch.design["design"] == "k_raters"
    # The same inputs and seed give the same batch.
    _, again = plan_batch(summaries=list(filter_summaries(study=study)), raters=raters, design="k_raters", k=2, seed=7)
    assert sorted(again) == pairs_of(batch)


@pytest.mark.django_db
def test_stratified_sample_follows_the_strata_proportions(study, pool, raters):
    batch = create_batch(
        study=study, name="s", raters=raters[:1], design="k_raters", k=1, n=6, seed=3, stratify_by=["source.topic"]
    )
    topics = Counter(a.summary.source.metadata["topic"] for a in batch.assignments.select_related("summary__source"))
    assert topics == {"cardio": 4, "neuro": 2}  # 8:4 of 12 → 4:2 of 6


@pytest.mark.django_db
def test_filters_choose_the_summaries(study, pool, raters):
    only_b = create_batch(
        study=study,
        name="b",
        raters=raters[:1],
        design="k_raters",
        k=1,
        seed=1,
        filters={"generator": ["model-b"], "source_metadata": {"topic": "neuro"}},
    )
    assert {a.summary.generator for a in only_b.assignments.all()} == {"model-b"}
    assert only_b.assignments.count() == 2
    flagged = create_batch(
        study=study, name="f", raters=raters[:1], design="k_raters", k=1, seed=1, filters={"flags_any": ["checked"]}
    )
    assert all(a.summary.flags == ["checked"] for a in flagged.assignments.all())
    with pytest.raises(ApplicationError, match="no summaries match"):
        create_batch(
            study=study, name="none", raters=raters, design="k_raters", seed=1, filters={"generator": ["nobody"]}
        )


@pytest.mark.django_db
def test_a_raters_queue_keeps_the_summaries_of_one_source_together(study, pool, raters):
    create_batch(study=study, name="g", raters=raters, design="balanced", k=1, seed=11)
    for rater in raters:
        sources = [a.summary.source_id for a in assignments_for_rater(rater).select_related("summary")]
        runs = [s for i, s in enumerate(sources) if i == 0 or sources[i - 1] != s]
        assert len(runs) == len(set(sources)), sources  # each source appears as one run


@pytest.mark.django_db
def test_create_batch_command_and_its_errors(study, pool, raters, capsys):
    call_command(
        "create_batch",
        "--study",
        study.slug,
        "--name",
        "cli",
        "--raters",
        "r0,r1",
        "--design",
        "partial_overlap",
        "--share",
        "0.5",
        "--seed",
        "2",
        "--source",
        "topic=cardio",
    )
    assert "8 summaries" in capsys.readouterr().out
    batch = Batch.objects.get(name="cli")
    assert Counter(Counter(s for s, _ in pairs_of(batch)).values()) == {2: 4, 1: 4}
    with pytest.raises(CommandError, match="already has a batch named 'cli'"):
        call_command("create_batch", "--study", study.slug, "--name", "cli", "--raters", "r0")
    with pytest.raises(CommandError, match="--source must look like FIELD=VALUE"):
        call_command("create_batch", "--study", study.slug, "--name", "x", "--raters", "r0", "--source", "topic")
    # r0 has 6 of the 12 summaries already: those are left out before sampling.
    with pytest.raises(CommandError, match="cannot sample 50 of 6 summaries: the other 6 that match are with every"):
        call_command("create_batch", "--study", study.slug, "--name", "y", "--raters", "r0", "--n", "50")
    assert Batch.objects.count() == 1


@pytest.fixture
def rated_batch(study, pool, raters):
    batch = create_batch(
        study=study,
        name="pilot",
        raters=raters[:2],
        design="k_raters",
        k=2,
        seed=5,
        kind="calibration",
        filters={"source_metadata": {"topic": "neuro"}},
    )
    scores = {raters[0].pk: [5, 4, 3, 2], raters[1].pk: [2, 4, 2, 2]}
    for rater in raters[:2]:
        for i, a in enumerate(batch.assignments.filter(rater=rater).order_by("summary__key")):
            modes = ["hallucination"] if rater == raters[1] and i == 2 else []
            submit_rating(
                assignment=a,
                rater=rater,
                answers={"overall": scores[rater.pk][i], "failure_modes": modes},
                version=a.version,
            )
    return batch


@pytest.mark.django_db
def test_withdrawn_and_moved_assignments_keep_their_answers(rated_batch, raters):
    a = rated_batch.assignments.filter(rater=raters[0]).order_by("summary__key").first()
    before = [(r.number, revision_answers(r)) for r in revision_history(a)]
    new = move_assignment(assignment=a, to_rater=raters[2])
    a.refresh_from_db()
    assert a.state == "withdrawn" and a.moved_to == new and new.rater == raters[2] and new.state == "pending"
    assert [(r.number, revision_answers(r)) for r in revision_history(a)] == before
    assert a not in assignments_for_rater(raters[0])
    with pytest.raises(InvalidStateError):
        save_draft(assignment=a, rater=raters[0], answers={"overall": 1}, version=a.version)
    with pytest.raises(InvalidStateError):
        withdraw_assignment(assignment=a)
    progress = batch_progress(rated_batch)
    r0 = next(r for r in progress.raters if r.rater == raters[0])
    assert (r0.assigned, r0.submitted, r0.withdrawn) == (3, 3, 1)
    assert [(s.pk, done, planned) for s, done, planned in progress.items_missing] == [(a.summary_id, 1, 2)]


@pytest.mark.django_db
def test_disagreements_by_threshold_and_kind(rated_batch):
    rows = batch_disagreements(rated_batch, question="overall", threshold=1)
    assert [r.spread for r in rows] == [3.0, 1.0]  # 5 vs 2, then 3 vs 2 ... sorted by spread
    assert [r.spread for r in batch_disagreements(rated_batch, question="overall", threshold=2)] == [3.0]
    ticks = batch_disagreements(rated_batch, question="failure_modes")
    assert len(ticks) == 1 and sorted(map(str, ticks[0].values.values())) == ["['hallucination']", "[]"]


@pytest.mark.django_db
def test_disagreements_and_progress_follow_every_change_to_the_answers(rated_batch, raters):
    """They are cached per state of the batch: a changed answer and a withdrawn assignment
    each give them anew."""
    assert [r.spread for r in batch_disagreements(rated_batch, question="overall")] == [3.0, 1.0]
    assert [(r.submitted, r.in_progress) for r in batch_progress(rated_batch).raters] == [(4, 0), (4, 0)]
    assignment = rated_batch.assignments.filter(rater=raters[1]).order_by("summary__key").first()  # 2 against 5
    reopen_rating(assignment=assignment, rater=raters[1], version=assignment.version)
    assert [(r.submitted, r.in_progress) for r in batch_progress(rated_batch).raters] == [(4, 0), (3, 1)]
    assignment.refresh_from_db()
    submit_rating(
        assignment=assignment, rater=raters[1], answers={"overall": 5, "failure_modes": []}, version=assignment.version
    )
    assert [r.spread for r in batch_disagreements(rated_batch, question="overall")] == [1.0]
    withdraw_assignment(assignment=rated_batch.assignments.filter(rater=raters[1]).order_by("summary__key")[2])
    assert batch_disagreements(rated_batch, question="overall") == []
    assert [(r.assigned, r.withdrawn) for r in batch_progress(rated_batch).raters] == [(4, 0), (3, 1)]


@pytest.mark.django_db
def test_consensus_is_its_own_record_and_validated(rated_batch, raters, admin_user):
    summary = rated_batch.assignments.first().summary
    with pytest.raises(AnswerValidationError):
        record_consensus(
            batch=rated_batch, summary=summary, question="overall", value=9, rationale="", decided_by=admin_user
        )
    answers_before = sorted(str(revision_answers(r)) for r in Revision.objects.all())
    consensus = record_consensus(
        batch=rated_batch,
        summary=summary,
        question="overall",
        value=3,
        rationale="Agreed after discussion.",
        decided_by=admin_user,
    )
    assert (consensus.value, consensus.rubric) == (3, rated_batch.study.rubric)
    assert ConsensusAnswer.objects.count() == 1
    assert sorted(str(revision_answers(r)) for r in Revision.objects.all()) == answers_before


@pytest.mark.django_db
def test_rerating_round_keeps_both_phases(rated_batch, raters):
    opened = open_rerating(batch=rated_batch)
    assert opened == 8
    a = rated_batch.assignments.filter(rater=raters[0]).order_by("summary__key").first()
    a.refresh_from_db()
    assert a.state == "in_progress"
    submit_rating(assignment=a, rater=raters[0], answers={"overall": 3}, version=a.version)
    phases = [(r.phase, r.status, revision_answers(r)[0]["overall"]) for r in revision_history(a)]
    assert phases == [("initial", "submitted", 5), ("post_discussion", "submitted", 3)]
    frame = ratings_frame(study=rated_batch.study, phase="post_discussion", include_calibration=True)
    assert list(frame[frame["question"] == "overall"]["score"]) == [3.0]
    initial = ratings_frame(study=rated_batch.study, phase="initial", include_calibration=True)
    assert len(initial[initial["question"] == "overall"]) == 8
    assert open_rerating(batch=rated_batch) == 0  # already opened: nothing twice
    assert Assignment.objects.filter(batch=rated_batch, state="in_progress").count() == 7


@pytest.mark.django_db
def test_calibration_batches_are_left_out_of_analysis_by_default(rated_batch):
    assert rated_batch.kind == "calibration"
    assert ratings_frame(study=rated_batch.study).empty
    with_pilot = ratings_frame(study=rated_batch.study, include_calibration=True)
    assert len(with_pilot[with_pilot["question"] == "overall"]) == 8
