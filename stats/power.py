"""Sample size by simulation: how many items a study needs to tell system A from system B
with the report's own tests. Pure: parameters in, frozen dataclasses out; no ORM.

Statistical choices:
- **Pointwise studies** (every system summarises every source; each summary rated by
  `raters_per_item` raters drawn from a pool of `n_raters`): a rater's score of system s's
  summary of source j is ``mean + effect·[s = A] + u_j + v_r + e``, with source effects
  ``u ~ N(0, item_sd²)``, rater effects ``v ~ N(0, rater_sd²)`` (the same rater is as severe
  on every item) and ``e ~ N(0, residual_sd²)``; with a `scale` the score is rounded to the
  nearest point and kept inside it, as a rater's answer would be. System A is better than
  every other system by `effect`; the others are alike. Each simulated study is judged by
  the report's own test (stats.compare.paired_comparisons: Wilcoxon's signed-rank test on
  the sources both systems summarised, scipy's choice of exact, permutation or normal
  p-value, Holm's correction across every pair of systems of the question), computed for
  all simulated studies at once (tests/stats/test_power.py checks it gives the report's
  p on the same studies); a study counts as a success when A against B has p_holm < alpha.
- **Side-by-side studies** (each comparison item a random pair of systems, shown in a
  random order, judged by `raters_per_item` raters): a judgement picks a tie with
  probability `tie_rate`, else the left system with the Bradley–Terry chance
  ``1 / (1 + exp(-(θ_left − θ_right)))``, the strengths ``θ`` being A = `effect`, every
  other system 0, plus a rater's own N(0, rater_sd²) deviation per system. Each simulated
  study is ranked by the report's stats.pairwise.bradley_terry_ranking (percentile
  bootstrap over items) and counts as a success when A's interval lies wholly above B's.
  The expected width of A's interval is reported too.
- **Monte-Carlo error**: power is a share of `simulations` runs, reported with its
  standard error ``sqrt(p (1 − p) / simulations)``. Runs are seeded: the same parameters
  and seed give the same curve.
- **Pilot estimates** (moment estimates from one question's ratings of an existing study):
  the rater effect is each rater's mean deviation from the mean of the other raters of the
  same summaries; the residual SD is the spread of what is left; the source SD is the
  spread of the sources' mean scores (over systems) less the part the residual explains
  (floored at 0); the effect is the difference between the two best systems' means.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from itertools import combinations

import numpy as np
import pandas as pd

from stats.compare import holm
from stats.frames import ITEM, QUESTION, RATER
from stats.pairwise import CHOICE, LEFT, RIGHT, bradley_terry_ranking

__all__ = [
    "PilotEstimate",
    "PointwiseDesign",
    "PowerCurve",
    "PowerPoint",
    "SideBySideDesign",
    "pilot_estimate",
    "pointwise_power",
    "side_by_side_power",
    "simulate_pointwise_answers",
]

QUESTION_NAME = "q"
SYSTEM_A, SYSTEM_B = "A", "B"


class PowerInputError(ValueError):
    """The plan's parameters cannot be simulated as given."""


@dataclass(frozen=True)
class PointwiseDesign:
    effect: float  # A's mean minus every other system's, on the question's scale
    item_sd: float = 0.5
    rater_sd: float = 0.3
    residual_sd: float = 0.8
    raters_per_item: int = 2
    n_raters: int = 0  # the pool; 0: as many as raters_per_item
    n_systems: int = 2
    mean: float = 3.0
    scale: tuple[float, float] | None = (1.0, 5.0)
    alpha: float = 0.05

    def check(self) -> None:
        if self.n_systems < 2:
            raise PowerInputError("n_systems: a comparison needs at least two systems.")
        if self.raters_per_item < 1:
            raise PowerInputError("raters_per_item: at least one rater rates each summary.")
        if self.n_raters and self.n_raters < self.raters_per_item:
            raise PowerInputError("n_raters: the pool is smaller than the raters each summary needs.")
        if min(self.item_sd, self.rater_sd, self.residual_sd) < 0:
            raise PowerInputError("A standard deviation cannot be negative.")
        if not 0 < self.alpha < 1:
            raise PowerInputError("alpha must lie between 0 and 1.")


@dataclass(frozen=True)
class SideBySideDesign:
    effect: float  # A's Bradley–Terry strength minus every other system's (log-odds)
    raters_per_item: int = 1
    n_systems: int = 2
    rater_sd: float = 0.0
    tie_rate: float = 0.0
    n_resamples: int = 200

    def check(self) -> None:
        if self.n_systems < 2:
            raise PowerInputError("n_systems: a comparison needs at least two systems.")
        if self.raters_per_item < 1:
            raise PowerInputError("raters_per_item: at least one rater judges each comparison.")
        if not 0 <= self.tie_rate < 1:
            raise PowerInputError("tie_rate must lie in [0, 1).")
        if self.n_resamples < 20:
            raise PowerInputError("n_resamples: an interval needs at least 20 bootstrap resamples.")


