"""Bootstrap intervals for every agreement statistic at once, without a loop over resamples.

`agreement_cis(frame, scale, ...)` gives the same intervals as
`bootstrap_cis(frame, lambda r: report_statistics(agreement_report(r, scale)), ...)`:
- the same statistics and names;
- the same item resamples (the same `numpy.random.default_rng(seed)` draws, in the same
  order);
- the same rules for undefined resamples.

It is one to three orders of magnitude faster. tests/stats/test_agreement_bootstrap.py
checks it against that loop, and against the krippendorff package and scikit-learn on
single resamples.

How: a resample draws n items with replacement, so it is the original items with
weights w_i (how often each was drawn). Every statistic reported here is a function of
per-item quantities summed with those weights:
- the per-item agreement share and category counts: percent agreement, Fleiss, Randolph,
  Gwet's AC1, PABAK;
- the per-item coincidence matrix: Krippendorff's alpha at every level;
- the per-item one-hot confusion cell of each rater pair: Cohen's kappa with every weighting.

A chunk of resamples is a weight matrix W (resamples × items), and each sum is a matrix
product. The formulas are those of stats/agreement.py, which calls statsmodels,
krippendorff and scikit-learn; each is restated below next to its vectorised form.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from itertools import combinations

import numpy as np
import pandas as pd
from scipy import sparse

from stats.agreement import (
    AgreementReport,
    BootstrapResult,
    _plain,
    agreement_report,
    check_bootstrap_options,
    kappa_weights,
    kappas_of_cells,
    percentile_intervals,
    report_statistics,
)
from stats.frames import ITEM, AgreementInputError, scale_codes, to_wide, validate_ratings, validate_scale

# Resamples per matrix product: bounds memory at CHUNK × items floats per array.
CHUNK = 250
# Cohen's kappa takes rater pairs in blocks of about this many (pair, cell, resample) floats.
_PAIR_CELLS = 1 << 21


def _divide(numerator: np.ndarray, denominator: np.ndarray) -> np.ndarray:
    """numerator / denominator, NaN where the denominator is 0 (never a warning)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.true_divide(numerator, denominator)
    return np.where(denominator == 0, np.nan, out)


class _Items:
    """The per-item quantities every statistic sums, computed once."""

    def __init__(self, frame: pd.DataFrame, scale: Sequence[float]):
        clean = validate_ratings(frame, scale)
        self.scale = validate_scale(scale)
        wide = to_wide(clean)
        self.values = wide.to_numpy(dtype=float)  # items × raters
        self.raters = list(wide.columns)
        self.n, self.q = self.values.shape[0], len(self.scale)
        present = ~np.isnan(self.values)
        self.codes = np.full(self.values.shape, -1, dtype=np.int64)
        self.codes[present] = scale_codes(self.values[present], self.scale)
        table = np.zeros((self.n, self.q), dtype=float)
        rows, cols = np.nonzero(present)
        np.add.at(table, (rows, self.codes[rows, cols]), 1)
        self.table = table
        self.present = present.astype(float)
        self.r = table.sum(axis=1)
        self.usable = self.r >= 2
        with np.errstate(divide="ignore", invalid="ignore"):
            # Fleiss 1971 / Gwet p_a: the share of agreeing rater pairs of an item.
            self.agree = np.where(self.usable, (table * (table - 1)).sum(axis=1) / (self.r * (self.r - 1)), 0.0)
            # Gwet's pi_k: each rated item's category shares.
            self.shares = np.where(self.r[:, None] >= 1, table / self.r[:, None], 0.0)
            # krippendorff._coincidences: (n_i n_i^T - diag(n_i)) / (m_i - 1), pairable items.
            outer = table[:, :, None] * table[:, None, :] - table[:, :, None] * np.eye(self.q)[None]
            self.coincidences = np.where(
                self.usable[:, None, None], outer / np.maximum(self.r - 1, 1)[:, None, None], 0.0
            ).reshape(self.n, self.q * self.q)
        # Cohen: raters with a rating, and each co-rated item's confusion cell of each pair.
        self.rated_raters = [j for j in range(len(self.raters)) if present[:, j].any()]
        self.pairs = list(combinations(self.rated_raters, 2))
        pair_of, cell_of, item_of = [], [], []
        for index, (a, b) in enumerate(self.pairs):
            both = np.flatnonzero(present[:, a] & present[:, b])
            pair_of.append(np.full(both.size, index))
            cell_of.append(self.codes[both, a] * self.q + self.codes[both, b])
            item_of.append(both)
        self.cohen_blocks = _pair_blocks(
            *(np.concatenate(part) if part else np.empty(0, dtype=np.int64) for part in (pair_of, cell_of, item_of)),
            n_pairs=len(self.pairs),
            q=self.q,
            n_items=self.n,
        )
        pair_names = [f"{_plain(self.raters[a])}|{_plain(self.raters[b])}" for a, b in self.pairs]
        self.cohen_names = [f"cohen_kappa.{p}.{weighting}" for weighting in kappa_weights(self.q) for p in pair_names]


