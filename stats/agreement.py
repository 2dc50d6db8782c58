"""Inter-rater agreement over a tidy ratings frame.

Every function takes the tidy frame described in :mod:`stats.frames` (columns
``item``, ``rater``, ``value``; NaN for a missing rating) and the FULL rating scale,
used or not. Functions return plain floats (NaN when a coefficient is undefined for
the data, e.g. when every rating falls in one category) or small frozen dataclasses.
Invalid input raises :class:`AgreementInputError`.

The exact statistical choices are written in each docstring and in docs/statistics.md.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations
from typing import Any, Literal

import krippendorff
import numpy as np
import pandas as pd
from scipy import sparse
from statsmodels.stats import inter_rater

from stats.frames import (
    ITEM,
    AgreementInputError,
    scale_codes,
    to_wide,
    validate_ratings,
    validate_scale,
)

__all__ = [
    "AgreementInputError",
    "AgreementReport",
    "AlphaByLevel",
    "BootstrapResult",
    "KappaResult",
    "PairwiseKappa",
    "agreement_report",
    "bootstrap_ci",
    "bootstrap_cis",
    "cohen_kappa",
    "fleiss_kappa",
    "gwet_ac1",
    "krippendorff_alpha",
    "pabak",
    "percent_agreement",
    "randolph_kappa",
    "report_statistics",
]

AlphaLevel = Literal["nominal", "ordinal", "interval"]


@dataclass(frozen=True)
class PairwiseKappa:
    """Cohen's kappa for one rater pair, over the items both raters rated."""

    rater_a: Any
    rater_b: Any
    n: int
    unweighted: float
    linear: float
    quadratic: float


@dataclass(frozen=True)
class KappaResult:
    """A multi-rater kappa and the subset it was computed on.

    ``n_items`` items, each with exactly ``ratings_per_item`` ratings, were used.
    """

    value: float
    n_items: int
    ratings_per_item: int


@dataclass(frozen=True)
class AlphaByLevel:
    """Krippendorff's alpha at the three levels of measurement we report."""

    nominal: float
    ordinal: float
    interval: float


@dataclass(frozen=True)
class BootstrapResult:
    """Percentile bootstrap interval over items.

    ``n_undefined`` resamples gave an undefined statistic (NaN, or input the statistic
    refused, e.g. a resample left with one rater); the percentiles use the others.
    """

    estimate: float
    low: float
    high: float
    confidence_level: float
    n_resamples: int
    n_undefined: int


def _none_if_nan(value: float) -> float | None:
    return None if value is None or not math.isfinite(value) else float(value)


@dataclass(frozen=True)
class AgreementReport:
    """Every agreement statistic for one question's ratings. ``n_items`` counts the items with
    at least one rating, ``n_items_shared`` those rated by two raters or more (the only
    ones agreement can be read on)."""

    n_items: int
    n_raters: int
    percent_agreement: float
    fleiss_kappa: KappaResult
    randolph_kappa: KappaResult
    gwet_ac1: float
    pabak: float
    krippendorff_alpha: AlphaByLevel
    cohen_kappa: tuple[PairwiseKappa, ...]
    n_items_shared: int = 0

    def to_json_dict(self) -> dict[str, Any]:
        """JSON-ready dict; undefined values are ``None`` (JSON has no NaN)."""
        return {
            "n_items": self.n_items,
            "n_items_shared": self.n_items_shared,
            "n_raters": self.n_raters,
            "percent_agreement": _none_if_nan(self.percent_agreement),
            "fleiss_kappa": _none_if_nan(self.fleiss_kappa.value),
            "randolph_kappa": _none_if_nan(self.randolph_kappa.value),
            "gwet_ac1": _none_if_nan(self.gwet_ac1),
            "pabak": _none_if_nan(self.pabak),
            "krippendorff_alpha": {
                "nominal": _none_if_nan(self.krippendorff_alpha.nominal),
                "ordinal": _none_if_nan(self.krippendorff_alpha.ordinal),
                "interval": _none_if_nan(self.krippendorff_alpha.interval),
            },
            "cohen_kappa": [
                {
                    "rater_a": pair.rater_a,
                    "rater_b": pair.rater_b,
                    "n": pair.n,
                    "unweighted": _none_if_nan(pair.unweighted),
                    "linear": _none_if_nan(pair.linear),
                    "quadratic": _none_if_nan(pair.quadratic),
                }
                for pair in self.cohen_kappa
            ],
        }


