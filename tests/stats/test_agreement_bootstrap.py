"""stats.agreement_bootstrap gives the intervals of the resample-by-resample loop
(bootstrap_cis over agreement_report, itself golden-tested against published tables and
the statsmodels, krippendorff and scikit-learn packages), from the same draws."""

import math
import warnings

import krippendorff
import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import cohen_kappa_score

import stats.agreement_bootstrap
from stats.agreement import agreement_report, bootstrap_cis, report_statistics
from stats.agreement_bootstrap import _Items, _statistics, _weights, agreement_cis

SCALE = [1.0, 2.0, 3.0, 4.0, 5.0]


def ratings(seed: int, n_items: int, raters: list[str], missing: float, spread: int = 1) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    rows = []
    for item in range(n_items):
        truth = rng.integers(1, 6)
        for rater in raters:
            if rng.random() < missing:
                continue
            value = int(np.clip(truth + rng.integers(-spread, spread + 1), 1, 5))
            rows.append({"item": f"i{item:03d}", "rater": rater, "value": float(value)})
    return pd.DataFrame(rows)


def loop(frame, n, seed):
    return bootstrap_cis(frame, lambda r: report_statistics(agreement_report(r, SCALE)), n, seed)


@pytest.mark.parametrize(
    ("seed", "n_items", "raters", "missing"),
    [
        (1, 12, ["rater1", "rater2"], 0.0),  # the demo's shape: two raters, every item doubly rated
        (2, 25, ["a", "b", "c"], 0.25),  # missing ratings: several modal sizes, pairs come and go
        (3, 8, ["a", "b", "c", "d"], 0.5),  # small and sparse: many undefined resamples
        (4, 20, ["a", "b", "c", "d", "e"], 0.3),  # ten pairs: blocks of three leave one of one
    ],
)
@pytest.mark.parametrize("pairs_per_block", [None, 3], ids=["as shipped", "three pairs a block"])
def test_the_same_intervals_as_the_loop(seed, n_items, raters, missing, pairs_per_block, monkeypatch):
    if pairs_per_block is not None:  # Cohen's kappa over several blocks of rater pairs
        cells = pairs_per_block * len(SCALE) ** 2 * stats.agreement_bootstrap.CHUNK
        monkeypatch.setattr(stats.agreement_bootstrap, "_PAIR_CELLS", cells)
    frame = ratings(seed, n_items, raters, missing)
    expected = loop(frame, 150, seed=7)
    got = agreement_cis(frame, SCALE, 150, seed=7)
    assert set(got) == set(expected)
    for name, want in expected.items():
        have = got[name]
        assert have.n_undefined == want.n_undefined, name
        assert have.estimate == pytest.approx(want.estimate, abs=1e-12, nan_ok=True), name
        assert have.low == pytest.approx(want.low, abs=1e-9, nan_ok=True), name
        assert have.high == pytest.approx(want.high, abs=1e-9, nan_ok=True), name


def test_each_resample_matches_the_packages():
    """Resample by resample, against krippendorff.alpha and sklearn's cohen_kappa_score run
    on the resampled data itself (an item drawn twice becomes two items)."""
    frame = ratings(4, 20, ["a", "b", "c"], 0.2)
    items = _Items(frame, SCALE)
    rng = np.random.default_rng(11)
    w = _weights(np.random.default_rng(11), items.n, 30)
    computed = dict(zip(*_statistics(items, w), strict=True))
    for b in range(30):
        drawn = rng.integers(0, items.n, size=items.n)
        assert np.array_equal(np.bincount(drawn, minlength=items.n), w[b])
        data = items.values[drawn].T  # raters × items
        for level in ("nominal", "ordinal", "interval"):
            with warnings.catch_warnings(), np.errstate(all="ignore"):
                warnings.simplefilter("ignore")
                want = krippendorff.alpha(reliability_data=data, value_domain=SCALE, level_of_measurement=level)
            assert computed[f"krippendorff_alpha.{level}"][b] == pytest.approx(want, abs=1e-12, nan_ok=True)
        a, c = data[0], data[2]
        both = ~np.isnan(a) & ~np.isnan(c)
        for weighting, weights in (("unweighted", None), ("linear", "linear"), ("quadratic", "quadratic")):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                want = cohen_kappa_score(a[both], c[both], labels=SCALE, weights=weights, replace_undefined_by=np.nan)
            have = computed[f"cohen_kappa.a|c.{weighting}"][b]
            assert have == pytest.approx(want, abs=1e-12) or (math.isnan(have) and math.isnan(want))


def test_undefined_everywhere_when_everyone_agrees_on_one_value():
    frame = pd.DataFrame([{"item": i, "rater": r, "value": 3.0} for i in range(6) for r in ("x", "y")])
    got = agreement_cis(frame, SCALE, 50, seed=1)
    assert got["percent_agreement"].low == got["percent_agreement"].high == 1.0
    assert got["krippendorff_alpha.nominal"].n_undefined == 50
    assert got["fleiss_kappa"].n_undefined == 50


def test_holm_equals_statsmodels():
    from statsmodels.stats.multitest import multipletests

    from stats.metaeval import holm

    rng = np.random.default_rng(3)
    for size in (1, 2, 7, 40):
        p = rng.random(size) ** 3
        p[: size // 3] = p[0]  # ties
        assert holm(p) == pytest.approx(multipletests(p, method="holm")[1].tolist(), abs=1e-15)
    mixed = [0.01, float("nan"), 0.04, 0.03]
    got = holm(mixed)
    assert math.isnan(got[1])
    assert [got[0], got[2], got[3]] == pytest.approx(multipletests([0.01, 0.04, 0.03], method="holm")[1].tolist())
