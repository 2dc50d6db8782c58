"""Meta-evaluation: how well an automatic metric tracks human scores.

Inputs are per-item scores (one human score and one score per metric for each item).
Items missing either score are dropped pairwise and counted. Undefined statistics are
NaN in the dataclasses and ``None`` in the JSON-ready report.

Contents: Spearman's rho and Kendall's tau-b (scipy, with p-values), Holm's correction
(statsmodels), pairwise accuracy with tie calibration ``acc_eq`` (Deutsch, Foster &
Freitag 2023, implemented here: no package exists), and a KL divergence between
standardised score distributions (FactPICO, Joseph et al. 2024, Table 11).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats
from scipy.integrate import trapezoid

from stats import tie_calibration
from stats.frames import numeric_array

__all__ = [
    "AccEqResult",
    "CorrelationResult",
    "MetaEvalInputError",
    "acc_eq",
    "correlate_report",
    "holm",
    "kendall_tau_b",
    "kl_divergence",
    "standardised_densities",
    "spearman",
]

# Below this many paired items a rank correlation and its p-value say nothing useful.
MIN_ITEMS_FOR_CORRELATION = 3


class MetaEvalInputError(ValueError):
    """Scores cannot be meta-evaluated as given (missing column, non-numeric values, ...)."""


@dataclass(frozen=True)
class CorrelationResult:
    """A correlation coefficient with its two-sided p-value over ``n`` paired items."""

    statistic: float
    pvalue: float
    n: int


@dataclass(frozen=True)
class AccEqResult:
    """Pairwise accuracy with tie calibration.

    ``at_zero`` is acc_eq with epsilon = 0, ``value`` the calibrated acc_eq at the
    chosen ``epsilon``. ``n_items`` items (after dropping ``n_dropped`` with a missing
    score) in ``n_groups`` groups of >= 2 items gave ``n_pairs`` within-group pairs.
    """

    at_zero: float
    value: float
    epsilon: float
    n_items: int
    n_dropped: int
    n_groups: int
    n_pairs: int


def _none_if_nan(value: float) -> float | None:
    return None if value is None or not math.isfinite(value) else float(value)


def _as_float_array(values: Any, name: str) -> np.ndarray:
    return numeric_array(values, name, MetaEvalInputError)


def _paired(human: Any, metric: Any) -> tuple[np.ndarray, np.ndarray]:
    h = _as_float_array(human, "human")
    m = _as_float_array(metric, "metric")
    if h.shape != m.shape or h.ndim != 1:
        raise MetaEvalInputError(f"human and metric must be 1-D and equally long, got {h.shape} and {m.shape}.")
    keep = ~(np.isnan(h) | np.isnan(m))
    return h[keep], m[keep]


# --- correlations ------------------------------------------------------------------


def _correlation(test: Any, human: Any, metric: Any) -> CorrelationResult:
    h, m = _paired(human, metric)
    n = int(h.size)
    if n < MIN_ITEMS_FOR_CORRELATION or np.all(h == h[0]) or np.all(m == m[0]):
        # A constant input has no ranking: the coefficient is undefined, not zero.
        return CorrelationResult(statistic=math.nan, pvalue=math.nan, n=n)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = test(h, m)
    return CorrelationResult(statistic=float(result.statistic), pvalue=float(result.pvalue), n=n)


def spearman(human: Any, metric: Any) -> CorrelationResult:
    """Spearman's rho (``scipy.stats.spearmanr``; ties get average ranks).

    Pairs with a missing score are dropped. NaN with fewer than 3 pairs or a constant
    input. The p-value is scipy's two-sided t-approximation.
    """
    return _correlation(stats.spearmanr, human, metric)


def kendall_tau_b(human: Any, metric: Any) -> CorrelationResult:
    """Kendall's tau-b (``scipy.stats.kendalltau``, variant ``"b"``: corrected for ties).

    Pairs with a missing score are dropped. NaN with fewer than 3 pairs or a constant
    input. scipy picks the exact p-value for small samples without ties and the normal
    approximation otherwise.
    """
    return _correlation(lambda h, m: stats.kendalltau(h, m, variant="b"), human, metric)


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm–Bonferroni adjusted p-values (``statsmodels multipletests(method="holm")``).

    NaN p-values (undefined tests) stay NaN and are not counted as tests in the family.
    """
    p = np.asarray(pvalues, dtype=float)
    adjusted = np.full(p.shape, np.nan)
    finite = np.isfinite(p)
    if finite.any():
        # statsmodels' own steps, in numpy: its multipletests runs gc.collect() on every
        # call, which the report would pay per family (tests/analysis compares the two).
        family = p[finite]
        order = np.argsort(family)
        steps = np.arange(family.size, 0, -1) * family[order]
        corrected = np.minimum(np.maximum.accumulate(steps), 1.0)
        result = np.empty(family.size)
        result[order] = corrected
        adjusted[finite] = result
    return adjusted.tolist()


