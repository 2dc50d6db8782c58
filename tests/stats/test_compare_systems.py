"""Systems compared pointwise (stats.compare), worked by hand on a small table and checked
against scipy.stats.wilcoxon, scipy.stats.bootstrap and statsmodels' multipletests."""

import math

import numpy as np
import pandas as pd
import pytest
from scipy.stats import bootstrap, wilcoxon
from statsmodels.stats.multitest import multipletests

from stats.compare import describe, describe_groups, paired_comparisons, summary_scores

# Three systems summarised six sources; each cell is the summary's score (the mean of its
# raters' answers). a2 is the mean of two raters (2 and 3), a1 of two findings (4 and 4);
# b5 and b5bis both summarise source s5 (1.5 and 2.5: 2.0 on that source); c7 summarises a
# source nobody else did.
A = {"s1": 4.0, "s2": 2.5, "s3": 4.5, "s4": 5.0, "s5": 4.5, "s6": 4.0}
B = {"s1": 3.5, "s2": 3.5, "s3": 3.0, "s4": 3.0, "s5": 2.0, "s6": 1.0}
C = {"s1": 1.5, "s2": 4.5, "s3": 1.5, "s4": 3.5, "s5": 5.0, "s6": 5.0}


def answers() -> pd.DataFrame:
    rows = [
        ("a1:f1", "r1", 4.0),
        ("a1:f2", "r1", 4.0),
        ("a2", "r1", 2.0),
        ("a2", "r2", 3.0),
        ("b5", "r1", 1.5),
        ("b5bis", "r1", 2.5),
        ("c7", "r1", 1.0),
        ("c3", "r2", math.nan),  # an N/A: no score, left out
    ]
    for source in ("s3", "s4", "s5", "s6"):
        rows.append((f"a{source[1]}", "r1", A[source]))
    for source in ("s1", "s2", "s3", "s4", "s6"):
        rows.append((f"b{source[1]}", "r1", B[source]))
    for source in C:
        rows.append((f"c{source[1]}", "r1", C[source]))
    frame = pd.DataFrame(rows, columns=["item", "rater", "score"])
    return frame.assign(question="overall")


SYSTEMS = pd.Series({**{f"a{i}": "A" for i in range(1, 7)}, **{f"b{i}": "B" for i in range(1, 7)}, "b5bis": "B",
                     **{f"c{i}": "C" for i in range(1, 8)}})  # fmt: skip
SOURCES = pd.Series({item: ("s7" if item == "c7" else f"s{item[1]}") for item in SYSTEMS.index})


def test_summary_scores_average_raters_and_findings():
    scores = summary_scores(answers(), ["overall"])
    assert scores.loc["a1", "overall"] == 4.0
    assert scores.loc["a2", "overall"] == 2.5
    assert scores.loc["c3", "overall"] == 1.5  # the N/A left out
    assert len(scores) == 20


def test_group_mean_spread_by_hand():
    rows = describe_groups(summary_scores(answers(), ["overall"]), SYSTEMS, n_resamples=200)["overall"]
    a = rows[0]
    assert (a["group"], a["n"]) == ("A", 6)
    # 2.5, 4, 4, 4.5, 4.5, 5: mean 24.5/6; squared deviations sum to 3.708333, / 5 -> SD 0.861201.
    assert a["mean"] == pytest.approx(24.5 / 6)
    assert a["sd"] == pytest.approx(math.sqrt(3.708333333 / 5))
    # Type 7 quartiles: 25% at position 1.25 -> 4.0; 75% at 3.75 -> 4.5; median (4 + 4.5) / 2.
    assert (a["q1"], a["median"], a["q3"], a["iqr"]) == (4.0, 4.25, 4.5, 0.5)
    assert a["ci_low"] <= a["mean"] <= a["ci_high"]
    assert [r["group"] for r in rows] == ["A", "B", "C"]
    assert rows[1]["n"] == 7 and rows[2]["n"] == 7  # b5bis and c7 are summaries of their systems


def test_one_summary_has_no_spread_or_interval():
    one = describe([3.0], n_resamples=100)
    assert (one["n"], one["mean"], one["sd"], one["ci_low"], one["iqr"]) == (1, 3.0, None, None, 0.0)
    assert describe([], n_resamples=100)["mean"] is None


