"""Adaptive side-by-side batches: comparisons handed out as raters ask, the pair chosen by
the current fit, every pair first, counterbalanced, never past the budget."""

from collections import Counter
from itertools import combinations

import pytest

from annotate.models import Assignment, Comparison, StudyMembership
from annotate.services import adaptive
from annotate.services.members import add_study_member
from annotate.services.ratings import submit_rating
from annotate.services.rubrics import load_builtin_rubric
from annotate.services.summaries import create_comparison
from core.exceptions import ApplicationError
from tests.factories import SourceFactory, StudyFactory, SummaryFactory, UserFactory

SYSTEMS = ("alpha", "beta", "gamma", "delta")  # alpha always preferred, then beta, ...
pytestmark = pytest.mark.django_db


@pytest.fixture
def study(admin_user):
    study = StudyFactory(rubric=load_builtin_rubric(key="pairwise"))
    add_study_member(study=study, user=admin_user, role=StudyMembership.Role.ADMIN)
    for s in range(5):
        source = SourceFactory(study=study, key=f"SRC{s}")
        summaries = {
            system: SummaryFactory(source=source, key=f"SRC{s}-{system}", generator=system, text=f"{system} {s}.")
            for system in SYSTEMS
        }
        for a, b in combinations(SYSTEMS, 2):
            create_comparison(study=study, key=f"SRC{s}-{a}-{b}", summaries=[summaries[a], summaries[b]])
    return study


@pytest.fixture
def raters():
    return [UserFactory(username=f"rater{i}") for i in range(2)]


def judge(assignment):
    """The rater prefers the system listed first in SYSTEMS."""
    left, right = assignment.shown_order
    members = {str(m.uuid): m.generator for m in assignment.summary.comparison.members.all()}
    better = min((left, right), key=lambda u: SYSTEMS.index(members[u]))
    value = {"preferred": better, "strength": "much"}
    answers = {"overall": value, "faithfulness": value, "completeness": value, "problems": []}
    submit_rating(assignment=assignment, rater=assignment.rater, answers=answers, version=assignment.version)


def systems_of(assignment):
    members = {str(m.uuid): m.generator for m in assignment.summary.comparison.members.all()}
    return tuple(members[u] for u in assignment.shown_order)


def run(batch, raters):
    handed = []
    while True:
        progressed = False
        for rater in raters:
            mine = adaptive.hand_out(batch=batch, rater=rater)
            if mine is None:
                continue
            handed.append(mine)
            judge(mine)
            progressed = True
        if not progressed:
            return handed


def test_every_pair_first_then_by_the_rule_counterbalanced_and_within_budget(study, raters):
    batch = adaptive.create_adaptive_batch(study=study, name="adaptive", raters=raters, budget=24, seed=3)
    assert Assignment.objects.filter(batch=batch).count() == 2  # each rater's first, now
    handed = run(batch, raters)
    assert len(handed) == 24 == Assignment.objects.filter(batch=batch).count()
    # The first six judgements cover the six pairs of systems once each.
    first = [tuple(sorted(systems_of(a))) for a in handed[:6]]
    assert sorted(first) == sorted(combinations(sorted(SYSTEMS), 2))
    # Each pair's two systems take the left side alike (within one).
    left = Counter()
    shows = Counter()
    for a in handed:
        shown = systems_of(a)
        shows[tuple(sorted(shown))] += 1
        left[(tuple(sorted(shown)), shown[0])] += 1
    for pair in shows:
        assert abs(left[(pair, pair[0])] - left[(pair, pair[1])]) <= 1, pair
    # Never the same comparison twice to one rater.
    seen = Counter((a.rater_id, a.summary_id) for a in handed)
    assert max(seen.values()) == 1
    # The state says it is over, and asking again hands out nothing.
    state = adaptive.adaptive_state(batch)
    assert state.done and state.judgements == 24 and state.handed_out == 24
    assert adaptive.hand_out(batch=batch, rater=raters[0]) is None


def test_an_open_comparison_is_handed_out_again_not_a_second_one(study, raters):
    batch = adaptive.create_adaptive_batch(study=study, name="adaptive", raters=raters[:1], budget=10, seed=1)
    first = adaptive.hand_out(batch=batch, rater=raters[0])
    assert adaptive.hand_out(batch=batch, rater=raters[0]) == first
    assert Assignment.objects.filter(batch=batch).count() == 1


def test_the_rater_continues_from_the_page_to_the_next_comparison(study, raters, client):
    batch = adaptive.create_adaptive_batch(study=study, name="adaptive", raters=raters[:1], budget=10, seed=1)
    client.force_login(raters[0])
    first = Assignment.objects.get(batch=batch)
    judge(first)
    response = client.get(f"/rate/studies/{study.slug}/continue/")
    following = Assignment.objects.filter(batch=batch).exclude(pk=first.pk).get()
    assert response.status_code == 302 and response["Location"] == f"/rate/{following.uuid}/"


def test_refused_designs(study, raters):
    with pytest.raises(ApplicationError, match="budget"):
        adaptive.create_adaptive_batch(study=study, name="a", raters=raters, budget=3, seed=1)
    # Four systems, but no comparison item of alpha against beta.
    Comparison.objects.filter(key__contains="alpha-beta").update(study=StudyFactory())
    with pytest.raises(ApplicationError, match="every pair"):
        adaptive.create_adaptive_batch(study=study, name="b", raters=raters, budget=30, seed=1)


def test_the_command_creates_the_batch(study, raters):
    from io import StringIO

    from django.core.management import CommandError, call_command

    out = StringIO()
    call_command(
        "create_adaptive_batch", "--study", study.slug, "--name", "live", "--raters", "rater0,rater1",
        "--budget", "20", stdout=out,
    )  # fmt: skip
    assert "4 systems" in out.getvalue() and "2 comparison(s) handed out" in out.getvalue()
    with pytest.raises(CommandError, match="no such user"):
        call_command(
            "create_adaptive_batch", "--study", study.slug, "--name", "x", "--raters", "nobody", "--budget", "20"
        )


def test_the_batch_page_says_where_the_rule_stands(study, raters, client, admin_user):
    batch = adaptive.create_adaptive_batch(study=study, name="adaptive", raters=raters, budget=12, seed=2)
    run(batch, raters)
    client.force_login(admin_user)
    page = client.get(f"/studies/{study.slug}/batches/{batch.uuid}/").content.decode()
    assert 'id="adaptive-state"' in page and "12 of 12 handed out" in page and "Done" in page


def test_the_batch_builder_makes_an_adaptive_batch(study, raters, client, admin_user):
    client.force_login(admin_user)
    url = f"/studies/{study.slug}/batches/new/"
    form = {
        "name": "live",
        "kind": "main",
        "raters": [r.pk for r in raters],
        "design": "adaptive_pairs",
        "seed": 4,
        "k": 1,
        "share": 0.2,
        "m": 1,
    }
    refused = client.post(url, form | {"n": 2})
    assert refused.status_code == 400 and "the budget" in refused.content.decode()
    previewed = client.post(url, form | {"n": 20, "action": "preview"})
    assert previewed.status_code == 400 and "no fixed plan to preview" in previewed.content.decode()
    made = client.post(url, form | {"n": 20})
    batch = study.batches.get(name="live")
    assert made.status_code == 302 and batch.design["name"] == "adaptive_pairs" and batch.design["budget"] == 20
    assert Assignment.objects.filter(batch=batch).count() == 2
