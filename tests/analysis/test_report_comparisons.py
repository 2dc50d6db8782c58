"""The comparisons section of the study report, from preferences given in a
pairwise batch: the rows stats.pairwise reads keep each answer's side, and the report's
counts are the ones worked by hand from the stored answers."""

from __future__ import annotations

import csv
import io
from collections import Counter
from itertools import combinations

import pytest

from analysis.plots import plot_names, render_plot
from analysis.report_files import report_files
from analysis.services import compute_study_report
from annotate.selectors.frames import comparisons_frame
from annotate.services import batches
from annotate.services.ratings import submit_rating
from annotate.services.rubrics import load_builtin_rubric
from tests.factories import SourceFactory, StudyFactory, SummaryFactory, UserFactory

QUALITY = {"good": 3, "fair": 2, "poor": 1}  # how each system's summaries are judged


@pytest.fixture
def rated(db):
    """Six sources, three systems, all pairs, two raters each. Rater "lefty" prefers the
    better system except on fair-vs-poor, where she always picks the left summary; rater
    "fair" always prefers the better one. Overall is the only question asked here."""
    study = StudyFactory(rubric=load_builtin_rubric(key="pairwise"))
    uuids = {}
    for s in range(6):
        source = SourceFactory(study=study, key=f"S{s}")
        for system in QUALITY:
            summary = SummaryFactory(source=source, key=f"S{s}-{system}", generator=system, text=f"{system} {s}")
            uuids[str(summary.uuid)] = system
    raters = [UserFactory(username="lefty"), UserFactory(username="fair")]
    batch = batches.create_batch(study=study, name="b", raters=raters, design="comparisons", seed=3, k=2)
    expected_left = Counter()
    for a in batch.assignments.select_related("rater"):
        left, right = a.shown_order
        better = left if QUALITY[uuids[left]] > QUALITY[uuids[right]] else right
        systems = {uuids[left], uuids[right]}
        choice = left if a.rater.username == "lefty" and systems == {"fair", "poor"} else better
        expected_left[a.rater.username] += choice == left
        value = {"preferred": choice}
        answers = {"overall": value, "faithfulness": value, "completeness": {"preferred": "tie"}}
        submit_rating(assignment=a, rater=a.rater, answers=answers, version=a.version)
    return study, uuids, expected_left


def test_frame_keeps_the_side_of_every_answer(rated):
    study, uuids, expected_left = rated
    frame = comparisons_frame(study=study)
    overall = frame[frame["question"] == "overall"]
    assert len(overall) == 6 * 3 * 2
    for row in overall.itertuples():
        assert (row.left, row.right) == (uuids[row.left_summary], uuids[row.right_summary])
    left_counts = overall[overall["choice"] == "left"].groupby("rater").size()
    assert sorted(left_counts.tolist()) == sorted(expected_left.values())
    assert set(frame[frame["question"] == "completeness"]["choice"]) == {"tie"}


def test_report_ranks_the_systems_and_shows_position_bias(rated):
    study, _uuids, expected_left = rated
    report = compute_study_report(study=study, n_resamples=50)
    sections = {c["question"]: c for c in report["comparisons"]}
    assert set(sections) == {"overall", "faithfulness", "completeness"}
    overall = sections["overall"]
    assert [r["system"] for r in overall["ranking"]["systems"]] == ["good", "fair", "poor"]
    assert all(r["ci_low"] <= r["strength"] <= r["ci_high"] for r in overall["ranking"]["systems"])
    # Position bias by hand: "lefty" chose left on all fair-vs-poor comparisons.
    bias = {p["rater"]: p for p in overall["position_bias"]}
    assert bias["lefty"]["left"] == expected_left["lefty"]
    assert bias["fair"]["left"] == expected_left["fair"]
    assert bias[None]["n"] == 36 and bias[None]["left"] == sum(expected_left.values())
    # Wins by hand: good beats fair in all 12 judgements of that pair.
    wins = {(w["a"], w["b"]): w for w in overall["win_tie_loss"]}
    assert (wins[("fair", "good")]["wins_a"], wins[("fair", "good")]["wins_b"]) == (0, 12)
    assert overall["intransitive_triads"]["all"] == []
    # A tie-only question: every judgement a tie, nobody ahead.
    completeness = sections["completeness"]
    assert completeness["choices"] == {"left": 0, "right": 0, "tie": 36}
    strengths = [r["strength"] for r in completeness["ranking"]["systems"]]
    assert max(strengths) - min(strengths) < 1e-6
    assert "pointwise" not in overall  # no summary was rated alone

    files = report_files(report)
    ranking = list(csv.DictReader(io.StringIO(files["comparisons_ranking.csv"])))
    assert [r["system"] for r in ranking if r["question"] == "overall"] == ["good", "fair", "poor"]
    bias_rows = list(csv.DictReader(io.StringIO(files["comparisons_position_bias.csv"])))
    assert {r["rater"] for r in bias_rows if r["question"] == "overall"} == {"", "lefty", "fair"}
    names = [(kind, subject) for kind, subject, _stem in plot_names(report)]
    assert ("strengths", "overall") in names
    png = render_plot(report, "strengths", "overall", ("png",))["png"]
    assert png.startswith(b"\x89PNG")


