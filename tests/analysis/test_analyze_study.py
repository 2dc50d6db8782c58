"""`analyze_study` on the demo study with submitted ratings: a complete folder, and numbers
that agree with the same statistics computed independently from the database rows."""

from __future__ import annotations

import csv
import json
import random
import xml.etree.ElementTree as ET
from collections import Counter, defaultdict
from io import StringIO
from pathlib import Path

import krippendorff
import numpy as np
import pytest
from django.core.management import CommandError, call_command
from rouge_score import rouge_scorer
from scipy import stats
from sklearn.metrics import cohen_kappa_score

from analysis.report_files import FILE_NAMES
from annotate.models import Assignment, Rating, Revision
from annotate.services.ratings import submit_rating
from datasets.demo import DEMO_STUDY

FAILURE_MODES = ["unsupported", "misattribution", "bad_length", "overly_specific"]


def rate_demo(seed: int = 11) -> None:
    """Every demo assignment submitted with seeded answers (no hallucination ticks, so no
    rubric rule ties the score to the ticks)."""
    rng = random.Random(seed)
    for assignment in Assignment.objects.filter(study__slug=DEMO_STUDY).select_related("rater").order_by("pk"):
        submit_rating(
            assignment=assignment,
            rater=assignment.rater,
            answers={
                "overall": rng.randint(1, 5),
                "failure_modes": rng.sample(FAILURE_MODES, rng.randint(0, 2)),
                "feedback": "Fine.",
            },
            version=assignment.version,
        )


@pytest.fixture
def rated_demo(db):
    call_command("load_demo", stdout=StringIO())
    rate_demo()


def db_overall_scores() -> dict[str, dict[str, int]]:
    """rater username -> summary uuid -> overall score, read straight from the rows (the
    demo's calibration batch left out, as the analysis leaves it out)."""
    scores: dict[str, dict[str, int]] = defaultdict(dict)
    ratings = (
        Rating.objects.filter(
            question="overall",
            revision__status=Revision.Status.SUBMITTED,
            revision__assignment__study__slug=DEMO_STUDY,
        )
        .exclude(revision__assignment__batch__kind="calibration")
        .select_related("revision__assignment__rater", "revision__assignment__summary")
    )
    for rating in ratings:
        assignment = rating.revision.assignment
        scores[assignment.rater.username][str(assignment.summary.uuid)] = rating.score
    return scores