# --- helpers -----------------------------------------------------------------------


def _observed_agreement(table: np.ndarray) -> float:
    """Mean over items with >= 2 ratings of the share of agreeing rater pairs.

    ``table`` is items × categories counts. For an item with r ratings, r_k of them in
    category k, the share is sum_k r_k (r_k - 1) / (r (r - 1)) (Fleiss 1971; Gwet's p_a).
    """
    ratings = table.sum(axis=1)
    usable = ratings >= 2
    if not usable.any():
        return math.nan
    counts = table[usable].astype(float)
    r = ratings[usable].astype(float)
    return float(((counts * (counts - 1)).sum(axis=1) / (r * (r - 1))).mean())


def _modal_complete_table(table: np.ndarray) -> tuple[np.ndarray, int]:
    """Rows of ``table`` whose number of ratings equals the modal number (>= 2).

    Fleiss' and Randolph's kappa assume every item has the same number of ratings. We
    keep the items with the most common number of ratings (ties broken towards more
    ratings, since more raters per item gives a more stable per-item agreement) and
    drop the rest; callers report how many items were kept.
    """
    ratings = table.sum(axis=1)
    candidates = ratings[ratings >= 2]
    if candidates.size == 0:
        return table[:0], 0
    sizes, freq = np.unique(candidates, return_counts=True)
    modal = int(sizes[freq == freq.max()].max())
    return table[ratings == modal], modal


# --- statistics --------------------------------------------------------------------


@dataclass(frozen=True)
class _Prepared:
    """A validated frame in the shapes the statistics need, built once per report."""

    scale: tuple[float, ...]
    wide: pd.DataFrame  # items × raters, NaN = not rated (items without any rating kept)
    table: np.ndarray  # items × FULL-scale counts, rows in the order of ``wide``


def _prepare(frame: pd.DataFrame, scale: Sequence[float]) -> _Prepared:
    clean = validate_ratings(frame, scale)
    scale_values = validate_scale(scale)
    wide = to_wide(clean)
    values = wide.to_numpy(dtype=float)
    table = np.zeros((values.shape[0], len(scale_values)), dtype=np.int64)
    rows, cols = np.nonzero(~np.isnan(values))
    np.add.at(table, (rows, scale_codes(values[rows, cols], scale_values)), 1)
    return _Prepared(scale=scale_values, wide=wide, table=table)


def percent_agreement(frame: pd.DataFrame, scale: Sequence[float]) -> float:
    """Raw pairwise agreement.

    For every item with at least two ratings, the share of its unordered rater pairs
    that gave the same value; the item shares are averaged with equal weight per item.
    With two raters this is the proportion of co-rated items on which they agree.
    Items with fewer than two ratings are ignored. NaN when no item has two ratings.
    """
    return _observed_agreement(_prepare(frame, scale).table)


def cohen_kappa(frame: pd.DataFrame, scale: Sequence[float]) -> tuple[PairwiseKappa, ...]:
    """Cohen's kappa for every pair of raters, on the items both of them rated.

    Unweighted, linear and quadratic weights as ``sklearn.metrics.cohen_kappa_score``
    gives them with ``labels=scale`` (computed by statsmodels' ``cohens_kappa`` from the
    pair's table over the full scale): weights are spread over the positions of the FULL scale, so
    an unused category still counts as a step between its neighbours. A pair with no
    co-rated item, or whose chance agreement is 1, gets NaN.
    """
    return _cohen_kappa(_prepare(frame, scale))


