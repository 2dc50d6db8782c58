"""Every metric against every human question, summary and system level: checked against
scipy on data built here, the average worked by hand."""

import math

import pandas as pd
import pytest
from scipy import stats

from stats.metaeval_questions import AVERAGE, correlation, human_scores, meta_evaluation_tables

# 8 summaries from 4 generators, two raters, two questions on different scales.
ITEMS = [f"s{i}" for i in range(8)]
GENERATORS = pd.Series({item: f"g{i // 2}" for i, item in enumerate(ITEMS)})
Q1 = {"s0": (1, 2), "s1": (2, 2), "s2": (3, 4), "s3": (4, 4), "s4": (5, 4), "s5": (2, 3), "s6": (3, 3), "s7": (5, 5)}
Q2 = {"s0": (1, 1), "s1": (2, 1), "s2": (2, 3), "s3": (4, 3), "s4": (4, 4), "s5": (1, 2), "s6": (3, 2), "s7": (4, 4)}
METRIC = {"s0": 0.1, "s1": 0.25, "s2": 0.3, "s3": 0.5, "s4": 0.45, "s5": 0.2, "s6": 0.35, "s7": 0.9}
SCALES = {"q1": (1.0, 5.0), "q2": (1.0, 4.0)}


def answers() -> pd.DataFrame:
    rows = []
    for question, table in (("q1", Q1), ("q2", Q2)):
        for item, scores in table.items():
            for rater, score in zip(("a", "b"), scores, strict=True):
                rows.append({"item": item, "rater": rater, "question": question, "score": float(score)})
    rows.append({"item": "s0", "rater": "a", "question": "q2", "score": float("nan")})  # an N/A
    return pd.DataFrame(rows)


def metrics() -> pd.DataFrame:
    return pd.DataFrame({"item": list(METRIC), "rougeL": list(METRIC.values())})


def test_summary_level_is_scipys_tau_b_and_rho_of_the_item_means():
    result = meta_evaluation_tables(
        answers=answers(), metrics=metrics(), generators=GENERATORS, scales=SCALES, metric_columns=["rougeL"]
    )
    assert result["questions"] == ["q1", "q2", AVERAGE]
    for question, table in (("q1", Q1), ("q2", Q2)):
        means = [sum(table[i]) / 2 for i in ITEMS]
        cell = result["summary_level"]["rougeL"][question]
        tau = stats.kendalltau([METRIC[i] for i in ITEMS], means, variant="b")
        rho = stats.spearmanr([METRIC[i] for i in ITEMS], means)
        assert cell["n"] == 8
        assert cell["kendall_tau_b"] == pytest.approx(tau.statistic)
        assert cell["kendall_p"] == pytest.approx(tau.pvalue)
        assert cell["spearman_rho"] == pytest.approx(rho.statistic)


def test_the_average_maps_each_question_to_its_own_scale_first():
    table = human_scores(answers(), SCALES)
    # s0: q1 mean 1.5 -> (1.5 - 1) / 4 = 0.125; q2 mean 1.0 -> 0; average 0.0625.
    assert table.loc["s0", "q1"] == 1.5 and table.loc["s0", "q2"] == 1.0
    assert table.loc["s0", AVERAGE] == pytest.approx((0.125 + 0.0) / 2)
    # s7: q1 5 -> 1, q2 4 -> 1.
    assert table.loc["s7", AVERAGE] == pytest.approx(1.0)


def test_system_level_correlates_per_generator_means():
    result = meta_evaluation_tables(
        answers=answers(), metrics=metrics(), generators=GENERATORS, scales=SCALES, metric_columns=["rougeL"]
    )
    generator_metric, generator_q1 = [], []
    for g in range(4):
        items = ITEMS[2 * g : 2 * g + 2]
        generator_metric.append(sum(METRIC[i] for i in items) / 2)
        generator_q1.append(sum(sum(Q1[i]) / 2 for i in items) / 2)
    cell = result["system_level"]["rougeL"]["q1"]
    assert cell["n"] == 4 and result["generators"] == 4
    assert cell["kendall_tau_b"] == pytest.approx(stats.kendalltau(generator_metric, generator_q1).statistic)
    assert cell["spearman_rho"] == pytest.approx(stats.spearmanr(generator_metric, generator_q1).statistic)