# --- pairwise accuracy with tie calibration -----------------------------------------


MAX_GRID_DECIMALS = 12


def decimal_grid(values: np.ndarray) -> tuple[np.ndarray, float]:
    """(values × 10^k as exact integers, 10^k) when every value is given to at most
    MAX_GRID_DECIMALS decimals, k the most any value has; else (values, 1.0) unchanged.

    A value's decimals are those of its shortest round-tripping decimal form (Python's repr:
    0.3 is "0.3", not 0.299999999999999988898). On that grid every difference is an exact
    integer (all below 2^53), so |0.7 - 0.4| and |0.3 - 0.0| are both exactly 3 units:
    mathematically equal metric differences tie, and unequal ones stay apart. Values with
    more decimals (a full-precision float) are left as they are: their differences carry
    no decimal meaning to preserve."""
    if values.size == 0:
        return values, 1.0
    decimals = 0
    for value in np.unique(values):
        text = np.format_float_positional(value, unique=True, trim="-")
        if "e" in text or "inf" in text or "nan" in text:
            return values, 1.0
        places = len(text.split(".", 1)[1]) if "." in text else 0
        if places > MAX_GRID_DECIMALS:
            return values, 1.0
        decimals = max(decimals, places)
    unit = 10.0**decimals
    scaled = np.round(values * unit)
    if np.abs(scaled).max() >= 2**53:
        return values, 1.0
    return scaled, unit


def acc_eq(human: Any, metric: Any, groups: Any = None) -> AccEqResult:
    """Pairwise accuracy with tie calibration (Deutsch, Foster & Freitag 2023, "Ties Matter").

    Over every pair of items (no sampling) a pair is correct when human and metric order
    it the same way or both tie. Human scores tie only when equal; metric scores tie
    when they differ by at most epsilon. acc_eq(eps) = correct pairs / all pairs.
    Tie calibration picks the epsilon maximising acc_eq among {0} ∪ {|m_i - m_j|}; on
    equal maxima the smallest epsilon wins (maxima are compared exactly, in rationals).
    Metric values given to at most 12 decimals are compared on their decimal grid
    (decimal_grid), so mathematically equal differences are equal.

    With ``groups`` (e.g. the source document) only pairs within a group count, acc_eq
    is the unweighted mean of the per-group accuracies at ONE shared epsilon, and groups
    with fewer than 2 items are skipped. Items missing a human score, metric score or
    group label are dropped first.

    Computation: each pair is correct on an interval of epsilon ([d, inf) for human
    ties, [0, d) for concordant pairs), so only {0} and the human-tie differences are
    candidates: between two of them no pair becomes correct and concordant pairs can only
    drop out. The pairs correct at an epsilon are counted, not listed
    (stats.tie_calibration): intervals of epsilons that cannot hold the maximum are
    dropped, the rest split until few pairs are left to list; the near-maximal candidates
    are then compared exactly, in rationals.
    """
    h_all = _as_float_array(human, "human")
    m_all = _as_float_array(metric, "metric")
    if h_all.ndim != 1 or h_all.shape != m_all.shape:
        raise MetaEvalInputError(f"human and metric must be 1-D and equally long, got {h_all.shape}, {m_all.shape}.")
    if groups is None:
        group_labels = pd.Series(np.zeros(h_all.size, dtype=np.int64))
    else:
        group_labels = pd.Series(groups).reset_index(drop=True)
        if group_labels.size != h_all.size:
            raise MetaEvalInputError(f"groups must have one label per item, got {group_labels.size} for {h_all.size}.")
    keep = ~(np.isnan(h_all) | np.isnan(m_all) | group_labels.isna().to_numpy())
    h, m = h_all[keep], m_all[keep]
    # Differences of values given to a few decimals are computed exactly (decimal_grid), so
    # mathematically equal differences tie and unequal ones never merge by rounding noise.
    m, unit = decimal_grid(m)
    codes, _ = pd.factorize(group_labels[keep], sort=True)
    n_dropped = int((~keep).sum())

    lay = tie_calibration.layout(h, m, codes)
    if not lay.n_groups:
        return AccEqResult(math.nan, math.nan, math.nan, int(h.size), n_dropped, 0, 0)
    # Float sums of n weights (each group's add up to 1) are off by at most a few n units in
    # the last place per group: candidates within that of the best are compared exactly.
    epsilons = tie_calibration.calibrate(lay, tolerance=lay.n_groups * (1e-9 + 8 * h.size * np.finfo(float).eps))
    exact = tie_calibration.exact(lay, epsilons)
    best = exact.index(max(exact))  # epsilons ascend, so the first maximum is the smallest epsilon
    return AccEqResult(
        at_zero=float(exact[0]),
        value=float(exact[best]),
        epsilon=abs(float(epsilons[best])) / unit,  # abs: a difference of 0.0 and -0.0 is -0.0
        n_items=int(h.size),
        n_dropped=n_dropped,
        n_groups=lay.n_groups,
        n_pairs=int(lay.pairs.sum()),
    )