def _weights(rng: np.random.Generator, n_items: int, count: int) -> np.ndarray:
    """count resamples as weights: the same draws as bootstrap_cis's loop makes, in order."""
    drawn = rng.integers(0, n_items, size=(count, n_items))
    flat = (np.arange(count)[:, None] * n_items + drawn).ravel()
    return np.bincount(flat, minlength=count * n_items).reshape(count, n_items).astype(float)


def _multirater(items: _Items, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Fleiss' and Randolph's kappa (statsmodels' fleiss_kappa) on each resample's items
    with the modal number of ratings (>= 2; ties towards more ratings), as
    stats.agreement._modal_complete_table keeps them."""
    b = w.shape[0]
    sizes = np.unique(items.r[items.usable]).astype(int)
    fleiss = np.full(b, np.nan)
    randolph = np.full(b, np.nan)
    if sizes.size == 0:
        return fleiss, randolph
    freq = np.stack([w[:, items.r == s].sum(axis=1) for s in sizes], axis=1)  # resamples × sizes
    best = freq.max(axis=1)
    # The largest size among those with the highest frequency.
    modal_index = np.where(freq == best[:, None], np.arange(sizes.size)[None, :], -1).max(axis=1)
    for index, s in enumerate(sizes):
        chosen = (modal_index == index) & (best > 0)
        if not chosen.any():
            continue
        mask = items.r == s
        ws = w[chosen][:, mask]
        total = ws.sum(axis=1)
        p_mean = _divide(ws @ items.agree[mask], total)  # mean over the items of p_rat
        p_cat = _divide(ws @ items.table[mask], (total * s)[:, None])  # pooled category shares
        with np.errstate(divide="ignore", invalid="ignore"):
            pe_fleiss = (p_cat * p_cat).sum(axis=1)
            fleiss[chosen] = (p_mean - pe_fleiss) / (1 - pe_fleiss)
            pe_randolph = 1.0 / items.q
            randolph[chosen] = (p_mean - pe_randolph) / (1 - pe_randolph)
    return fleiss, randolph


def _alpha(items: _Items, w: np.ndarray) -> dict[str, np.ndarray]:
    """krippendorff.alpha at each level: 1 - sum(o d) / sum(e d), with o the weighted sum
    of the items' coincidence matrices, n_v = o's column sums,
    e = (n_v n_v^T - diag(n_v)) / (n - 1), and d the level's distance over the value domain."""
    q = items.q
    o = (w[:, items.usable] @ items.coincidences[items.usable]).reshape(-1, q, q)
    n_v = o.sum(axis=1)
    n = n_v.sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        e = (n_v[:, :, None] * n_v[:, None, :] - n_v[:, :, None] * np.eye(q)[None]) / (n - 1)[:, None, None]
    values = np.asarray(items.scale, dtype=float)
    i, j = np.meshgrid(np.arange(q), np.arange(q), indexing="ij")
    low, high = np.minimum(i, j), np.maximum(i, j)
    cumulative = np.concatenate([np.zeros((n_v.shape[0], 1)), np.cumsum(n_v, axis=1)], axis=1)
    between = cumulative[:, high + 1] - cumulative[:, low]  # sum of n_g for g in [low, high]
    distances = {
        "nominal": np.broadcast_to((i != j).astype(float), o.shape),
        "ordinal": (between - (n_v[:, low] + n_v[:, high]) / 2) ** 2,
        "interval": np.broadcast_to((values[i] - values[j]) ** 2, o.shape),
    }
    pairable = (w[:, items.usable] > 0).any(axis=1)  # some drawn item has two ratings
    out = {}
    for level, d in distances.items():
        with np.errstate(divide="ignore", invalid="ignore"):
            alpha = 1 - (o * d).sum(axis=(1, 2)) / (e * d).sum(axis=(1, 2))
        out[level] = np.where(pairable, alpha, np.nan)
    return out


def _pair_blocks(
    pair: np.ndarray, cell: np.ndarray, item: np.ndarray, *, n_pairs: int, q: int, n_items: int
) -> list[tuple[int, sparse.csr_array]]:
    """The rater pairs in blocks of about _PAIR_CELLS (cell, pair, resample) floats for a
    chunk of CHUNK resamples: (pairs in the block, its sparse (cell, pair) x items matrix),
    one 1 per co-rated item of a pair, at the cell of the pair's two codes (a's code * q +
    b's code), so that a chunk's confusion matrices are one product with its weights."""
    size = max(1, _PAIR_CELLS // (q * q * CHUNK))
    blocks = []
    for start in range(0, n_pairs, size):
        count = min(size, n_pairs - start)
        mine = (pair >= start) & (pair < start + count)
        rows = cell[mine] * count + (pair[mine] - start)
        matrix = sparse.csr_array((np.ones(rows.size), (rows, item[mine])), shape=(q * q * count, n_items))
        blocks.append((count, matrix))
    return blocks


def _cohen(items: _Items, w: np.ndarray) -> np.ndarray:
    """sklearn's cohen_kappa_score for every rater pair under every weighting, on the
    weighted confusion matrices of the co-rated items (stats.agreement.kappas_of_cells).
    Every pair of a block at once: its confusion matrices are one sparse product, cells
    first. Returns (weighting, pair) x resamples, in the order of items.cohen_names."""
    q, resamples = items.q, w.shape[0]
    columns = np.ascontiguousarray(w.T)  # items x resamples, as the sparse product reads it
    out = []
    for count, cells in items.cohen_blocks:
        confusion = (cells @ columns).reshape(q, q, count * resamples)  # a's code, b's code, (pair, resample)
        # A pair without a co-rated item in a resample (no table) is undefined there.
        out.append(kappas_of_cells(confusion).reshape(-1, count, resamples))  # weighting, pair, resample
    if not out:
        return np.empty((0, resamples))
    return np.concatenate(out, axis=1).reshape(-1, resamples)


def _statistics(items: _Items, w: np.ndarray) -> tuple[list[str], np.ndarray]:
    """Every statistic for each row of weights: (names, statistics x resamples), NaN where
    undefined."""
    rater_present = (w @ items.present) > 0  # resamples × raters
    refused = rater_present.sum(axis=1) < 2  # validate_ratings: fewer than two raters
    usable_total = w[:, items.usable].sum(axis=1)
    percent = _divide(w[:, items.usable] @ items.agree[items.usable], usable_total)
    rated = items.r >= 1
    pi = _divide(w[:, rated] @ items.shares[rated], w[:, rated].sum(axis=1)[:, None])
    p_e = (pi * (1 - pi)).sum(axis=1) / (items.q - 1)
    with np.errstate(divide="ignore", invalid="ignore"):
        gwet = np.where(p_e >= 1, np.nan, (percent - p_e) / (1 - p_e))
        pabak = (items.q * percent - 1) / (items.q - 1)
    fleiss, randolph = _multirater(items, w)
    alpha = _alpha(items, w)
    values = {
        "percent_agreement": percent,
        "fleiss_kappa": fleiss,
        "randolph_kappa": randolph,
        "gwet_ac1": gwet,
        "pabak": pabak,
        "krippendorff_alpha.nominal": alpha["nominal"],
        "krippendorff_alpha.ordinal": alpha["ordinal"],
        "krippendorff_alpha.interval": alpha["interval"],
    }
    matrix = np.vstack([*(np.asarray(v, dtype=float) for v in values.values()), _cohen(items, w)])
    matrix[~np.isfinite(matrix) | refused[None, :]] = np.nan
    return [*values, *items.cohen_names], matrix


def agreement_cis(
    frame: pd.DataFrame,
    scale: Sequence[float],
    n_resamples: int = 1000,
    seed: int = 0,
    *,
    confidence_level: float = 0.95,
    progress: Callable[[int], None] | None = None,
    report: AgreementReport | None = None,
) -> dict[str, BootstrapResult]:
    """Percentile bootstrap intervals (resampling items) for every statistic of
    report_statistics(agreement_report(frame, scale)); see the module docstring.
    ``progress(done)`` is called after each chunk of resamples; ``report``: that
    agreement_report, when the caller has it already."""
    check_bootstrap_options(frame, n_resamples, confidence_level)
    report = agreement_report(frame, scale) if report is None else report
    estimates = {name: float(value) for name, value in report_statistics(report).items()}
    items = _Items(frame, scale)
    if items.n == 0:
        raise AgreementInputError("Cannot bootstrap an empty frame.")
    if pd.factorize(frame[ITEM], sort=True)[0].max() + 1 != items.n:
        raise AgreementInputError("Every item must appear in the ratings frame.")
    rng = np.random.default_rng(seed)
    names, chunks = [], []
    done = 0
    while done < n_resamples:
        count = min(CHUNK, n_resamples - done)
        names, computed = _statistics(items, _weights(rng, items.n, count))
        chunks.append(computed)
        done += count
        if progress is not None:
            progress(done)
    resampled = np.concatenate(chunks, axis=1)
    row = {name: index for index, name in enumerate(names)}
    undefined = np.full(n_resamples, np.nan)  # a statistic no resample has (a pair never co-rated)
    values = {name: resampled[row[name]] if name in row else undefined for name in estimates}
    return percentile_intervals(estimates, values, confidence_level=confidence_level)