def test_too_few_points_or_no_spread_is_undefined_not_zero():
    assert correlation([1, 2], [1, 2]).kendall_tau_b is None
    assert correlation([1, 2, 3], [2, 2, 2]).spearman_rho is None
    two = pd.Series({item: ("g0" if item in ("s0", "s1", "s2", "s3") else "g1") for item in ITEMS})
    result = meta_evaluation_tables(
        answers=answers(), metrics=metrics(), generators=two, scales=SCALES, metric_columns=["rougeL"]
    )
    assert result["system_level"]["rougeL"]["q1"]["kendall_tau_b"] is None
    cell = correlation([1.0, float("nan"), 3.0, 4.0], [1.0, 2.0, 2.0, 3.0])
    assert cell.n == 3 and not math.isnan(cell.kendall_tau_b)


def test_intervals_and_the_paired_comparison_match_a_direct_bootstrap():
    import numpy as np

    metrics_frame = metrics().assign(noise=[0.5, 0.1, 0.9, 0.3, 0.2, 0.8, 0.4, 0.6])
    result = meta_evaluation_tables(
        answers=answers(),
        metrics=metrics_frame,
        generators=GENERATORS,
        scales=SCALES,
        metric_columns=["rougeL", "noise"],
        n_resamples=200,
        seed=7,
    )
    # The same resamples, written out here: rows in the metrics' order, q1's item means.
    order = list(METRIC)
    m = np.array([METRIC[i] for i in order])
    noise = metrics_frame.set_index("item")["noise"].reindex(order).to_numpy()
    q1 = np.array([sum(Q1[i]) / 2 for i in order])
    rng = np.random.default_rng(7)
    taus, diffs = [], []
    for _ in range(200):
        idx = rng.integers(0, 8, 8)
        a = stats.kendalltau(m[idx], q1[idx], variant="b").statistic
        b = stats.kendalltau(noise[idx], q1[idx], variant="b").statistic
        taus.append(a)
        diffs.append(a - b)
    taus, diffs = np.array(taus), np.array(diffs)
    finite = taus[np.isfinite(taus)]
    cell = result["summary_level"]["rougeL"]["q1"]
    assert cell["ci_low"] == pytest.approx(np.quantile(finite, 0.025))
    assert cell["ci_high"] == pytest.approx(np.quantile(finite, 0.975))
    assert cell["n_undefined_resamples"] == int((~np.isfinite(taus)).sum())
    (pair,) = [p for p in result["comparisons"]["q1"] if {p["a"], p["b"]} == {"rougeL", "noise"}]
    finite_diffs = diffs[np.isfinite(diffs)]
    assert (pair["a"], pair["b"]) == ("rougeL", "noise")
    assert pair["ci_low"] == pytest.approx(np.quantile(finite_diffs, 0.025))
    assert pair["ci_high"] == pytest.approx(np.quantile(finite_diffs, 0.975))
    assert pair["a_better"] == (pair["ci_low"] > 0)


def test_acc_eq_and_kl_against_every_question_and_the_average_worked_by_hand():
    """FactPICO Tables 4 and 11 set acc_eq and KL against every element and their average.
    Four summaries, scale 1-4, two raters agreeing. Mapped to [0, 1], the average is
    a 1, b 0.5, c 0.5, d 1/6: b and c tie. Metric a .9, b .5, c .55, d .1.
    avg: the five untied pairs are concordant (metric gaps .35 and up) and the tied pair
    b-c is matched once epsilon reaches its metric gap .05: 6/6 at epsilon .05.
    q: a 4, b 2, c 2, d 2 (ties b-c .05, b-d .4, c-d .45; concordant a-b .4, a-c .35, a-d .8):
    eps 0 gives 3/6, .05 gives 4/6, .35 3/6, .4 3/6, .45 4/6, .8 3/6: the smallest
    maximiser is .05, acc_eq 4/6."""
    p = {"a": 4, "b": 3, "c": 3, "d": 1}
    q = {"a": 4, "b": 2, "c": 2, "d": 2}
    rows = [
        {"item": item, "rater": rater, "question": key, "score": float(score)}
        for key, table in (("p", p), ("q", q))
        for item, score in table.items()
        for rater in ("r1", "r2")
    ]
    metric = pd.DataFrame({"item": list("abcd"), "m": [0.9, 0.5, 0.55, 0.1]})
    result = meta_evaluation_tables(
        answers=pd.DataFrame(rows),
        metrics=metric,
        generators=pd.Series({item: "g" for item in "abcd"}),
        scales={"p": (1.0, 4.0), "q": (1.0, 4.0)},
        metric_columns=["m"],
    )
    cells = result["summary_level"]["m"]
    assert (cells[AVERAGE]["acc_eq"], cells[AVERAGE]["acc_eq_epsilon"]) == (pytest.approx(1.0), pytest.approx(0.05))
    assert (cells["q"]["acc_eq"], cells["q"]["acc_eq_epsilon"]) == (pytest.approx(4 / 6), pytest.approx(0.05))
    assert cells["p"]["acc_eq"] == pytest.approx(1.0)
    # KL of the standardised distributions, as stats.metaeval.kl_divergence gives it for the
    # average's column (the value itself is checked against its definition there).
    from stats.metaeval import kl_divergence

    assert cells[AVERAGE]["kl_divergence"] == pytest.approx(kl_divergence([1, 0.5, 0.5, 1 / 6], [0.9, 0.5, 0.55, 0.1]))
    # One generator: no system-level figure.
    assert result["system_level"]["m"][AVERAGE]["acc_eq"] is None