@dataclass(frozen=True)
class PowerPoint:
    n_items: int
    power: float
    mc_error: float  # the Monte-Carlo standard error of `power`
    interval_width: float | None = None  # side by side: the mean width of A's interval


@dataclass(frozen=True)
class PowerCurve:
    kind: str  # "pointwise" or "side_by_side"
    target: float
    simulations: int
    seed: int
    points: tuple[PowerPoint, ...]
    smallest_n: int | None  # the smallest n of the grid whose power reaches the target
    design: dict = field(default_factory=dict)


def _system_names(n_systems: int) -> list[str]:
    others = [chr(ord("B") + i) if i < 24 else f"S{i}" for i in range(n_systems - 1)]
    return [SYSTEM_A, *others]


def _mc_error(power: float, simulations: int) -> float:
    return math.sqrt(power * (1 - power) / simulations)


def _draw(design: PointwiseDesign, n_items: int, rng: np.random.Generator):
    """Every rater's score of every summary: (scores, raters), each summaries × raters per
    item, summary i being system ``i % n_systems``'s summary of source ``i // n_systems``."""
    n_systems = design.n_systems
    pool = design.n_raters or design.raters_per_item
    rater_effect = rng.normal(0.0, design.rater_sd, pool)
    source_effect = rng.normal(0.0, design.item_sd, n_items)
    n_summaries = n_items * n_systems
    source_of = np.repeat(np.arange(n_items), n_systems)
    system_of = np.tile(np.arange(n_systems), n_items)
    if pool == design.raters_per_item:
        raters = np.tile(np.arange(pool), (n_summaries, 1))
    else:
        raters = np.argsort(rng.random((n_summaries, pool)), axis=1)[:, : design.raters_per_item]
    true = design.mean + design.effect * (system_of == 0) + source_effect[source_of]
    scores = true[:, None] + rater_effect[raters] + rng.normal(0.0, design.residual_sd, raters.shape)
    if design.scale is not None:
        low, high = design.scale
        scores = np.clip(np.rint(scores), low, high)
    return scores, raters


