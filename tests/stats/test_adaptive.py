"""The adaptive side-by-side rule: its uncertainty against a logistic regression, its
choices, and a seeded simulation against the uniform all-pairs design."""

from __future__ import annotations

import numpy as np
import pytest
import statsmodels.api as sm

from stats.adaptive import compare_designs, next_pair, resolved, shown_order, uncertainty


def judgements(rng, strengths, n):
    k = len(strengths)
    rows = []
    for _ in range(n):
        i, j = rng.choice(k, 2, replace=False)
        won = rng.random() < 1 / (1 + np.exp(-(strengths[i] - strengths[j])))
        rows.append((i, j) if won else (j, i))
    return rows


def test_standard_errors_match_a_logistic_regression_of_the_same_judgements():
    rng = np.random.default_rng(4)
    strengths = np.array([0.8, 0.0, -0.5])
    rows = judgements(rng, strengths, 300)
    counts = np.zeros((3, 3))
    for w, lost in rows:
        counts[w, lost] += 2  # a decisive judgement is two half-wins
    theta, se = uncertainty(counts, alpha=0.0)
    # The same model as a logistic regression: the first listed system won, with
    # columns x_s = +1 for the first, -1 for the second, system 2 the reference.
    design, won = [], []
    for w, lost in rows:
        first, second = (w, lost) if rng.random() < 0.5 else (lost, w)
        x = np.zeros(3)
        x[first], x[second] = 1.0, -1.0
        design.append(x[:2])
        won.append(float(first == w))
    fit = sm.Logit(np.array(won), np.array(design)).fit(disp=0)
    assert theta[0] - theta[2] == pytest.approx(fit.params[0], abs=1e-6)
    assert se[0, 2] == pytest.approx(fit.bse[0], rel=1e-4)
    assert se[1, 2] == pytest.approx(fit.bse[1], rel=1e-4)
    difference = np.array([1.0, -1.0])
    assert se[0, 1] == pytest.approx(np.sqrt(difference @ fit.cov_params() @ difference), rel=1e-4)


def test_every_pair_is_compared_once_before_the_rule_chooses():
    counts = np.zeros((4, 4))
    seen = set()
    for _ in range(6):
        pair = next_pair(counts)
        assert pair not in seen
        seen.add(pair)
        counts[pair] += 2
    assert len(seen) == 6


def test_the_rule_asks_about_the_close_pair_not_the_settled_one():
    # A beats B and C by far and often; B and C are close and barely compared.
    counts = np.zeros((3, 3))
    counts[0, 1] = counts[0, 2] = 2 * 60
    counts[1, 0] = counts[2, 0] = 2 * 2
    counts[1, 2], counts[2, 1] = 2 * 2, 2 * 2
    assert next_pair(counts) == (1, 2)
    assert not resolved(counts)
    counts[1, 2], counts[2, 1] = 2 * 200, 2 * 40
    assert resolved(counts)


def test_a_pair_is_shown_in_alternating_order():
    assert [shown_order((1, 3), t) for t in range(4)] == [(1, 3), (3, 1), (1, 3), (3, 1)]


def test_the_adaptive_design_needs_fewer_judgements_than_uniform_all_pairs():
    budgets = range(60, 601, 60)
    found = compare_designs(np.linspace(0.0, 2.0, 6), budgets, runs=40, seed=1)
    assert found.adaptive_needs is not None
    assert found.uniform_needs is None or found.adaptive_needs < found.uniform_needs
    # Summed over the budgets, the adaptive rule recovers the order more often.
    assert sum(found.adaptive_share) > sum(found.uniform_share)
    assert compare_designs(np.linspace(0.0, 2.0, 6), budgets, runs=40, seed=1) == found