@pytest.mark.parametrize("n", [3, 7, 40, 517])
def test_resampled_tau_b_is_scipys_on_every_resample(n):
    """The vectorised bootstrap (stats.metaeval_questions.resampled_tau_b) gives, resample by
    resample, what scipy.stats.kendalltau(variant="b") gives on the same points: ties on a
    short scale, items drawn twice, missing values, and undefined resamples alike."""
    import numpy as np

    from stats.metaeval_questions import resampled_tau_b

    rng = np.random.default_rng(n)
    x = rng.integers(1, 5, n).astype(float)  # a 1-4 scale: many ties
    y = np.round(x + rng.normal(0, 1.2, n), 1)
    x[rng.random(n) < 0.15] = np.nan
    indices = rng.integers(0, n, (300, n))
    got = resampled_tau_b(x, y, indices)
    for idx, value in zip(indices, got, strict=True):
        xs, ys = x[idx], y[idx]
        keep = ~(np.isnan(xs) | np.isnan(ys))
        xs, ys = xs[keep], ys[keep]
        if len(xs) < 3 or len(set(xs)) < 2 or len(set(ys)) < 2:
            assert math.isnan(value)
        else:
            assert value == pytest.approx(stats.kendalltau(xs, ys, variant="b").statistic, abs=1e-12)


@pytest.mark.parametrize("raters", [1, 3])
def test_resampled_tau_b_of_human_means_on_a_short_scale(raters):
    """Human scores that take a few values (one rater's 1-5, or the mean of three: 13 values)
    are counted one rank at a time (fewer points than a merge sort's steps): scipy's on
    every resample all the same."""
    import numpy as np

    from stats.metaeval_questions import _inversion_steps, resampled_tau_b

    rng = np.random.default_rng(raters)
    n = 400
    x = np.round(rng.normal(size=n), 2)
    y = rng.integers(1, 6, (n, raters)).mean(axis=1)
    y[rng.random(n) < 0.1] = np.nan
    ranks = np.unique(y[~np.isnan(y)], return_inverse=True)[1]
    first_step_left = _inversion_steps(ranks)[0][0]
    assert np.array_equal(first_step_left, np.flatnonzero(ranks > 0))  # counted rank by rank
    indices = rng.integers(0, n, (60, n))
    got = resampled_tau_b(x, y, indices)
    for idx, value in zip(indices, got, strict=True):
        keep = ~np.isnan(y[idx])
        assert value == pytest.approx(stats.kendalltau(x[idx][keep], y[idx][keep], variant="b").statistic, abs=1e-12)


def test_resampled_tau_b_of_continuous_values_and_of_nothing():
    """Values without ties at a size that is no power of two (merge steps with a short last
    block), scipy's on every resample; no point with both values gives NaN everywhere."""
    import numpy as np

    from stats.metaeval_questions import resampled_tau_b

    rng = np.random.default_rng(1)
    x, y = rng.normal(size=301), rng.normal(size=301)
    y[::7] = x[::7]  # some agreement, so that tau-b is not near 0 only
    indices = rng.integers(0, 301, (40, 301))
    got = resampled_tau_b(x, y, indices)
    expected = [stats.kendalltau(x[i], y[i], variant="b").statistic for i in indices]
    assert got == pytest.approx(expected, abs=1e-12)
    x[:] = np.nan
    assert np.isnan(resampled_tau_b(x, y, indices)).all()