def _cohen_kappa(prepared: _Prepared) -> tuple[PairwiseKappa, ...]:
    # Every pair's contingency table over the FULL scale comes from one sparse product:
    # X is items x (rater, scale position) indicators, and X'X holds, for raters a and b,
    # the counts of (a's position, b's position) over the items both rated.
    size = len(prepared.scale)
    wide = prepared.wide.loc[:, prepared.wide.notna().any(axis=0)]
    values = wide.to_numpy(dtype=float)
    n_raters = values.shape[1]
    items, raters = np.nonzero(~np.isnan(values))
    columns = raters * size + scale_codes(values[items, raters], prepared.scale)
    indicators = sparse.csr_matrix((np.ones(len(items)), (items, columns)), shape=(len(values), n_raters * size))
    cooccurrence = (indicators.T @ indicators).tocoo()
    first, second = cooccurrence.row // size, cooccurrence.col // size
    keep = first < second
    first, second = first[keep], second[keep]
    # The pair's place in combinations(range(n_raters), 2).
    pair = first * n_raters - first * (first + 1) // 2 + second - first - 1
    cell = (cooccurrence.row[keep] % size) * size + cooccurrence.col[keep] % size
    rated_pairs, slot = np.unique(pair, return_inverse=True)
    tables = np.zeros((len(rated_pairs), size * size))
    np.add.at(tables, (slot, cell), cooccurrence.data[keep])
    kappas = pairwise_kappas(tables.reshape(-1, size, size))
    counts = tables.sum(axis=1)
    where = {pair: k for k, pair in enumerate(rated_pairs.tolist())}
    labels = [_plain(label) for label in wide.columns]
    results: list[PairwiseKappa] = []
    for index, (a, b) in enumerate(combinations(range(n_raters), 2)):
        k = where.get(index)
        found = _NO_KAPPA if k is None else {name: float(kappas[name][k]) for name in _NO_KAPPA}
        n = 0 if k is None else int(counts[k])
        results.append(PairwiseKappa(rater_a=labels[a], rater_b=labels[b], n=n, **found))
    return tuple(results)


_NO_KAPPA = dict.fromkeys(("unweighted", "linear", "quadratic"), math.nan)


def kappa_weights(size: int) -> dict[str, np.ndarray]:
    """Cohen's weightings over ``size`` scale positions: 1 - I, |i - j| and (i - j)^2."""
    position = np.arange(size)
    return {
        "unweighted": 1.0 - np.eye(size),
        "linear": np.abs(position[:, None] - position[None, :]).astype(float),
        "quadratic": ((position[:, None] - position[None, :]) ** 2).astype(float),
    }


def pairwise_kappas(tables: np.ndarray) -> dict[str, np.ndarray]:
    """kappas_of_cells of tables x q x q (rows one rater's scale positions), by weighting."""
    kappas = kappas_of_cells(np.moveaxis(tables, 0, -1))
    return dict(zip(kappa_weights(tables.shape[-1]), kappas, strict=True))