def test_preferences_against_pointwise_scores(db):
    """A rubric that asks both: scores of single summaries, preferences of comparisons.
    Hand-worked: scores good 5, fair 3, poor 1; one rater prefers by score except once."""
    from annotate.services.rubrics import load_rubric

    rubric = load_rubric(
        definition={
            "key": "mixed",
            "title": "Mixed",
            "questions": [
                {"key": "score", "kind": "scale", "prompt": "Score", "required": True,
                 "options": [{"value": v, "label": str(v)} for v in range(1, 6)]},
                {"key": "overall", "kind": "preference", "prompt": "Better?", "required": True},
            ],
        }
    )  # fmt: skip
    study = StudyFactory(rubric=rubric)
    source = SourceFactory(study=study)
    summaries = {g: SummaryFactory(source=source, generator=g, text=g) for g in ("good", "fair", "poor")}
    rater = UserFactory(username="r")
    single = batches.create_batch(study=study, name="single", raters=[rater], design="k_raters", seed=1, k=1)
    for a in single.assignments.select_related("summary"):
        score = {"good": 5, "fair": 3, "poor": 1}[a.summary.generator]
        submit_rating(assignment=a, rater=rater, answers={"score": score}, version=a.version)
    pairs = batches.create_batch(study=study, name="pairs", raters=[rater], design="comparisons", seed=1, k=1)
    by_uuid = {str(s.uuid): g for g, s in summaries.items()}
    rank = {"good": 3, "fair": 2, "poor": 1}
    for a in pairs.assignments.all():
        left, right = a.shown_order
        gens = {by_uuid[left], by_uuid[right]}
        best = max((left, right), key=lambda u: rank[by_uuid[u]])
        worst = min((left, right), key=lambda u: rank[by_uuid[u]])
        choice = worst if gens == {"good", "poor"} else best  # the one disagreement
        submit_rating(assignment=a, rater=rater, answers={"overall": {"preferred": choice}}, version=a.version)
    report = compute_study_report(study=study, n_resamples=20)
    pointwise = report["comparisons"][0]["pointwise"]
    assert (pointwise["n"], pointwise["agree"]) == (3, 2)
    assert pointwise["question"] == "score"
    assert len(list(combinations(summaries, 2))) == 3


def test_report_page_shows_the_ranking(rated, client, admin_user):
    from annotate.models import StudyMembership
    from annotate.services.members import add_study_member
    from tests.analysis.reports import open_computed

    study, _uuids, _expected = rated
    add_study_member(study=study, user=admin_user, role=StudyMembership.Role.ADMIN)
    client.force_login(admin_user)
    html = open_computed(client, f"/analysis/{study.slug}/").content.decode()
    assert 'id="ranking-overall"' in html and 'id="position-bias-overall"' in html
    ranking = html[html.index('id="ranking-overall"') :]
    assert ranking.index(">good<") < ranking.index(">fair<") < ranking.index(">poor<")