def read_csv(path: Path) -> list[dict[str, str]]:
    with path.open(encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


@pytest.fixture
def analysed(rated_demo, tmp_path) -> Path:
    out = tmp_path / "out"
    call_command("analyze_study", DEMO_STUDY, "--out", str(out), "--resamples", "60", stdout=StringIO())
    return out


def test_folder_is_complete(analysed):
    for name in FILE_NAMES:
        assert (analysed / name).is_file(), name
        assert (analysed / name).stat().st_size > 0
    report = json.loads((analysed / "report.json").read_text())
    stems = ["histogram_overall"] + [f"scatter_{m}" for m in report["correlation"]["metric_columns"]]
    assert {"scatter_rouge1", "scatter_rouge2", "scatter_rougeL", "scatter_delta_fk"} <= set(stems)
    for stem in stems:
        png = (analysed / "plots" / f"{stem}.png").read_bytes()
        assert png.startswith(b"\x89PNG\r\n\x1a\n")
        root = ET.fromstring((analysed / "plots" / f"{stem}.svg").read_bytes())
        assert root.tag.endswith("svg")
    assert report["phase"] == "all" and report["study"] == DEMO_STUDY


def test_agreement_matches_sklearn_and_krippendorff_on_the_same_pairs(analysed):
    scores = db_overall_scores()
    assert set(scores) == {"rater1", "rater2"}
    shared = sorted(set(scores["rater1"]) & set(scores["rater2"]))
    assert len(shared) == 12  # the demo's main batch: every item rated by both
    a = [scores["rater1"][i] for i in shared]
    b = [scores["rater2"][i] for i in shared]
    (pair,) = [row for row in read_csv(analysed / "cohen_kappa.csv") if row["question"] == "overall"]
    assert (pair["rater_a"], pair["rater_b"], pair["n"]) == ("rater1", "rater2", "12")
    for weighting, weights in (("unweighted", None), ("linear", "linear"), ("quadratic", "quadratic")):
        expected = cohen_kappa_score(a, b, labels=[1, 2, 3, 4, 5], weights=weights)
        assert float(pair[weighting]) == pytest.approx(expected, abs=1e-12)
        assert float(pair[f"{weighting}_ci_low"]) <= float(pair[f"{weighting}_ci_high"])

    items = sorted(set(scores["rater1"]) | set(scores["rater2"]))
    matrix = np.array([[scores[r].get(i, np.nan) for i in items] for r in ("rater1", "rater2")], dtype=float)
    rows = {row["statistic"]: row for row in read_csv(analysed / "agreement.csv") if row["question"] == "overall"}
    for level in ("nominal", "ordinal", "interval"):
        expected = krippendorff.alpha(matrix, value_domain=[1, 2, 3, 4, 5], level_of_measurement=level)
        assert float(rows[f"krippendorff_alpha.{level}"]["value"]) == pytest.approx(expected, abs=1e-12)
    # Two raters: percent agreement is the share of the 12 shared items given the same score.
    assert float(rows["percent_agreement"]["value"]) == pytest.approx(np.mean(np.array(a) == np.array(b)))
    assert rows["percent_agreement"]["n_items"] == "12" and rows["percent_agreement"]["n_raters"] == "2"
    assert rows["percent_agreement"]["n_resamples"] == "60"
    low, high = float(rows["percent_agreement"]["ci_low"]), float(rows["percent_agreement"]["ci_high"])
    assert 0 <= low <= high <= 1


def test_distributions_match_the_rows(analysed):
    scores = db_overall_scores()
    histogram = {(r["rater"], int(r["value"])): int(r["count"]) for r in read_csv(analysed / "histograms.csv")}
    for rater, by_item in scores.items():
        counts = Counter(by_item.values())
        assert [histogram[(rater, v)] for v in range(1, 6)] == [counts.get(v, 0) for v in range(1, 6)]

    means = {r["item"]: float(r["mean"]) for r in read_csv(analysed / "item_means.csv")}
    for item in set(scores["rater1"]) | set(scores["rater2"]):
        values = [s[item] for s in scores.values() if item in s]
        assert means[item] == pytest.approx(np.mean(values))

    ticks: Counter = Counter()
    for rating in Rating.objects.filter(question="failure_modes", revision__status=Revision.Status.SUBMITTED).exclude(
        revision__assignment__batch__kind="calibration"
    ):
        for mode in rating.value:
            ticks[(rating.revision.assignment.rater.username, mode)] += 1
    options = read_csv(analysed / "option_counts.csv")
    for row in options:
        if row["rater"] != "(all)":
            assert int(row["count"]) == ticks[(row["rater"], row["option"])], row
            assert row["n_rated"] == "12"
    assert {r["option"] for r in options} >= set(FAILURE_MODES) | {"hallucination"}


def test_metrics_and_correlations_match_the_libraries(analysed):
    from annotate.models import Summary

    metrics = {r["item"]: r for r in read_csv(analysed / "metrics.csv")}
    scorer = rouge_scorer.RougeScorer(["rouge1"], use_stemmer=True)
    summary = Summary.objects.filter(study__slug=DEMO_STUDY).select_related("source").order_by("key").first()
    expected = scorer.score(summary.source.text, summary.text)["rouge1"].fmeasure
    assert float(metrics[str(summary.uuid)]["rouge1"]) == pytest.approx(expected, abs=1e-12)

    rated = [r for r in metrics.values() if r["human_mean"] != ""]
    human = [float(r["human_mean"]) for r in rated]
    rouge = [float(r["rouge1"]) for r in rated]
    row = next(r for r in read_csv(analysed / "correlation.csv") if r["scope"] == "mean" and r["metric"] == "rouge1")
    assert int(row["n"]) == len(rated) == 12
    assert float(row["spearman_rho"]) == pytest.approx(stats.spearmanr(human, rouge).statistic, abs=1e-12)
    assert float(row["kendall_tau_b"]) == pytest.approx(stats.kendalltau(human, rouge).statistic, abs=1e-12)
    assert float(row["spearman_p_holm"]) >= float(row["spearman_p"])
    scopes = {r["scope"] for r in read_csv(analysed / "correlation.csv")}
    assert scopes == {"mean", "rater:rater1", "rater:rater2"}


def test_by_group_uses_the_named_source_field(rated_demo, tmp_path):
    out = tmp_path / "by"
    call_command(
        "analyze_study", DEMO_STUDY, "--out", str(out), "--resamples", "5", "--by", "source.year",
        stdout=StringIO(),
    )  # fmt: skip
    rows = read_csv(out / "by_group.csv")
    assert {r["field"] for r in rows} == {"source.year"}
    assert sum(int(r["n_ratings"]) for r in rows) == 24


def test_a_phase_without_ratings_still_writes_every_file(rated_demo, tmp_path):
    out = tmp_path / "post"
    call_command(
        "analyze_study", DEMO_STUDY, "--out", str(out), "--phase", "post_discussion", "--resamples", "5",
        stdout=StringIO(),
    )  # fmt: skip
    assert all((out / name).is_file() for name in FILE_NAMES)
    sections = json.loads((out / "agreement.json").read_text())
    assert sections and all(s["report"] is None and "at least 2 raters" in s["error"] for s in sections)


def test_unknown_study_or_field_is_a_command_error(rated_demo, tmp_path):
    with pytest.raises(CommandError, match="no study 'nope'"):
        call_command("analyze_study", "nope", "--out", str(tmp_path))
    with pytest.raises(CommandError, match="No field 'source.nope'"):
        call_command("analyze_study", DEMO_STUDY, "--out", str(tmp_path), "--by", "source.nope", "--resamples", "5")