def kappas_of_cells(cells: np.ndarray) -> np.ndarray:
    """Cohen's kappa of contingency tables given cells first (q x q x tables: one rater's
    scale position, the other's, the table), as weightings x tables in kappa_weights'
    order; NaN where undefined (no item, or chance agreement 1). statsmodels' ``cohens_kappa``
    formula, every table at once: 1 - sum(W C) / sum(W E), with E = outer(row sums, column
    sums) / n and W the weights (1 - I, |i - j| or (i - j)^2), each sum a matrix product."""
    q = cells.shape[0]
    flat = cells.reshape(q, q, -1)
    weights = np.stack(list(kappa_weights(q).values()))  # weighting, row, column
    rows, columns = flat.sum(axis=1), flat.sum(axis=0)  # position x tables
    n = rows.sum(axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        observed = weights.reshape(-1, q * q) @ flat.reshape(q * q, -1)
        chance = (rows[None] * (weights @ columns[None])).sum(axis=1) / n
        kappa = 1.0 - observed / chance
    return np.where(np.isfinite(kappa), kappa, np.nan)


def _plain(label: Any) -> Any:
    """numpy scalar labels become Python scalars so that they serialise to JSON."""
    return label.item() if isinstance(label, np.generic) else label


def _multirater_kappa(prepared: _Prepared, method: str) -> KappaResult:
    table, per_item = _modal_complete_table(prepared.table)
    if table.shape[0] == 0:
        return KappaResult(value=math.nan, n_items=0, ratings_per_item=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        value = float(inter_rater.fleiss_kappa(table, method=method))
    return KappaResult(value=value, n_items=int(table.shape[0]), ratings_per_item=per_item)


def fleiss_kappa(frame: pd.DataFrame, scale: Sequence[float]) -> KappaResult:
    """Fleiss' (1971) kappa: chance agreement from the pooled category proportions.

    ``statsmodels.stats.inter_rater.fleiss_kappa(method="fleiss")`` on an items ×
    FULL-scale count table. Fleiss' kappa needs the same number of ratings on every
    item (not the same raters): only items with the modal number of ratings (>= 2) are
    used, and the result reports that number and how many items were kept.
    """
    return _multirater_kappa(_prepare(frame, scale), "fleiss")


def randolph_kappa(frame: pd.DataFrame, scale: Sequence[float]) -> KappaResult:
    """Randolph's (2005) free-marginal multirater kappa: chance agreement = 1/q.

    ``fleiss_kappa(method="randolph")`` on the same items × FULL-scale table as
    :func:`fleiss_kappa` (same modal-number-of-ratings subset). q is the number of
    scale values, used or not: a table over observed categories only would shrink q and
    give a different, wrong value.
    """
    return _multirater_kappa(_prepare(frame, scale), "randolph")


def krippendorff_alpha(frame: pd.DataFrame, scale: Sequence[float], *, level: AlphaLevel) -> float:
    """Krippendorff's alpha at the given level of measurement.

    ``krippendorff.alpha`` on the raters × items matrix (NaN = missing), with
    ``value_domain`` = the full scale and the level always passed explicitly (the
    package defaults to interval). Items with a single rating are not pairable and do
    not contribute. NaN when no item has two ratings or expected disagreement is zero.
    """
    if level not in ("nominal", "ordinal", "interval"):
        raise AgreementInputError(f"Unknown level of measurement {level!r}.")
    return _krippendorff_alpha(_prepare(frame, scale), level)


def _krippendorff_alpha(prepared: _Prepared, level: AlphaLevel) -> float:
    # Raters × items, built from the named columns (see frames.reliability_matrix).
    data = prepared.wide.T.to_numpy(dtype=float)
    if not ((~np.isnan(data)).sum(axis=0) >= 2).any():
        return math.nan
    with np.errstate(divide="ignore", invalid="ignore"), warnings.catch_warnings():
        # The package divides by zero (and warns) when every pairable rating is equal.
        warnings.simplefilter("ignore", RuntimeWarning)
        value = krippendorff.alpha(
            reliability_data=data,
            value_domain=list(prepared.scale),
            level_of_measurement=level,
        )
    return float(value)


def gwet_ac1(frame: pd.DataFrame, scale: Sequence[float]) -> float:
    """Gwet's (2008) AC1 for any number of raters, unweighted, over the full scale.

    AC1 = (p_a - p_e) / (1 - p_e) with
    p_a = mean over items with r_i >= 2 of sum_k r_ik (r_ik - 1) / (r_i (r_i - 1)) and
    p_e = 1/(q - 1) * sum_k pi_k (1 - pi_k), pi_k = mean over items with r_i >= 1 of
    r_ik / r_i, q = number of scale values (used or not). This is how Gwet (2014) and
    his irrCAC package handle missing ratings: single-rated items inform the category
    prevalences pi_k but not the observed agreement.
    """
    return _gwet_ac1(_prepare(frame, scale).table)


def _gwet_ac1(table: np.ndarray) -> float:
    q = table.shape[1]
    ratings = table.sum(axis=1)
    rated = ratings >= 1
    p_a = _observed_agreement(table)
    if math.isnan(p_a):
        return math.nan
    pi = (table[rated] / ratings[rated, None]).mean(axis=0)
    p_e = float((pi * (1 - pi)).sum() / (q - 1))
    if p_e >= 1:
        return math.nan
    return (p_a - p_e) / (1 - p_e)


def pabak(frame: pd.DataFrame, scale: Sequence[float]) -> float:
    """Prevalence- and bias-adjusted kappa, (q * p_o - 1) / (q - 1), q = scale size.

    For two raters p_o is the proportion of co-rated items on which they agree, which
    gives Byrt, Bishop & Carlin's (1993) PABAK. For more raters p_o is the mean pairwise
    agreement of :func:`percent_agreement` (all items with >= 2 ratings), which makes
    this Brennan & Prediger's (1981) coefficient / Randolph's free-marginal kappa
    computed on every item rather than on the equal-ratings subset
    :func:`randolph_kappa` is restricted to.
    """
    return _pabak(_prepare(frame, scale).table)


def _pabak(table: np.ndarray) -> float:
    q = table.shape[1]
    return (q * _observed_agreement(table) - 1) / (q - 1)


def agreement_report(frame: pd.DataFrame, scale: Sequence[float], *, pairwise: bool = True) -> AgreementReport:
    """All agreement statistics for one question.

    ``pairwise=False`` leaves out Cohen's kappa for every pair of raters (an empty
    tuple), which is most of the cost when there are many raters and items.

    ``n_items`` and ``n_raters`` count items and raters with at least one non-missing
    rating, ``n_items_shared`` the items with two non-missing ratings or more. Each
    statistic uses its own subset of items as documented on its function.
    The frame is validated and reshaped once, then every statistic reads those shapes.
    """
    prepared = _prepare(frame, scale)
    rated = prepared.wide.notna()
    return AgreementReport(
        n_items=int(rated.any(axis=1).sum()),
        n_items_shared=int((rated.sum(axis=1) >= 2).sum()),
        n_raters=int(rated.any(axis=0).sum()),
        percent_agreement=_observed_agreement(prepared.table),
        fleiss_kappa=_multirater_kappa(prepared, "fleiss"),
        randolph_kappa=_multirater_kappa(prepared, "randolph"),
        gwet_ac1=_gwet_ac1(prepared.table),
        pabak=_pabak(prepared.table),
        krippendorff_alpha=AlphaByLevel(
            nominal=_krippendorff_alpha(prepared, "nominal"),
            ordinal=_krippendorff_alpha(prepared, "ordinal"),
            interval=_krippendorff_alpha(prepared, "interval"),
        ),
        cohen_kappa=_cohen_kappa(prepared) if pairwise else (),
    )


def report_statistics(report: AgreementReport) -> dict[str, float]:
    """The report's coefficients as a flat name -> value mapping (for bootstrap intervals).

    Names: ``percent_agreement``, ``fleiss_kappa``, ``randolph_kappa``, ``gwet_ac1``,
    ``pabak``, ``krippendorff_alpha.<level>`` and ``cohen_kappa.<a>|<b>.<weighting>``.
    """
    values = {
        "percent_agreement": report.percent_agreement,
        "fleiss_kappa": report.fleiss_kappa.value,
        "randolph_kappa": report.randolph_kappa.value,
        "gwet_ac1": report.gwet_ac1,
        "pabak": report.pabak,
        "krippendorff_alpha.nominal": report.krippendorff_alpha.nominal,
        "krippendorff_alpha.ordinal": report.krippendorff_alpha.ordinal,
        "krippendorff_alpha.interval": report.krippendorff_alpha.interval,
    }
    for pair in report.cohen_kappa:
        for weighting in ("unweighted", "linear", "quadratic"):
            values[f"cohen_kappa.{pair.rater_a}|{pair.rater_b}.{weighting}"] = getattr(pair, weighting)
    return values


def bootstrap_ci(
    frame: pd.DataFrame,
    statistic: Callable[[pd.DataFrame], float],
    n_resamples: int = 1000,
    seed: int = 0,
    *,
    confidence_level: float = 0.95,
) -> BootstrapResult:
    """Percentile bootstrap interval for ``statistic(frame)``, resampling ITEMS.

    Items (not single ratings) are drawn with replacement, keeping all of an item's
    rows together, because ratings of one item are not independent. An item drawn
    twice becomes two distinct items (new ``item`` labels 0..n-1 in draw order), so a
    statistic never sees one item with duplicated ratings. Draws use
    ``numpy.random.default_rng(seed)``: same seed, same interval.

    A resample whose statistic is NaN/inf, or that the statistic refuses with
    :class:`AgreementInputError` (e.g. one rater left), counts as undefined; the interval
    is the (alpha/2, 1-alpha/2) percentiles of the defined resamples and is NaN if none
    are defined.
    """
    results = bootstrap_cis(
        frame,
        lambda resample: {"value": statistic(resample)},
        n_resamples,
        seed,
        confidence_level=confidence_level,
    )
    return results["value"]


def bootstrap_cis(
    frame: pd.DataFrame,
    statistics: Callable[[pd.DataFrame], Mapping[str, float]],
    n_resamples: int = 1000,
    seed: int = 0,
    *,
    confidence_level: float = 0.95,
    progress: Callable[[int], None] | None = None,
) -> dict[str, BootstrapResult]:
    """Percentile bootstrap intervals for several statistics from the SAME item resamples.

    ``statistics(frame)`` returns a mapping name -> value; it is called once on the
    frame and once per resample, so an expensive shared step (validating the frame,
    building the count table) is paid once per resample, not once per statistic.
    Resampling and undefined resamples are as in :func:`bootstrap_ci` (which is this
    function with one statistic): a refused resample is undefined for every statistic, a
    NaN only for its own. ``progress(done)`` is called every 50 resamples.
    """
    check_bootstrap_options(frame, n_resamples, confidence_level)
    estimates = {name: float(value) for name, value in statistics(frame).items()}
    codes, _ = pd.factorize(frame[ITEM], sort=True)
    if (codes < 0).any():
        raise AgreementInputError("Column 'item' must not contain missing labels.")
    n_items = int(codes.max()) + 1 if codes.size else 0
    if n_items == 0:
        raise AgreementInputError("Cannot bootstrap an empty frame.")
    order = np.argsort(codes, kind="stable")
    sizes = np.bincount(codes, minlength=n_items)
    starts = np.concatenate(([0], np.cumsum(sizes)[:-1]))

    rng = np.random.default_rng(seed)
    values = {name: np.full(n_resamples, np.nan) for name in estimates}
    base = frame.reset_index(drop=True)
    for b in range(n_resamples):
        drawn = rng.integers(0, n_items, size=n_items)
        lengths = sizes[drawn]
        total = int(lengths.sum())
        # Row positions of every drawn item's block, concatenated in draw order.
        offsets = np.arange(total) - np.repeat(np.cumsum(lengths) - lengths, lengths)
        rows = order[np.repeat(starts[drawn], lengths) + offsets]
        resample = base.iloc[rows].reset_index(drop=True)
        resample[ITEM] = np.repeat(np.arange(n_items), lengths)
        if progress is not None and b % 50 == 0:
            progress(b)
        try:
            computed = statistics(resample)
        except AgreementInputError:
            continue
        for name, value in computed.items():
            value = float(value)
            if math.isfinite(value):
                values[name][b] = value

    return percentile_intervals(estimates, values, confidence_level=confidence_level)


def check_bootstrap_options(frame: pd.DataFrame, n_resamples: int, confidence_level: float) -> None:
    """The options every item bootstrap here takes; an AgreementInputError if one is wrong."""
    if n_resamples < 1:
        raise AgreementInputError(f"n_resamples must be >= 1, got {n_resamples}.")
    if not 0 < confidence_level < 1:
        raise AgreementInputError(f"confidence_level must be in (0, 1), got {confidence_level}.")
    if ITEM not in frame.columns:
        raise AgreementInputError("Ratings frame lacks column 'item'.")


def percentile_intervals(
    estimates: Mapping[str, float], values: Mapping[str, np.ndarray], *, confidence_level: float
) -> dict[str, BootstrapResult]:
    """Percentile intervals from each statistic's resampled values (NaN = undefined
    resample): the (alpha/2, 1-alpha/2) percentiles of the defined ones, NaN if none are."""
    tail = (1 - confidence_level) / 2 * 100
    defined = {name: values[name][~np.isnan(values[name])] for name in estimates}
    # np.percentile along the rows of the statistics with as many defined values: the same
    # figures as one call per statistic, in one call per size.
    bounds: dict[str, tuple[float, float]] = {}
    by_size: dict[int, list[str]] = {}
    for name, kept in defined.items():
        by_size.setdefault(kept.size, []).append(name)
    for size, names in by_size.items():
        if not size:
            bounds.update({name: (math.nan, math.nan) for name in names})
            continue
        low, high = np.percentile(np.stack([defined[name] for name in names]), [tail, 100 - tail], axis=1)
        bounds.update({name: (float(lo), float(hi)) for name, lo, hi in zip(names, low, high, strict=True)})
    results: dict[str, BootstrapResult] = {}
    for name, estimate in estimates.items():
        results[name] = BootstrapResult(
            estimate=estimate,
            low=bounds[name][0],
            high=bounds[name][1],
            confidence_level=confidence_level,
            n_resamples=int(values[name].size),
            n_undefined=int(values[name].size - defined[name].size),
        )
    return results