# --- distribution distance -----------------------------------------------------------


def _scott_bandwidth(data: np.ndarray) -> float:
    """scipy.stats.gaussian_kde's kernel standard deviation in one dimension: the
    sample's sd (ddof=1) times Scott's factor n ** (-1/5)."""
    return float(np.sqrt(np.cov(data, ddof=1)) * data.size ** (-1 / 5))


def _gaussian_kde(data: np.ndarray, width: float, grid: np.ndarray) -> np.ndarray:
    """gaussian_kde(data)(grid) for one dimension, in numpy: the mean of normal densities
    of sd `width` centred on the data (scipy's evaluate solves a triangular system per
    call; tests/analysis compares the two). Each distinct value's density is computed
    once and counted as often as it occurs: human scores (means of a few ratings) take
    few values."""
    values, counts = np.unique(data, return_counts=True)
    z = (grid[:, None] - values[None, :]) / width
    return np.exp(-0.5 * z * z) @ counts / (data.size * width * math.sqrt(2 * math.pi))


def standardised_densities(
    reference: Any, other: Any, *, grid_size: int = 2048
) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """(grid, p, q): the Gaussian KDEs of the two z-scored samples on one shared grid, each
    normalised to integrate to 1 (steps 1-3 of kl_divergence; the report's density plots
    draw them). None when either sample has fewer than 2 values or zero variance."""
    p_sample = _as_float_array(reference, "reference")
    q_sample = _as_float_array(other, "other")
    p_sample, q_sample = p_sample[~np.isnan(p_sample)], q_sample[~np.isnan(q_sample)]
    if min(p_sample.size, q_sample.size) < 2 or np.ptp(p_sample) == 0 or np.ptp(q_sample) == 0:
        return None
    p_data, q_data = stats.zscore(p_sample), stats.zscore(q_sample)
    p_width, q_width = _scott_bandwidth(p_data), _scott_bandwidth(q_data)
    widest = max(p_width, q_width)
    lo = min(p_data.min(), q_data.min()) - 6 * widest
    hi = max(p_data.max(), q_data.max()) + 6 * widest
    grid = np.linspace(lo, hi, grid_size)
    p = _gaussian_kde(p_data, p_width, grid)
    q = np.maximum(_gaussian_kde(q_data, q_width, grid), np.finfo(float).tiny)
    return grid, p / trapezoid(p, grid), q / trapezoid(q, grid)


