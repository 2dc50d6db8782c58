"""Every automatic metric against every human scale question, and against their average,
at summary level and at system level (FactPICO, Tables 4, 5 and 10). Pure functions over
data frames; no ORM. Table 4 pairs each human attribute with an LLM evaluator's overall
score, the average of its element ratings (`evaluator_overall`, the `eval.<name>.overall`
rows), beside Table 10's element-by-element rows.

Statistical choices:
- Summary level: one point per summary: the metric, and the mean of the raters' scores
  for the question (the summary's answers that count, N/A left out). Kendall's tau-b
  (ties in both variables are common on short scales) and Spearman's rho, from scipy,
  with their two-sided p-values, on the summaries that have both values.
- The average ("avg"): for each summary, the mean over the scale questions it has a
  score for of that question's mean, each first mapped to [0, 1] by its own scale
  ((score - lowest) / (highest - lowest)), so that a 1-5 question and a 1-4 one weigh
  alike. FactPICO's "Avg" averages elements that share one scale; with one shared scale
  the mapping changes nothing but the units.
- System level: one point per generator: the mean of the metric and the mean of the
  human score over that generator's summaries (both over the summaries that have the
  human score), then tau-b and rho across generators. Undefined (None) with fewer than
  three generators, as any rank correlation of two points is +-1.
- A correlation needs at least three points and some spread in both variables; otherwise
  it is None, never 0.
- Beside tau-b and rho, on the same points: pairwise accuracy with tie calibration
  (stats.metaeval.acc_eq, Deutsch et al. 2023, as FactPICO Table 4) and the KL divergence
  of the standardised distributions KL(human || metric) (stats.metaeval.kl_divergence, as
  FactPICO Table 11), against every question and the average, at both levels; None with
  fewer than three points or no spread in the human scores (every pair would be a tie that
  a metric calling everything equal matches), and KL None without spread in the metric.

- Intervals (summary level): a percentile bootstrap over summaries (`n_resamples`
  resamples of the summaries with replacement, seeded), the same resamples for every
  metric and question, so that two metrics can be compared on the same data: the
  difference of their tau-b in each resample gives the interval of the difference, and
  one metric tracks a question better than another when that interval excludes 0 (a
  paired bootstrap test). A resample where a tau-b is undefined (no spread) is left out
  of that interval and counted.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd
from scipy import sparse

from stats.frames import ITEM, QUESTION

AVERAGE = "avg"
MIN_POINTS = 3
# FactPICO's elements, as the LLM evaluators name their scores (generation.evaluators).
FACTPICO_ELEMENTS = ("population", "intervention", "comparator", "outcome", "evidence")
OVERALL = "overall"


@dataclass(frozen=True)
class Correlation:
    n: int
    kendall_tau_b: float | None
    kendall_p: float | None
    spearman_rho: float | None
    spearman_p: float | None
    acc_eq: float | None = None
    acc_eq_epsilon: float | None = None
    kl_divergence: float | None = None


def correlation(x: Sequence[float], y: Sequence[float]) -> Correlation:
    """tau-b, rho, acc_eq and KL of the pairs where both values exist (x: the metric, y:
    the human score)."""
    from scipy import stats

    from stats.metaeval import acc_eq, kl_divergence

    xs = pd.to_numeric(pd.Series(list(x), dtype="object"), errors="coerce")
    ys = pd.to_numeric(pd.Series(list(y), dtype="object"), errors="coerce")
    pairs = pd.DataFrame({"x": xs.to_numpy(), "y": ys.to_numpy()}).dropna()
    n = len(pairs)
    if n < MIN_POINTS or pairs["y"].nunique() < 2:
        # Without spread in the human scores every pair is a tie that a metric matches by
        # calling everything equal: acc_eq would be 1 whatever the metric, so it is None.
        return Correlation(n, None, None, None, None)
    accuracy = acc_eq(pairs["y"].to_numpy(float), pairs["x"].to_numpy(float))
    ordering = {
        "acc_eq": _finite(accuracy.value),
        "acc_eq_epsilon": _finite(accuracy.epsilon),
        "kl_divergence": _finite(kl_divergence(pairs["y"], pairs["x"])),
    }
    if pairs["x"].nunique() < 2 or pairs["y"].nunique() < 2:
        return Correlation(n, None, None, None, None, **ordering)
    tau = stats.kendalltau(pairs["x"], pairs["y"], variant="b")
    rho = stats.spearmanr(pairs["x"], pairs["y"])
    return Correlation(
        n, _finite(tau.statistic), _finite(tau.pvalue), _finite(rho.statistic), _finite(rho.pvalue), **ordering
    )


def human_scores(answers: pd.DataFrame, scales: dict[str, tuple[float, float]]) -> pd.DataFrame:
    """Summary x question table of mean scores (one column per scale question, in the
    order given), plus the average column of [0, 1]-mapped means."""
    part = answers[answers[QUESTION].isin(list(scales)) & answers["score"].notna()]
    table = part.groupby([ITEM, QUESTION])["score"].mean().unstack(QUESTION)
    table = table.reindex(columns=list(scales))
    mapped = pd.DataFrame(
        {key: (table[key] - low) / (high - low) for key, (low, high) in scales.items() if high > low},
        index=table.index,
    )
    table[AVERAGE] = mapped.mean(axis=1, skipna=True)
    return table


def resample_counts(indices: np.ndarray, n: int) -> np.ndarray:
    """resamples x n: how many times each of the n points is drawn in each resample (a row
    of `indices`), as the narrowest integers tau_b_of_counts sums them in (_count_type)."""
    n_resamples = indices.shape[0]
    rows = np.arange(n_resamples)[:, None] * n
    drawn = np.bincount((rows + indices).ravel(), minlength=n_resamples * n).reshape(n_resamples, n)
    return drawn.astype(_count_type(n))


def _count_type(n: int) -> type:
    """Every count, running count and per-step sum of a resample of n points is at most n
    squared: 32 bits while that fits (half the memory traffic of 64), else 64."""
    return np.int32 if n**2 < 2**31 else np.int64


def resampled_tau_b(x: np.ndarray, y: np.ndarray, indices: np.ndarray) -> np.ndarray:
    """Kendall's tau-b of (x[idx], y[idx]) for each row idx of `indices` (resamples x n),
    NaN where undefined (fewer than MIN_POINTS pairs with both values, or no spread in
    one of them): the value scipy.stats.kendalltau(variant="b") gives on the same points."""
    return tau_b_of_counts(x, y, resample_counts(indices, len(x)))


def tau_b_of_counts(x: np.ndarray, y: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """tau-b of each resample given as its counts of the n points (resamples x n).

    Every resample draws from the same n points, so what depends on the points alone is
    worked out once: their order by (x, y), their tie groups and the steps that count the
    pairs out of order in y (_inversion_steps). A resample then only weights each point by
    its count: with n0 its pairs, n1, n2 and n3 those tied in x, in y and in both (an item
    drawn twice is a pair tied in both, as in scipy) and D the pairs out of order in y
    (discordant), C - D = n0 - n1 - n2 + n3 - 2D and tau-b = (C - D) / sqrt((n0 - n1)(n0 -
    n2)). Exact: every count is an integer."""
    valid = ~(np.isnan(x) | np.isnan(y))
    if not valid.any():
        return np.full(counts.shape[0], np.nan)
    order = np.lexsort((y[valid], x[valid]))
    x_rank = np.unique(x[valid][order], return_inverse=True)[1]
    y_rank = np.unique(y[valid][order], return_inverse=True)[1]
    points = np.flatnonzero(valid)[order]
    # np.take: in a random order of columns, several times faster than counts[:, points].
    counts = np.take(counts.astype(_count_type(counts.shape[1]), copy=False), points, axis=1)
    m = counts.sum(axis=1)
    n0 = m * (m - 1) // 2
    x_ties = _tied_pairs(counts, x_rank)
    joint_ties = _tied_pairs(counts, x_rank * (y_rank.max() + 1) + y_rank)
    y_ties = _tied_pairs(counts, y_rank)
    s = n0 - x_ties - y_ties + joint_ties - 2 * _discordant_pairs(counts, y_rank)
    denominator = np.sqrt((n0 - x_ties).astype(float) * (n0 - y_ties))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where((m >= MIN_POINTS) & (denominator > 0), s / np.where(denominator > 0, denominator, 1), np.nan)


def _tied_pairs(counts: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """Per resample, the pairs of drawn points with equal keys (one key per column; a point
    drawn twice is a pair): the drawn points of each key summed by one sparse product."""
    _, group = np.unique(keys, return_inverse=True)
    n = len(keys)
    indicator = sparse.csr_array((np.ones(n, counts.dtype), (np.arange(n), group)), shape=(n, group.max() + 1))
    drawn = counts @ indicator
    return (drawn * (drawn - 1) // 2).sum(axis=1)


# Resamples weighted at once in the merge steps: rows that stay in the processor's cache.
RESAMPLE_CHUNK = 32


def _discordant_pairs(counts: np.ndarray, ranks: np.ndarray) -> np.ndarray:
    """Per resample, the weighted pairs (i < j) with ranks[i] > ranks[j]. Each step of the
    plan (_inversion_steps) is a set of left points and of right points: for each right
    point j, the left points between two places in the left points' order come before j
    and rank above it. The steps depend on the ranks only; each resample weights them."""
    steps = _inversion_steps(ranks)
    total = np.zeros(counts.shape[0], np.int64)
    for low in range(0, counts.shape[0], RESAMPLE_CHUNK):
        chunk = counts[low : low + RESAMPLE_CHUNK]
        for left, right, block_end, not_above in steps:
            # Running drawn counts of the left points in their order; for a right point j,
            # those between `not_above` and `block_end` are before it and above it.
            running = np.zeros((chunk.shape[0], len(left) + 1), counts.dtype)
            np.cumsum(chunk[:, left], axis=1, out=running[:, 1:])
            above = running[:, block_end] - running[:, not_above]
            total[low : low + RESAMPLE_CHUNK] += np.einsum("ij,ij->i", chunk[:, right], above)
    return total


def _inversion_steps(ranks: np.ndarray) -> list[tuple[np.ndarray, ...]]:
    """The steps of a merge sort (_merge_steps: about n log2 n points whatever the ranks),
    or, when fewer points, one step per rank (_rank_steps: as many points as the ranks
    sum to, few when human scores take a few values)."""
    n = len(ranks)
    merge_points = n * max(1, int(np.ceil(np.log2(max(n, 1)))))
    return _rank_steps(ranks) if int(ranks.sum()) + n < merge_points else _merge_steps(ranks)


def _rank_steps(ranks: np.ndarray) -> list[tuple[np.ndarray, ...]]:
    """For each rank r: the points ranked above r as left points, those ranked r as right
    points; for each right point, how many left points come before it (and 0)."""
    positions = np.arange(len(ranks))
    steps = []
    for rank in range(int(ranks.max()) if len(ranks) else 0):
        above, at = positions[ranks > rank], positions[ranks == rank]
        if len(at):
            steps.append((above, at, np.searchsorted(above, at), np.zeros(len(at), np.int64)))
    return steps


def _merge_steps(ranks: np.ndarray) -> list[tuple[np.ndarray, ...]]:
    """For each width w = 1, 2, 4, ...: the left-half points of every block of 2w, sorted by
    (block, rank); the right-half points; and for each right point, how many of those
    sorted left points come up to the end of its block and up to its own rank."""
    n = len(ranks)
    positions = np.arange(n)
    levels = int(ranks.max()) + 1 if n else 1
    steps = []
    width = 1
    while width < n:
        block = positions // (2 * width)
        on_left = positions % (2 * width) < width
        left, right = positions[on_left], positions[~on_left]
        left = left[np.lexsort((ranks[left], block[left]))]
        keys = block[left] * levels + ranks[left]
        not_above = np.searchsorted(keys, block[right] * levels + ranks[right], side="right")
        block_end = np.searchsorted(block[left], block[right], side="right")
        steps.append((left, right, block_end, not_above))
        width *= 2
    return steps


def bootstrap_taus(
    table: pd.DataFrame, metrics: Sequence[str], questions: Sequence[str], *, n_resamples: int, seed: int
) -> dict[tuple[str, str], np.ndarray]:
    """tau-b of every (metric, question) in each of `n_resamples` resamples of the rows
    (the same resamples for all pairs); NaN where undefined. The pairs are computed in a
    thread per core (each pair's figures are its own, whatever the order)."""
    rng = np.random.default_rng(seed)
    values = {c: table[c].to_numpy(dtype=float) for c in [*metrics, *questions]}
    n = len(table)
    indices = np.stack([rng.integers(0, n, n) for _ in range(n_resamples)]) if n_resamples else np.empty((0, n), int)
    counts = resample_counts(indices, n)
    pairs = [(m, q) for m in metrics for q in questions]
    # numpy's array loops let other threads run: the pairs are shared out among the cores.
    with ThreadPoolExecutor(max_workers=min(len(pairs), os.cpu_count() or 1) or 1) as pool:
        taus = pool.map(lambda pair: tau_b_of_counts(values[pair[0]], values[pair[1]], counts), pairs)
        return dict(zip(pairs, taus, strict=True))


def percentile_interval(samples: np.ndarray, confidence: float = 0.95) -> tuple[float | None, float | None, int]:
    """(low, high, number of undefined resamples) of the finite samples."""
    finite = samples[np.isfinite(samples)]
    undefined = int(samples.size - finite.size)
    if finite.size == 0:
        return None, None, undefined
    alpha = (1 - confidence) / 2
    return float(np.quantile(finite, alpha)), float(np.quantile(finite, 1 - alpha)), undefined


def _finite(value) -> float | None:
    return float(value) if value is not None and np.isfinite(value) else None


def evaluator_overall(metrics: pd.DataFrame, elements: Sequence[str] = FACTPICO_ELEMENTS) -> pd.DataFrame:
    """FactPICO Table 4's pairing: each human attribute is compared with the evaluator's
    *overall* score, "which for LLM evaluators is the average rating across each
    element" (Table 10 is the element-by-element comparison, the evaluator's own element
    columns). For every evaluator with at least two element columns
    `eval.<evaluator>.<element>`, a column `eval.<evaluator>.overall`: per summary, the
    plain mean of the element scores it has (an element rated N/A is left out, as it has
    no rating to average); NaN without any. Returns `metrics` with those columns added."""
    evaluators: dict[str, list[str]] = {}
    for column in metrics.columns:
        parts = str(column).split(".")
        if len(parts) == 3 and parts[0] == "eval" and parts[2] in elements:
            evaluators.setdefault(parts[1], []).append(str(column))
    added = {
        f"eval.{name}.{OVERALL}": metrics[columns].apply(pd.to_numeric, errors="coerce").mean(axis=1, skipna=True)
        for name, columns in sorted(evaluators.items())
        if len(columns) >= 2
    }
    return metrics.assign(**added) if added else metrics


def meta_evaluation_tables(
    *,
    answers: pd.DataFrame,
    metrics: pd.DataFrame,
    generators: pd.Series,
    scales: dict[str, tuple[float, float]],
    metric_columns: Sequence[str],
    n_resamples: int = 0,
    seed: int = 0,
) -> dict:
    """{"questions": [...keys, "avg"], "summary_level": {metric: {question: Correlation}},
    "system_level": {...}, "generators": n}. `answers`: item, question, score (the answers
    that count); `metrics`: item and metric columns; `generators`: item -> generator."""
    human = human_scores(answers, scales)
    questions = [*scales, AVERAGE]
    table = metrics.set_index(ITEM).join(human, how="left")
    table["generator"] = generators.reindex(table.index)
    usable = [m for m in metric_columns if m in table.columns and table[m].notna().any()]
    summary_level = {metric: {q: asdict(correlation(table[metric], table[q])) for q in questions} for metric in usable}
    system_level: dict = {}
    for metric in usable:
        system_level[metric] = {}
        for q in questions:
            both = table[[metric, q, "generator"]].dropna()
            means = both.groupby("generator")[[metric, q]].mean()
            system_level[metric][q] = asdict(correlation(means[metric], means[q]))
    comparisons: dict = {}
    if n_resamples and usable:
        taus = bootstrap_taus(table, usable, questions, n_resamples=n_resamples, seed=seed)
        for metric in usable:
            for q in questions:
                low, high, undefined = percentile_interval(taus[(metric, q)])
                summary_level[metric][q].update(ci_low=low, ci_high=high, n_undefined_resamples=undefined)
        for q in questions:
            rows = []
            for i, a in enumerate(usable):
                for b in usable[i + 1 :]:
                    point_a, point_b = summary_level[a][q]["kendall_tau_b"], summary_level[b][q]["kendall_tau_b"]
                    if point_a is None or point_b is None:
                        continue
                    low, high, undefined = percentile_interval(taus[(a, q)] - taus[(b, q)])
                    rows.append(
                        {
                            "a": a,
                            "b": b,
                            "difference": point_a - point_b,
                            "ci_low": low,
                            "ci_high": high,
                            "n_undefined_resamples": undefined,
                            "a_better": low is not None and low > 0,
                            "b_better": high is not None and high < 0,
                        }
                    )
            comparisons[q] = rows
    scored = table[[*usable, *questions]].dropna(subset=questions, how="all")
    return {
        "questions": questions,
        # Per summary, each question's mean score (and the average): the plots' points.
        "human_scores": [
            {"item": str(item), **{q: _finite(row[q]) for q in questions}} for item, row in scored.iterrows()
        ],
        "summary_level": summary_level,
        "system_level": system_level,
        "generators": int(table["generator"].nunique()),
        "comparisons": comparisons,
        "n_resamples": n_resamples,
    }
