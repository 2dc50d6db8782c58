"""Adaptive side-by-side designs: which pair of systems a rater should judge next, when to
stop, and a seeded simulation against the uniform all-pairs design. Pure: no ORM.

The rule (documented in docs/pairwise.md):
- **Start**: every pair of systems once, so the Bradley–Terry fit is defined.
- **Next pair**: fit the strengths to the judgements so far (stats.pairwise's
  fit_bradley_terry, ties as half-wins, the report's penalty); the inverse of the penalised
  likelihood's curvature gives each difference θi − θj a standard error. Among the pairs of
  systems next to each other in the current order whose difference is not yet resolved
  (|θi − θj| < z · se), choose the one where one more judgement tells the most: the largest
  ``se² · p (1 − p)``, p being the fitted chance that i beats j (a judgement's Fisher
  information on the difference is p (1 − p); its worth grows with what is still unknown).
  When every neighbouring pair is resolved, the least resolved pair of all is chosen.
- **Counterbalancing**: a pair is shown in alternating order (the first time with the
  system of lower index on the left, the next time on the right), so positions stay
  balanced and the report can still measure position bias.
- **Stopping**: when every neighbouring pair is resolved at z (1.96: intervals of the
  differences exclude 0) or the budget of judgements is spent.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import combinations

import numpy as np
from scipy.stats import kendalltau

from stats.pairwise import DEFAULT_ALPHA, fit_bradley_terry

__all__ = [
    "AdaptiveState",
    "DesignComparison",
    "compare_designs",
    "next_pair",
    "resolved",
    "uncertainty",
]

Z = 1.96


@dataclass(frozen=True)
class AdaptiveState:
    strengths: tuple[float, ...]
    se: tuple[tuple[float, ...], ...]  # se[i][j]: the standard error of θi − θj
    unresolved: tuple[tuple[int, int], ...]  # neighbouring pairs not yet told apart


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1 / (1 + np.exp(-x))


def uncertainty(counts: np.ndarray, *, alpha: float = DEFAULT_ALPHA) -> tuple[np.ndarray, np.ndarray]:
    """The fitted strengths and the standard errors of every difference θi − θj, from the
    k × k half-win counts (``counts[w, l]``: 2 per decisive win of w over l, 1 per tie)."""
    counts = np.asarray(counts, dtype=float)
    k = len(counts)
    theta = fit_bradley_terry(counts, alpha=alpha)
    p = _sigmoid(theta[:, None] - theta[None, :])
    # The penalised loss counts half-wins twice: its curvature is 1/2 of the counts' one.
    weight = (counts + counts.T) * p * (1 - p) / 2
    hessian = np.diag(weight.sum(axis=1)) - weight + 2 * alpha * np.eye(k)
    covariance = np.linalg.pinv(hessian + np.full((k, k), 1.0 / k)) - np.full((k, k), 1.0 / k)
    var = np.diag(covariance)
    se = np.sqrt(np.maximum(var[:, None] + var[None, :] - 2 * covariance, 0.0))
    return theta, se


def state(counts: np.ndarray, *, z: float = Z, alpha: float = DEFAULT_ALPHA) -> AdaptiveState:
    theta, se = uncertainty(counts, alpha=alpha)
    order = np.argsort(-theta, kind="stable")
    neighbours = [(int(a), int(b)) for a, b in zip(order[:-1], order[1:], strict=True)]
    unresolved = tuple(pair for pair in neighbours if abs(theta[pair[0]] - theta[pair[1]]) < z * se[pair])
    return AdaptiveState(tuple(theta.tolist()), tuple(tuple(row) for row in se.tolist()), unresolved)


def resolved(counts: np.ndarray, *, z: float = Z, alpha: float = DEFAULT_ALPHA) -> bool:
    """Whether every neighbouring pair of the current order is told apart at z."""
    return not state(counts, z=z, alpha=alpha).unresolved


def next_pair(counts: np.ndarray, *, z: float = Z, alpha: float = DEFAULT_ALPHA) -> tuple[int, int]:
    """The pair (i, j), i < j, of systems the next judgement should compare."""
    counts = np.asarray(counts, dtype=float)
    k = len(counts)
    shown = counts + counts.T
    for i, j in combinations(range(k), 2):
        if shown[i, j] == 0:
            return i, j
    current = state(counts, z=z, alpha=alpha)
    theta, se = np.array(current.strengths), np.array(current.se)
    candidates = current.unresolved or tuple(combinations(range(k), 2))

    def worth(pair: tuple[int, int]) -> float:
        i, j = pair
        p = _sigmoid(theta[i] - theta[j])
        if not current.unresolved:
            return -abs(theta[i] - theta[j]) / max(se[i, j], 1e-12)
        return se[i, j] ** 2 * p * (1 - p)

    best = max(candidates, key=worth)
    return (min(best), max(best))


def shown_order(pair: tuple[int, int], times_shown: int) -> tuple[int, int]:
    """(left, right) for the pair's next showing: alternating, lower index first."""
    i, j = pair
    return (i, j) if times_shown % 2 == 0 else (j, i)


