"""The power simulation against closed forms and known parameters."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy.stats import ttest_rel
from statsmodels.stats.power import TTestPower

from stats.power import (
    PointwiseDesign,
    PowerInputError,
    SideBySideDesign,
    pilot_estimate,
    pointwise_power,
    side_by_side_power,
    simulate_pointwise_answers,
)


def paired_t(alpha):
    def decide(table):
        return ttest_rel(table[:, 0], table[:, 1]).pvalue < alpha

    return decide


@pytest.mark.parametrize("n_items", [8, 15, 30])
def test_simulated_power_of_a_paired_t_test_matches_statsmodels(n_items):
    # Normal data, one rater: each source's difference A - B has SD sigma * sqrt(2).
    design = PointwiseDesign(effect=0.5, item_sd=0.7, rater_sd=0.0, residual_sd=1.0, raters_per_item=1, scale=None)
    simulations = 1500
    curve = pointwise_power(design, [n_items], simulations=simulations, seed=n_items, decide=paired_t(0.05))
    expected = TTestPower().power(effect_size=0.5 / math.sqrt(2), nobs=n_items, alpha=0.05, alternative="two-sided")
    point = curve.points[0]
    # Four standard errors of the expected share: a wrong engine misses by far more.
    assert abs(point.power - expected) < 4 * math.sqrt(expected * (1 - expected) / simulations)
    assert point.mc_error == pytest.approx(math.sqrt(point.power * (1 - point.power) / simulations))


def test_report_test_rejects_at_most_alpha_under_the_null_and_gains_power_with_items():
    null = PointwiseDesign(effect=0.0, scale=None, n_systems=3)
    curve = pointwise_power(null, [20], simulations=400, seed=1)
    assert curve.points[0].power < 0.05 + 4 * math.sqrt(0.05 * 0.95 / 400)
    design = PointwiseDesign(effect=0.6, n_systems=3)
    curve = pointwise_power(design, [5, 15, 40], simulations=150, seed=2, target=0.8)
    powers = [p.power for p in curve.points]
    assert powers[0] < powers[1] < powers[2]
    assert curve.smallest_n == next(p.n_items for p in curve.points if p.power >= 0.8)


def test_the_same_seed_gives_the_same_curve_and_grid_points_keep_their_values():
    design = PointwiseDesign(effect=0.4)
    first = pointwise_power(design, [10, 20], simulations=40, seed=7)
    again = pointwise_power(design, [10, 20], simulations=40, seed=7)
    assert first == again
    other = pointwise_power(design, [10, 20], simulations=40, seed=8)
    assert first.points != other.points


def test_side_by_side_power_grows_with_items_and_intervals_narrow():
    design = SideBySideDesign(effect=1.0, n_systems=3, n_resamples=100)
    curve = side_by_side_power(design, [15, 120], simulations=40, seed=3)
    small, large = curve.points
    assert small.power < large.power
    assert large.interval_width < small.interval_width


def test_pilot_estimate_recovers_the_parameters_that_made_the_data():
    design = PointwiseDesign(
        effect=0.8, item_sd=0.6, rater_sd=0.5, residual_sd=0.7, raters_per_item=3, n_raters=6, scale=None, n_systems=3
    )
    answers, system, source = simulate_pointwise_answers(design, 600, np.random.default_rng(0))
    found = pilot_estimate(answers, system, source)
    assert found.n_sources == 600 and found.n_raters == 6
    assert found.effect == pytest.approx(0.8, abs=0.1)
    assert found.residual_sd == pytest.approx(0.7, abs=0.05)
    assert found.item_sd == pytest.approx(0.6, abs=0.08)
    # Six raters: their SD is known to about a third of itself.
    assert 0.2 < found.rater_sd < 0.9
    assert found.raters_per_item == pytest.approx(3)


@pytest.mark.parametrize(
    "design",
    [
        PointwiseDesign(effect=1, n_systems=1),
        PointwiseDesign(effect=1, raters_per_item=3, n_raters=2),
        PointwiseDesign(effect=1, residual_sd=-1),
        PointwiseDesign(effect=1, alpha=1.5),
    ],
)
def test_impossible_designs_are_refused(design):
    with pytest.raises(PowerInputError):
        pointwise_power(design, [10], simulations=5)


def test_pilot_needs_two_summaries():
    answers = pd.DataFrame({"item": ["1", "1"], "rater": [1, 2], "question": "q", "score": [3.0, 4.0]})
    with pytest.raises(PowerInputError):
        pilot_estimate(answers, pd.Series({"1": "A"}), pd.Series({"1": "x"}))


@pytest.mark.parametrize("n", [5, 9, 13, 14, 30])
def test_batched_wilcoxon_gives_scipys_p_row_by_row(n):
    from scipy.stats import wilcoxon

    from stats.power import wilcoxon_p

    rng = np.random.default_rng(n)
    # Half-point differences on a rating scale (ties and zeros), continuous ones (neither),
    # and a row of zeros only.
    rows = np.vstack(
        [rng.integers(-4, 5, (8 if n <= 13 else 40, n)) / 2, rng.normal(0.3, 1, (10, n)), np.zeros((1, n))]
    )
    found = wilcoxon_p(rows)
    for row, p in zip(rows, found, strict=True):
        if not row.any():
            assert np.isnan(p)
            continue
        assert p == pytest.approx(wilcoxon(row, zero_method="wilcox").pvalue, rel=1e-9, abs=1e-15)


@pytest.mark.parametrize("seed", range(6))
def test_the_table_path_gives_the_reports_p_holm_on_the_same_study(seed):
    from stats.compare import paired_comparisons, summary_scores
    from stats.power import _table, tables_p_holm

    design = PointwiseDesign(effect=0.3, n_systems=3, raters_per_item=2, n_raters=4)
    n_items = 6 + 3 * seed
    answers, system, source = simulate_pointwise_answers(design, n_items, np.random.default_rng(seed))
    table = _table(design, n_items, np.random.default_rng(seed))
    report = paired_comparisons(summary_scores(answers, ["q"]), system, source, n_resamples=0)["q"]
    expected = next(r["p_holm"] for r in report if (r["a"], r["b"]) == ("A", "B"))
    found = tables_p_holm(table[None])[0]
    assert np.isnan(found) == (expected is None)
    if expected is not None:
        assert found == pytest.approx(expected, rel=1e-9)