def simulate_pointwise_answers(
    design: PointwiseDesign, n_items: int, rng: np.random.Generator
) -> tuple[pd.DataFrame, pd.Series, pd.Series]:
    """One simulated pointwise study as the report reads it: the answers frame (item,
    rater, question, score), and each summary's system and source."""
    scores, raters = _draw(design, n_items, rng)
    systems = np.array(_system_names(design.n_systems))
    n_summaries = len(scores)
    items = np.array([f"s{i}" for i in range(n_summaries)])
    answers = pd.DataFrame(
        {
            ITEM: np.repeat(items, design.raters_per_item),
            RATER: raters.ravel(),
            QUESTION: QUESTION_NAME,
            "score": scores.ravel(),
        }
    )
    system = pd.Series(systems[np.arange(n_summaries) % design.n_systems], index=items)
    source = pd.Series((np.arange(n_summaries) // design.n_systems).astype(str), index=items)
    return answers, system, source


def _r_plus(d: np.ndarray, axis: int = -1) -> np.ndarray:
    """Wilcoxon's statistic: the sum of the ranks of |d| (average ranks for ties, zeros
    left out as Wilcoxon did) of the positive differences, per slice."""
    from scipy.stats import rankdata

    d = np.moveaxis(np.asarray(d, dtype=float), axis, -1)
    d = np.where(d == 0, np.nan, d)
    ranks = rankdata(np.abs(d), axis=-1, nan_policy="omit")
    return np.nansum(np.where(d > 0, ranks, 0.0), axis=-1)


def wilcoxon_p(differences: np.ndarray) -> np.ndarray:
    """Two-sided p of Wilcoxon's signed-rank test for each row of `differences`, as
    scipy.stats.wilcoxon(row, zero_method="wilcox") gives it one row at a time (the report's
    test), computed for all rows at once: rows without ties or zeros get the exact
    distribution; with ties or zeros, an exact permutation test up to 13 differences and
    the normal approximation beyond; rows of zeros only have no test (NaN).
    tests/stats/test_power.py checks it against scipy row by row."""
    from scipy import stats

    d = np.atleast_2d(np.asarray(differences, dtype=float))
    p = np.full(len(d), np.nan)
    nonzero = d != 0
    testable = nonzero.any(axis=1)
    sorted_abs = np.sort(np.where(nonzero, np.abs(d), np.nan), axis=1)
    tied = (np.diff(sorted_abs, axis=1) == 0).any(axis=1)
    plain = testable & ~tied & nonzero.all(axis=1)
    if plain.any():
        p[plain] = stats.wilcoxon(d[plain], zero_method="wilcox", axis=1).pvalue
    rest = testable & ~plain
    if rest.any():
        if d.shape[1] <= 13:
            p[rest] = stats.permutation_test(
                (d[rest],), _r_plus, permutation_type="samples", vectorized=True, alternative="two-sided", axis=-1
            ).pvalue
        else:
            p[rest] = stats.wilcoxon(d[rest], zero_method="wilcox", method="asymptotic", axis=1).pvalue
    return p


def tables_p_holm(tables: np.ndarray) -> np.ndarray:
    """A against B's Holm-adjusted p for each simulated study in `tables` (studies ×
    sources × systems of summary scores, A first, B second): Wilcoxon on each pair of
    systems and Holm's steps across the pairs, as the report's paired_comparisons does,
    without building its frames for each of thousands of studies."""
    pairs = list(combinations(range(tables.shape[2]), 2))
    p = np.column_stack([wilcoxon_p(tables[:, :, a] - tables[:, :, b]) for a, b in pairs])
    adjusted = [holm([None if math.isnan(v) else float(v) for v in row])[0] for row in p]
    return np.array([np.nan if v is None else v for v in adjusted])


def _table(design: PointwiseDesign, n_items: int, rng: np.random.Generator) -> np.ndarray:
    scores, _ = _draw(design, n_items, rng)
    return scores.mean(axis=1).reshape(n_items, design.n_systems)


def _curve(
    kind: str,
    grid: Sequence[int],
    one_point: Callable[[int, np.random.Generator], PowerPoint],
    *,
    target: float,
    simulations: int,
    seed: int,
    design: dict,
) -> PowerCurve:
    if simulations < 1:
        raise PowerInputError("simulations: at least one run per point.")
    if not 0 < target < 1:
        raise PowerInputError("target power must lie between 0 and 1.")
    sizes = sorted({int(n) for n in grid})
    if not sizes or sizes[0] < 2:
        raise PowerInputError("The grid needs numbers of items of at least 2.")
    # One stream per point, so adding a point to the grid leaves the others unchanged.
    streams = np.random.SeedSequence(seed).spawn(len(sizes))
    points = tuple(one_point(n, np.random.default_rng(s)) for n, s in zip(sizes, streams, strict=True))
    smallest = next((p.n_items for p in points if p.power >= target), None)
    return PowerCurve(kind, target, simulations, seed, points, smallest, design)


def pointwise_power(
    design: PointwiseDesign,
    grid: Sequence[int],
    *,
    simulations: int = 500,
    target: float = 0.8,
    seed: int = 0,
    decide: Callable[[np.ndarray], bool] | None = None,
) -> PowerCurve:
    """Power against the number of sources (each summarised by every system). `decide`
    (a sources × systems table of summary scores -> rejected?) replaces the report's test:
    the tests pass a paired t-test to check the simulation against a closed form."""
    design.check()

    def one_point(n_items: int, rng: np.random.Generator) -> PowerPoint:
        if decide is None:
            tables = np.stack([_table(design, n_items, rng) for _ in range(simulations)])
            hits = int(np.sum(tables_p_holm(tables) < design.alpha))
        else:
            hits = sum(bool(decide(_table(design, n_items, rng))) for _ in range(simulations))
        power = hits / simulations
        return PowerPoint(n_items, power, _mc_error(power, simulations))

    return _curve(
        "pointwise", grid, one_point, target=target, simulations=simulations, seed=seed, design=vars(design).copy()
    )


def simulate_judgements(design: SideBySideDesign, n_items: int, rng: np.random.Generator) -> pd.DataFrame:
    """One simulated side-by-side study: item, rater, left, right, choice."""
    systems = _system_names(design.n_systems)
    strength = np.zeros(len(systems))
    strength[0] = design.effect
    pairs = list(combinations(range(len(systems)), 2))
    chosen = np.array(pairs)[rng.integers(0, len(pairs), n_items)]
    swap = rng.random(n_items) < 0.5
    left = np.where(swap, chosen[:, 1], chosen[:, 0])
    right = np.where(swap, chosen[:, 0], chosen[:, 1])
    rater_strength = strength + rng.normal(0.0, design.rater_sd, (design.raters_per_item, len(systems)))
    rows = []
    for r in range(design.raters_per_item):
        gap = rater_strength[r, left] - rater_strength[r, right]
        left_wins = rng.random(n_items) < 1 / (1 + np.exp(-gap))
        tie = rng.random(n_items) < design.tie_rate
        choice = np.where(tie, "tie", np.where(left_wins, "left", "right"))
        rows.append(
            pd.DataFrame(
                {
                    ITEM: np.arange(n_items),
                    RATER: r,
                    LEFT: np.array(systems)[left],
                    RIGHT: np.array(systems)[right],
                    CHOICE: choice,
                }
            )
        )
    return pd.concat(rows, ignore_index=True)


def _separated(ranking_rows: list[dict]) -> tuple[bool, float | None]:
    by_system = {row["system"]: row for row in ranking_rows}
    a, b = by_system.get(SYSTEM_A), by_system.get(SYSTEM_B)
    if a is None or b is None or a["ci_low"] is None or b["ci_high"] is None:
        return False, None
    return a["ci_low"] > b["ci_high"], a["ci_high"] - a["ci_low"]


def side_by_side_power(
    design: SideBySideDesign, grid: Sequence[int], *, simulations: int = 200, target: float = 0.8, seed: int = 0
) -> PowerCurve:
    """Power against the number of comparison items: the chance that A's Bradley–Terry
    interval excludes B's, with the mean width of A's interval."""
    design.check()

    def one_point(n_items: int, rng: np.random.Generator) -> PowerPoint:
        hits, widths = 0, []
        for _ in range(simulations):
            frame = simulate_judgements(design, n_items, rng)
            try:
                ranking = bradley_terry_ranking(frame, n_resamples=design.n_resamples, seed=int(rng.integers(2**31)))
            except ValueError:
                continue  # a study where some system was never compared: no ranking, no success
            separated, width = _separated(ranking.systems)
            hits += separated
            if width is not None:
                widths.append(width)
        power = hits / simulations
        return PowerPoint(n_items, power, _mc_error(power, simulations), float(np.mean(widths)) if widths else None)

    return _curve(
        "side_by_side", grid, one_point, target=target, simulations=simulations, seed=seed, design=vars(design).copy()
    )


@dataclass(frozen=True)
class PilotEstimate:
    n_sources: int
    n_summaries: int
    n_raters: int
    system_means: dict[str, float]
    effect: float | None  # the best system's mean minus the second best's
    item_sd: float
    rater_sd: float
    residual_sd: float
    raters_per_item: float  # the mean number of raters per summary


def pilot_estimate(answers: pd.DataFrame, system: pd.Series, source: pd.Series) -> PilotEstimate:
    """Moment estimates of a design's parameters from one question's answers (item,
    rater, score; `system` and `source` map each summary item to its system and source)."""
    frame = answers.dropna(subset=["score"]).copy()
    frame[ITEM] = frame[ITEM].astype(str).str.split(":", n=1).str[0]
    frame = frame.groupby([ITEM, RATER], as_index=False)["score"].mean()
    if frame[ITEM].nunique() < 2:
        raise PowerInputError("A pilot needs ratings of at least two summaries.")
    frame["system"] = system.reindex(frame[ITEM]).to_numpy()
    frame["source"] = source.reindex(frame[ITEM]).to_numpy()
    frame = frame.dropna(subset=["system", "source"])
    total = frame.groupby(ITEM)["score"].transform("sum")
    count = frame.groupby(ITEM)["score"].transform("count")
    shared = frame[count > 1]
    others = (total - frame["score"])[count > 1] / (count - 1)[count > 1]
    deviation = (shared["score"] - others).groupby(shared[RATER]).mean()
    rater_sd = float(deviation.std(ddof=1)) if len(deviation) > 1 else 0.0
    adjusted = frame["score"] - frame[RATER].map(deviation).fillna(0.0)
    residual = adjusted - adjusted.groupby(frame[ITEM]).transform("mean")
    n_per = float(count.groupby(frame[ITEM]).first().mean())
    residual_sd = float(math.sqrt((residual**2).sum() / max(len(frame) - frame[ITEM].nunique(), 1)))
    summary_mean = adjusted.groupby(frame[ITEM]).mean()
    by_summary = pd.DataFrame({"score": summary_mean, "system": system.reindex(summary_mean.index)})
    by_summary["source"] = source.reindex(summary_mean.index)
    system_means = by_summary.groupby("system")["score"].mean().sort_values(ascending=False)
    centred = by_summary["score"] - by_summary["system"].map(system_means)
    source_means = centred.groupby(by_summary["source"]).mean()
    per_source = by_summary.groupby("source").size().mean()
    source_var = float(source_means.var(ddof=1)) if len(source_means) > 1 else 0.0
    item_var = max(source_var - residual_sd**2 / (n_per * per_source), 0.0)
    effect = float(system_means.iloc[0] - system_means.iloc[1]) if len(system_means) > 1 else None
    return PilotEstimate(
        n_sources=int(frame["source"].nunique()),
        n_summaries=int(frame[ITEM].nunique()),
        n_raters=int(frame[RATER].nunique()),
        system_means={str(k): float(v) for k, v in system_means.items()},
        effect=effect,
        item_sd=math.sqrt(item_var),
        rater_sd=rater_sd,
        residual_sd=residual_sd,
        raters_per_item=n_per,
    )