def test_paired_differences_wilcoxon_and_holm_by_hand():
    pairs = paired_comparisons(summary_scores(answers(), ["overall"]), SYSTEMS, SOURCES, n_resamples=500)["overall"]
    ab, ac, bc = pairs
    assert [(p["a"], p["b"], p["n_sources"]) for p in pairs] == [("A", "B", 6), ("A", "C", 6), ("B", "C", 6)]
    # A - B: 0.5, -1, 1.5, 2, 2.5, 3 (s5: B's two summaries average to 2.0). Ranks of |d|:
    # 1..6, the one negative has rank 2, so W = 2; exactly, P(W <= 2) counts the subsets
    # of {1..6} summing to at most 2 ({}, {1}, {2}): two-sided p = 2 * 3 / 64.
    assert ab["mean_difference"] == pytest.approx(8.5 / 6)
    assert (ab["mean_a"], ab["mean_b"]) == (pytest.approx(24.5 / 6), pytest.approx(16 / 6))
    assert ab["wilcoxon_statistic"] == 2.0
    assert ab["p_value"] == pytest.approx(6 / 64)
    # A - C: 2.5, -2, 3, 1.5, -0.5, -1: negatives have ranks 4, 1, 2, so W- = 7, W+ = 14,
    # W = 7; 18 subsets of {1..6} sum to at most 7 (1+1+1+2+2+3+4+4): p = 36 / 64.
    assert ac["mean_difference"] == pytest.approx(3.5 / 6)
    assert (ac["wilcoxon_statistic"], ac["p_value"]) == (7.0, pytest.approx(36 / 64))
    # B - C: 2, -1, 1.5, -0.5, -3, -4: positives have ranks 4 and 3, W = 7 again.
    assert bc["mean_difference"] == pytest.approx(-5 / 6)
    assert (bc["wilcoxon_statistic"], bc["p_value"]) == (7.0, pytest.approx(36 / 64))
    # Holm over the three: 3 * 6/64 = 0.28125; then max(0.28125, min(1, 2 * 36/64)) = 1; 1.
    assert [p["p_holm"] for p in pairs] == [pytest.approx(0.28125), 1.0, 1.0]


def test_against_scipy_and_statsmodels():
    pairs = paired_comparisons(summary_scores(answers(), ["overall"]), SYSTEMS, SOURCES, n_resamples=500)["overall"]
    a, b, c = (np.array(list(x.values())) for x in (A, B, C))
    expected = [wilcoxon(a - b), wilcoxon(a - c), wilcoxon(b - c)]
    for row, theirs in zip(pairs, expected, strict=True):
        assert row["wilcoxon_statistic"] == pytest.approx(float(theirs.statistic))
        assert row["p_value"] == pytest.approx(float(theirs.pvalue))
    holm = multipletests([float(t.pvalue) for t in expected], method="holm")[1]
    assert [p["p_holm"] for p in pairs] == pytest.approx(list(holm))


def test_ties_and_zeros_follow_scipy():
    scores = pd.DataFrame({"q": [4.0, 3.0, 3.0, 3.0, 5.0, 2.0, 2.0, 3.0, 4.0, 1.0]},
                          index=[f"x{i}" for i in range(5)] + [f"y{i}" for i in range(5)])  # fmt: skip
    systems = pd.Series({i: i[0] for i in scores.index})
    sources = pd.Series({i: i[1] for i in scores.index})
    (row,) = paired_comparisons(scores, systems, sources, n_resamples=100)["q"]
    differences = np.array([2.0, 1.0, 0.0, -1.0, 4.0])
    theirs = wilcoxon(differences)
    assert (row["n_nonzero"], row["wilcoxon_statistic"]) == (4, pytest.approx(float(theirs.statistic)))
    assert row["p_value"] == pytest.approx(float(theirs.pvalue))


def test_all_equal_scores_have_no_test_and_a_point_interval():
    scores = pd.DataFrame({"q": [3.0, 4.0, 2.0, 3.0, 4.0, 2.0]}, index=["x0", "x1", "x2", "y0", "y1", "y2"])
    (row,) = paired_comparisons(
        scores, pd.Series({i: i[0] for i in scores.index}), pd.Series({i: i[1] for i in scores.index})
    )["q"]
    assert (row["mean_difference"], row["ci_low"], row["ci_high"]) == (0.0, 0.0, 0.0)
    assert (row["p_value"], row["p_holm"], row["n_nonzero"]) == (None, None, 0)


def test_paired_bootstrap_matches_scipys_percentile_bootstrap():
    rng = np.random.default_rng(7)
    x = rng.integers(1, 6, 30).astype(float)
    y = np.clip(x - rng.integers(-1, 3, 30), 1, 5).astype(float)
    index = [f"x{i}" for i in range(30)] + [f"y{i}" for i in range(30)]
    scores = pd.DataFrame({"q": np.concatenate([x, y])}, index=index)
    (row,) = paired_comparisons(
        scores,
        pd.Series({i: i[0] for i in index}),
        pd.Series({i: i[1:] for i in index}),
        n_resamples=20000,
    )["q"]
    theirs = bootstrap((x - y,), np.mean, n_resamples=20000, method="percentile", rng=1).confidence_interval
    assert row["ci_low"] == pytest.approx(theirs.low, abs=0.05)
    assert row["ci_high"] == pytest.approx(theirs.high, abs=0.05)
    assert row["ci_low"] < row["mean_difference"] < row["ci_high"]