@dataclass(frozen=True)
class DesignComparison:
    n_systems: int
    runs: int
    budgets: tuple[int, ...]
    adaptive_share: tuple[float, ...]  # per budget: share of runs with Kendall's τ ≥ tau
    uniform_share: tuple[float, ...]
    adaptive_needs: int | None  # the smallest budget where the share reaches `share`
    uniform_needs: int | None
    tau: float
    share: float
    seed: int


def _judge(rng: np.random.Generator, strengths: np.ndarray, left: int, right: int) -> tuple[int, int]:
    """(winner, loser) of one simulated judgement under the Bradley–Terry model."""
    if rng.random() < _sigmoid(strengths[left] - strengths[right]):
        return left, right
    return right, left


def _run(rng: np.random.Generator, strengths: np.ndarray, budgets: Sequence[int], adaptive: bool, refit: int):
    k = len(strengths)
    counts = np.zeros((k, k))
    pairs = list(combinations(range(k), 2))
    times: dict[tuple[int, int], int] = {}
    taus, pair = [], None
    cycle: list[tuple[int, int]] = []
    for n in range(1, max(budgets) + 1):
        if adaptive:
            if pair is None or n <= len(pairs) + 1 or n % refit == 0:
                pair = next_pair(counts)
        else:
            if not cycle:
                cycle = [pairs[i] for i in rng.permutation(len(pairs))]
            pair = cycle.pop()
        left, right = shown_order(pair, times.get(pair, 0))
        times[pair] = times.get(pair, 0) + 1
        winner, loser = _judge(rng, strengths, left, right)
        counts[winner, loser] += 2
        if n in budgets:
            fitted = fit_bradley_terry(counts, alpha=DEFAULT_ALPHA)
            taus.append(float(kendalltau(fitted, strengths).statistic))
    return taus


def compare_designs(
    strengths: Sequence[float],
    budgets: Sequence[int],
    *,
    runs: int = 100,
    tau: float = 0.9,
    share: float = 0.9,
    refit: int = 5,
    seed: int = 0,
) -> DesignComparison:
    """Seeded simulation: for each budget of judgements, the share of runs in which the
    fitted order agrees with the true one (Kendall's τ ≥ `tau`), for the adaptive rule
    (refitted every `refit` judgements, as a live study refits when raters arrive in a
    burst) and for the uniform design (every pair in turn, each round in a random order)."""
    truth = np.asarray(strengths, dtype=float)
    if len(truth) < 3:
        raise ValueError("Compare designs over at least three systems.")
    budgets = tuple(sorted({int(b) for b in budgets}))
    streams = np.random.SeedSequence(seed).spawn(runs)
    found = {True: np.zeros((runs, len(budgets))), False: np.zeros((runs, len(budgets)))}
    for r, stream in enumerate(streams):
        for adaptive in (True, False):
            rng = np.random.default_rng(stream.spawn(1)[0] if adaptive else stream)
            found[adaptive][r] = _run(rng, truth, budgets, adaptive, refit)
    shares = {d: tuple(float(np.mean(found[d][:, b] >= tau)) for b in range(len(budgets))) for d in found}

    def needs(values: tuple[float, ...]) -> int | None:
        return next((b for b, v in zip(budgets, values, strict=True) if v >= share), None)

    return DesignComparison(
        n_systems=len(truth),
        runs=runs,
        budgets=budgets,
        adaptive_share=shares[True],
        uniform_share=shares[False],
        adaptive_needs=needs(shares[True]),
        uniform_needs=needs(shares[False]),
        tau=tau,
        share=share,
        seed=seed,
    )