def kl_divergence(reference: Any, other: Any, *, grid_size: int = 2048) -> float:
    """KL(reference || other) between the standardised score distributions, in nats.

    FactPICO (Joseph et al. 2024, App. G, Table 11) reports a KL divergence between the
    "standardized distributions" of each metric and of the averaged human rating,
    plotted as Gaussian density estimates, without further detail. Our choice:

    1. drop NaN and z-score each sample on its own (population sd, ``ddof=0``), so only
       the shape of the distribution matters, not its location or scale;
    2. estimate each density with a Gaussian KDE (``scipy.stats.gaussian_kde``, Scott's
       bandwidth); a Gaussian fit would make every standardised distribution N(0, 1);
    3. evaluate both on one shared grid of ``grid_size`` points spanning both samples
       +/- 6 bandwidths, renormalise each to integrate to 1 on the grid (trapezoid), and
       integrate p log(p / q) with the trapezoid rule. KDE densities are positive
       everywhere, so no extra smoothing is needed; q is floored at the smallest
       positive float only to keep far tails finite.

    ``reference`` is the human score (the expectation is taken under it). NaN when
    either sample has fewer than 2 values or zero variance.
    """
    densities = standardised_densities(reference, other, grid_size=grid_size)
    if densities is None:
        return math.nan
    grid, p, q = densities
    integrand = np.where(p > 0, p * (np.log(np.where(p > 0, p, 1.0)) - np.log(q)), 0.0)
    return max(0.0, float(trapezoid(integrand, grid)))


# --- report ------------------------------------------------------------------------------


def correlate_report(
    frame: pd.DataFrame,
    human_col: str,
    metric_cols: Sequence[str],
    group_col: str | None = None,
) -> dict[str, Any]:
    """Spearman, Kendall tau-b and acc_eq of every metric column against the human column.

    ``frame`` has one row per item. For each metric, rows missing the human or the
    metric score are dropped and counted (``dropped``). Correlations pool all items;
    ``group_col`` (e.g. the source document) only groups acc_eq. Holm's correction is
    applied across the metrics, separately for the Spearman and the Kendall p-values.
    Returns a JSON-ready dict (``None`` where undefined, never NaN).
    """
    wanted = [human_col, *metric_cols] + ([group_col] if group_col is not None else [])
    missing = [c for c in wanted if c not in frame.columns]
    if missing:
        raise MetaEvalInputError(f"Frame lacks column(s) {missing}; it has {list(frame.columns)}.")
    if len(set(metric_cols)) != len(metric_cols) or human_col in metric_cols:
        raise MetaEvalInputError("metric_cols must be distinct and must not include the human column.")
    if group_col is not None and frame[group_col].isna().any():
        raise MetaEvalInputError(f"Column {group_col!r} has missing group labels.")

    human = _as_float_array(frame[human_col], human_col)
    groups = frame[group_col].reset_index(drop=True) if group_col is not None else None
    rows: dict[str, dict[str, Any]] = {}
    rho: dict[str, CorrelationResult] = {}
    tau: dict[str, CorrelationResult] = {}
    for col in metric_cols:
        metric = _as_float_array(frame[col], col)
        keep = ~(np.isnan(human) | np.isnan(metric))
        rho[col] = spearman(human[keep], metric[keep])
        tau[col] = kendall_tau_b(human[keep], metric[keep])
        accuracy = acc_eq(human[keep], metric[keep], None if groups is None else groups[keep].reset_index(drop=True))
        rows[col] = {
            "n": int(keep.sum()),
            "dropped": int((~keep).sum()),
            "acc_eq": {
                "at_zero": _none_if_nan(accuracy.at_zero),
                "value": _none_if_nan(accuracy.value),
                "epsilon": _none_if_nan(accuracy.epsilon),
            },
        }
    rho_holm = holm([rho[c].pvalue for c in metric_cols])
    tau_holm = holm([tau[c].pvalue for c in metric_cols])
    metrics: dict[str, dict[str, Any]] = {}
    for i, col in enumerate(metric_cols):
        metrics[col] = {
            "n": rows[col]["n"],
            "dropped": rows[col]["dropped"],
            "spearman": {
                "rho": _none_if_nan(rho[col].statistic),
                "p": _none_if_nan(rho[col].pvalue),
                "p_holm": _none_if_nan(rho_holm[i]),
            },
            "kendall_tau_b": {
                "tau": _none_if_nan(tau[col].statistic),
                "p": _none_if_nan(tau[col].pvalue),
                "p_holm": _none_if_nan(tau_holm[i]),
            },
            "acc_eq": rows[col]["acc_eq"],
        }
    return {"metrics": metrics}
