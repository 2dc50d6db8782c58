"""Every rater pair's Cohen's kappa from one product (stats.agreement.cohen_kappa) is the
value statsmodels' cohens_kappa and scikit-learn's cohen_kappa_score give pair by pair."""

import math
from itertools import combinations

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import cohen_kappa_score
from statsmodels.stats.inter_rater import cohens_kappa

from stats.agreement import cohen_kappa, pairwise_kappas

SCALE = [1.0, 2.0, 3.0, 4.0, 5.0]
WEIGHTINGS = {"unweighted": None, "linear": "linear", "quadratic": "quadratic"}


def statsmodels_kappa(table: np.ndarray, weighting: str | None) -> float:
    with np.errstate(divide="ignore", invalid="ignore"):
        value = float(cohens_kappa(table, wt=weighting, return_results=False))
    return value if math.isfinite(value) else math.nan


def test_each_table_as_statsmodels_gives_it():
    rng = np.random.default_rng(11)
    tables = [rng.integers(0, 6, (5, 5)) for _ in range(200)]
    # One category only (chance agreement 1: undefined) and one rater constant.
    tables += [np.diag([0, 7, 0, 0, 0]), np.outer([0, 1, 2, 0, 0], [0, 0, 3, 1, 0])]
    got = pairwise_kappas(np.stack([*tables, np.zeros((5, 5))]).astype(float))
    assert all(math.isnan(got[name][-1]) for name in WEIGHTINGS)  # no item: statsmodels refuses it
    for k, table in enumerate(tables):
        for name, weighting in WEIGHTINGS.items():
            want = statsmodels_kappa(table, weighting)
            assert got[name][k] == pytest.approx(want, abs=1e-12, nan_ok=True), (k, name)


def test_every_pair_of_a_sparse_crowd_as_scikit_learn_gives_it():
    """Twelve raters, each item rated by three of them: most pairs share no item (n 0, NaN);
    the others match cohen_kappa_score over the full scale on their co-rated items."""
    rng = np.random.default_rng(5)
    raters = [f"r{k:02d}" for k in range(12)]
    rows = []
    for item in range(300):
        truth = rng.integers(1, 6)
        for rater in rng.choice(raters, 3, replace=False):
            value = int(np.clip(truth + rng.integers(-1, 2), 1, 5))
            rows.append({"item": item, "rater": rater, "value": float(value)})
    frame = pd.DataFrame(rows)
    pairs = cohen_kappa(frame, SCALE)
    assert [(p.rater_a, p.rater_b) for p in pairs] == list(combinations(raters, 2))
    wide = frame.pivot(index="item", columns="rater", values="value")
    for pair in pairs:
        both = wide[[pair.rater_a, pair.rater_b]].dropna()
        assert pair.n == len(both)
        for name, weighting in WEIGHTINGS.items():
            if both.empty:
                assert math.isnan(getattr(pair, name))
                continue
            with np.errstate(divide="ignore", invalid="ignore"):
                want = cohen_kappa_score(both.iloc[:, 0], both.iloc[:, 1], labels=SCALE, weights=weighting)
            assert getattr(pair, name) == pytest.approx(want, abs=1e-12, nan_ok=True), (pair, name)
