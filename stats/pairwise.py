"""Comparisons of systems side by side: preferences, rankings with intervals, position bias.
Pure functions over one tidy frame; no ORM.

The frame has one row per judgement: ``item`` (the comparison: one source, the summaries
shown), ``rater``, ``left`` and ``right`` (the systems whose summaries were shown on the
left and on the right) and ``choice``: "left", "right" or "tie". Every function below
reads the systems from ``left``/``right``, so the position is never lost.

Statistical choices:
- **Wins, ties and losses** per pair of systems, with 95% Wilson intervals (statsmodels)
  for the share of decisive judgements the first system wins; ties are counted apart.
- **Bradley–Terry strengths** (log scale, centred on 0), fitted by maximum likelihood
  (choix's ``opt_pairwise`` loss, minimised by Newton's method over all bootstrap
  resamples at once: ``fit_bradley_terry``) with a small L2 penalty (``alpha``, default 1e-3) so that a
  system that never lost still has a finite strength. **Ties as half-wins**: a tie counts
  as half a win for each system (every decisive judgement is entered twice, every tie once
  in each direction, which has the same maximum). Davidson's tie parameter is not fitted:
  half-wins keep the model one a logistic regression can fit independently (the tests do,
  with statsmodels). ``probability`` is exp(strength) over the sum (the chance a system
  wins against a random one of the others, under the model, is not this; this is the
  Bradley–Terry "worth" normalised to 1).
- **Intervals and stability**: a percentile bootstrap over comparison items (every
  judgement of an item resampled together), seeded; each system's place in every
  resample's ranking gives the share of resamples that keep it where the full data put it.
- **Position bias**: among decisive judgements, the share that chose the left summary,
  with a two-sided exact binomial test against 1/2 (scipy) and a Wilson interval, per
  rater and overall.
- **Intransitive triads**: systems A, B, C with A preferred to B, B to C and C to A, each
  preference the majority of the decisive judgements between the two (a pair with equal
  wins has no preference). Counted over all raters and per rater.
- **Agreement on preferences**: each judgement put on a fixed order of its two systems
  (the first in sorted order: 0 = first wins, 1 = tie, 2 = second wins), one rating item
  per (comparison item, system pair); percent agreement, Cohen's kappa per rater pair and
  Krippendorff's alpha (nominal) from stats.agreement.
- **Preference against pointwise scores**: where both summaries were also rated one at a
  time, the summary with the higher mean pointwise score should be preferred; the share
  of decisive judgements on pairs with unequal scores that agree, with a Wilson interval.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import combinations
from typing import Any

import numpy as np
import pandas as pd

ITEM, RATER, LEFT, RIGHT, CHOICE = "item", "rater", "left", "right", "choice"
CHOICES = ("left", "right", "tie")
DEFAULT_ALPHA = 1e-3


class PairwiseInputError(ValueError):
    """The judgements cannot be analysed as given."""


def validate(frame: pd.DataFrame) -> pd.DataFrame:
    missing = [c for c in (ITEM, RATER, LEFT, RIGHT, CHOICE) if c not in frame.columns]
    if missing:
        raise PairwiseInputError(f"The judgements lack column(s) {missing}.")
    bad = frame[~frame[CHOICE].isin(CHOICES)]
    if len(bad):
        raise PairwiseInputError(f"choice must be one of {', '.join(CHOICES)}, not {bad[CHOICE].iloc[0]!r}.")
    same = frame[frame[LEFT] == frame[RIGHT]]
    if len(same):
        raise PairwiseInputError(f"item {same[ITEM].iloc[0]!r} compares system {same[LEFT].iloc[0]!r} with itself.")
    return frame.assign(**{LEFT: frame[LEFT].astype(str), RIGHT: frame[RIGHT].astype(str)})


def outcomes(frame: pd.DataFrame) -> pd.DataFrame:
    """winner, loser and tie of every judgement (a tie's winner and loser are its left and
    right systems)."""
    frame = validate(frame)
    left_won = frame[CHOICE] == "left"
    return pd.DataFrame(
        {
            ITEM: frame[ITEM].to_numpy(),
            RATER: frame[RATER].to_numpy(),
            "winner": np.where(left_won, frame[LEFT], frame[RIGHT]),
            "loser": np.where(left_won, frame[RIGHT], frame[LEFT]),
            "tie": (frame[CHOICE] == "tie").to_numpy(),
        }
    )


def systems_of(frame: pd.DataFrame) -> list[str]:
    return sorted(set(frame[LEFT].astype(str)) | set(frame[RIGHT].astype(str)))


def _wilson(successes: int, n: int) -> tuple[float | None, float | None]:
    if n == 0:
        return None, None
    from statsmodels.stats.proportion import proportion_confint

    low, high = proportion_confint(successes, n, alpha=0.05, method="wilson")
    return float(low), float(high)


def win_tie_loss(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """One row per pair of systems (a, b in sorted order) that were compared: judgements,
    wins of a, ties, wins of b, and a's share of the decisive judgements with its interval."""
    found = outcomes(frame)
    rows = []
    for a, b in combinations(systems_of(frame), 2):
        between = found[
            ((found["winner"] == a) & (found["loser"] == b)) | ((found["winner"] == b) & (found["loser"] == a))
        ]
        if not len(between):
            continue
        ties = int(between["tie"].sum())
        decisive = between[~between["tie"]]
        wins_a = int((decisive["winner"] == a).sum())
        wins_b = int(len(decisive) - wins_a)
        low, high = _wilson(wins_a, wins_a + wins_b)
        rows.append(
            {
                "a": a,
                "b": b,
                "n": int(len(between)),
                "wins_a": wins_a,
                "ties": ties,
                "wins_b": wins_b,
                "win_rate_a": wins_a / (wins_a + wins_b) if wins_a + wins_b else None,
                "ci_low": low,
                "ci_high": high,
            }
        )
    return rows


def _win_counts(found: pd.DataFrame, index: dict[str, int]) -> np.ndarray:
    """k × k counts of half-wins as whole ones: ``counts[w, l]`` gets 2 for a decisive
    judgement w over l, and a tie adds 1 in each direction."""
    k = len(index)
    counts = np.zeros((k, k))
    if len(found):
        winners = found["winner"].map(index).to_numpy()
        losers = found["loser"].map(index).to_numpy()
        tie = found["tie"].to_numpy(dtype=bool)
        np.add.at(counts, (winners, losers), np.where(tie, 1.0, 2.0))
        np.add.at(counts, (losers[tie], winners[tie]), 1.0)
    return counts


def _log1pexp(x: np.ndarray) -> np.ndarray:
    return np.logaddexp(0.0, x)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return np.exp(-np.logaddexp(0.0, -x))


def _penalised_loss(counts: np.ndarray, theta: np.ndarray, alpha: float) -> np.ndarray:
    """Negative penalised log-likelihood of each problem of the batch (…, k)."""
    diff = theta[..., :, None] - theta[..., None, :]
    return alpha * np.sum(theta**2, axis=-1) + np.sum(counts * _log1pexp(-diff), axis=(-2, -1))


def fit_bradley_terry(counts: np.ndarray, *, alpha: float, max_iter: int = 100, tol: float = 1e-10) -> np.ndarray:
    """Maximum (penalised) likelihood log worths of a batch of Bradley–Terry problems:
    `counts` is (…, k, k), ``counts[w, l]`` the wins of w over l; returns (…, k), centred
    on 0. The loss is choix's ``opt_pairwise`` objective (``alpha`` · Σθ² + Σ counts ·
    log(1 + exp(−(θw − θl)))), minimised by Newton's method with step halving, every
    problem of the batch at once, to a step below `tol` (choix's Newton-CG stops at a
    relative change of 1e-5; the tests check both against each other and against a
    logistic regression). The log worths are defined up to a constant, so the Newton
    system adds the all-ones direction (which the gradient never has) to stay solvable
    with ``alpha`` = 0."""
    counts = np.asarray(counts, dtype=float)
    k = counts.shape[-1]
    theta = np.zeros(counts.shape[:-1])
    ones = np.full((k, k), 1.0 / k)
    eye = np.eye(k)
    loss = _penalised_loss(counts, theta, alpha)
    for _ in range(max_iter):
        diff = theta[..., :, None] - theta[..., None, :]
        lose = _sigmoid(-diff)  # chance the row system loses to the column one
        pull = counts * lose
        grad = 2 * alpha * theta - pull.sum(axis=-1) + pull.sum(axis=-2)
        weight = counts * lose * (1 - lose)
        weight = weight + np.swapaxes(weight, -1, -2)
        hess = 2 * alpha * eye + weight.sum(axis=-1)[..., None] * eye - weight + ones
        step = -np.linalg.solve(hess, grad[..., None])[..., 0]
        scale = np.ones(theta.shape[:-1])
        for _halving in range(40):
            trial = theta + scale[..., None] * step
            trial_loss = _penalised_loss(counts, trial, alpha)
            worse = trial_loss > loss + 1e-12 * np.abs(loss)
            if not np.any(worse):
                break
            scale = np.where(worse, scale / 2, scale)
        theta, loss = trial, trial_loss
        if np.max(np.abs(scale[..., None] * step), initial=0.0) < tol:
            break
    return theta - theta.mean(axis=-1, keepdims=True)


def bradley_terry_strengths(frame: pd.DataFrame, *, alpha: float = DEFAULT_ALPHA) -> dict[str, float]:
    """Each system's Bradley–Terry strength (log worth, centred on 0); ties as half-wins."""
    systems = systems_of(frame)
    if len(systems) < 2:
        raise PairwiseInputError("A ranking needs at least two systems compared.")
    index = {s: i for i, s in enumerate(systems)}
    theta = fit_bradley_terry(_win_counts(outcomes(frame), index), alpha=alpha)
    return {s: float(theta[index[s]]) for s in systems}


def _places(strengths: dict[str, float]) -> dict[str, int]:
    """1 for the strongest system, ... (equal strengths share the better place)."""
    ordered = sorted(strengths.values(), reverse=True)
    return {s: 1 + ordered.index(v) for s, v in strengths.items()}


@dataclass(frozen=True)
class Ranking:
    systems: list[dict[str, Any]]  # system, strength, probability, ci_low, ci_high, place, place_kept
    n_judgements: int
    n_items: int
    n_resamples: int
    n_failed_resamples: int
    alpha: float


def bradley_terry_ranking(
    frame: pd.DataFrame, *, n_resamples: int = 1000, seed: int = 0, alpha: float = DEFAULT_ALPHA
) -> Ranking:
    """Strengths with percentile bootstrap intervals over comparison items and the share
    of resamples in which each system keeps its place. A resample that leaves a system out
    (none of its items drawn) is counted in `n_failed_resamples` and left out."""
    frame = validate(frame)
    strengths = bradley_terry_strengths(frame, alpha=alpha)
    systems = list(strengths)
    places = _places(strengths)
    items = frame[ITEM].unique()
    # Each comparison item's win counts; a resample's counts are their sum over the items
    # drawn (with repeats), so every resample is fitted without building a frame.
    index = {s: i for i, s in enumerate(systems)}
    found = outcomes(frame)
    position = pd.Index(items).get_indexer(found[ITEM])
    winners = found["winner"].map(index).to_numpy()
    losers = found["loser"].map(index).to_numpy()
    tie = found["tie"].to_numpy(dtype=bool)
    per_item = np.zeros((len(items), len(systems), len(systems)))
    np.add.at(per_item, (position, winners, losers), np.where(tie, 1.0, 2.0))
    np.add.at(per_item, (position[tie], losers[tie], winners[tie]), 1.0)
    rng = np.random.default_rng(seed)
    drawn = np.zeros((n_resamples, len(items)))
    for r in range(n_resamples):
        np.add.at(drawn[r], rng.integers(0, len(items), len(items)), 1.0)
    counts = np.einsum("ri,ikl->rkl", drawn, per_item)
    # A resample that left a system out (none of its items drawn) is not fitted.
    present = ((counts.sum(axis=-1) + counts.sum(axis=-2)) > 0).all(axis=-1)
    failed = int(n_resamples - present.sum())
    fitted = fit_bradley_terry(counts[present], alpha=alpha) if present.any() else np.zeros((0, len(systems)))
    samples = {s: fitted[:, index[s]].tolist() for s in systems}
    kept = {s: 0 for s in systems}
    for theta in fitted:
        resampled_places = _places({s: theta[index[s]] for s in systems})
        for s in systems:
            kept[s] += resampled_places[s] == places[s]
    done = n_resamples - failed
    worth = {s: math.exp(v) for s, v in strengths.items()}
    total = sum(worth.values())
    rows = []
    for s in sorted(systems, key=lambda s: (-strengths[s], s)):
        low = float(np.quantile(samples[s], 0.025)) if samples[s] else None
        high = float(np.quantile(samples[s], 0.975)) if samples[s] else None
        rows.append(
            {
                "system": s,
                "strength": strengths[s],
                "probability": worth[s] / total,
                "ci_low": low,
                "ci_high": high,
                "place": places[s],
                "place_kept": kept[s] / done if done else None,
            }
        )
    return Ranking(rows, int(len(frame)), int(len(items)), n_resamples, failed, alpha)


def position_bias(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """Share of decisive judgements that chose the left summary, overall (rater None) and
    per rater: n, left wins, share, Wilson interval, two-sided binomial p against 1/2."""
    from scipy.stats import binomtest

    frame = validate(frame)
    decisive = frame[frame[CHOICE] != "tie"]
    rows = []
    for rater, part in [(None, decisive), *sorted(decisive.groupby(RATER), key=lambda kv: str(kv[0]))]:
        n, left = int(len(part)), int((part[CHOICE] == "left").sum())
        low, high = _wilson(left, n)
        rows.append(
            {
                "rater": None if rater is None else str(rater),
                "n": n,
                "left": left,
                "left_share": left / n if n else None,
                "ci_low": low,
                "ci_high": high,
                "p_value": float(binomtest(left, n, 0.5).pvalue) if n else None,
            }
        )
    return rows


def _majority(found: pd.DataFrame) -> dict[tuple[str, str], str]:
    """(a, b) in sorted order -> the system most decisive judgements preferred (pairs with
    equal wins left out)."""
    decisive = found[~found["tie"]]
    wins = decisive.groupby(["winner", "loser"]).size().to_dict()
    preferred = {}
    for a, b in {tuple(sorted(p)) for p in wins}:
        ab, ba = wins.get((a, b), 0), wins.get((b, a), 0)
        if ab != ba:
            preferred[(a, b)] = a if ab > ba else b
    return preferred


def _triads(preferred: dict[tuple[str, str], str]) -> list[list[str]]:
    systems = sorted({s for pair in preferred for s in pair})
    cycles = []
    for a, b, c in combinations(systems, 3):
        pairs = [(a, b), (b, c), (a, c)]
        if not all(p in preferred for p in pairs):
            continue
        beats = {(preferred[p], p[1] if preferred[p] == p[0] else p[0]) for p in pairs}
        if {(a, b), (b, c), (c, a)} == beats:
            cycles.append([a, b, c])
        elif {(b, a), (c, b), (a, c)} == beats:
            cycles.append([a, c, b])
    return cycles


def intransitive_triads(frame: pd.DataFrame) -> dict[str, Any]:
    """Cycles A > B > C > A among the systems' majority preferences: over all raters, and
    per rater. Each cycle is listed once, as [A, B, C] with A > B > C > A."""
    found = outcomes(frame)
    per_rater = {str(r): _triads(_majority(part)) for r, part in found.groupby(RATER)}
    return {"all": _triads(_majority(found)), "per_rater": per_rater}


def preference_agreement(frame: pd.DataFrame) -> dict[str, Any]:
    """Agreement between raters on the same comparisons (stats.agreement on the three-way
    outcome first wins / tie / second wins of each (item, system pair))."""
    from stats.agreement import AgreementInputError, agreement_report

    found = outcomes(frame)
    first = np.minimum(found["winner"], found["loser"])
    second = np.maximum(found["winner"], found["loser"])
    value = np.where(found["tie"], 1.0, np.where(found["winner"] == first, 0.0, 2.0))
    coded = pd.DataFrame(
        {
            "item": found[ITEM].astype(str) + "|" + first + "|" + second,
            "rater": found[RATER].astype(str),
            "value": value,
        }
    )
    try:
        report = agreement_report(coded, [0.0, 1.0, 2.0])
    except AgreementInputError as exc:
        return {"error": str(exc)}
    return {
        "n_items": report.n_items,
        "n_raters": report.n_raters,
        "percent_agreement": _finite(report.percent_agreement),
        "krippendorff_alpha_nominal": _finite(report.krippendorff_alpha.nominal),
        "cohen_kappa": [
            {"rater_a": k.rater_a, "rater_b": k.rater_b, "n": k.n, "kappa": _finite(k.unweighted)}
            for k in report.cohen_kappa
        ],
    }


def _finite(value) -> float | None:
    return float(value) if value is not None and math.isfinite(value) else None


def agreement_with_pointwise(frame: pd.DataFrame, scores: dict[str, float], summary_of: Sequence) -> dict[str, Any]:
    """How often a decisive preference picks the summary with the higher mean pointwise
    score. `scores`: summary -> mean score; `summary_of`: for each row of `frame`, the
    (left summary, right summary) pair it compared. Judgements on summaries without a
    score, or with equal scores, are left out (counted)."""
    frame = validate(frame)
    agree = n = equal = unscored = 0
    for choice, (left, right) in zip(frame[CHOICE], summary_of, strict=True):
        if choice == "tie":
            continue
        a, b = scores.get(left), scores.get(right)
        if (
            a is None
            or b is None
            or (isinstance(a, float) and math.isnan(a))
            or (isinstance(b, float) and math.isnan(b))
        ):
            unscored += 1
            continue
        if a == b:
            equal += 1
            continue
        n += 1
        agree += (choice == "left") == (a > b)
    low, high = _wilson(agree, n)
    return {
        "n": n,
        "agree": agree,
        "share": agree / n if n else None,
        "ci_low": low,
        "ci_high": high,
        "equal_scores": equal,
        "unscored": unscored,
    }


def preference_codes(frame: pd.DataFrame) -> pd.DataFrame:
    """item, rater, value: each judgement on a fixed order of the item's two summaries
    (0 = the first summary in sorted order preferred, 1 = tie, 2 = the second), from a
    frame with ``left_summary`` and ``right_summary`` beside ``choice``."""
    first = np.minimum(frame["left_summary"], frame["right_summary"])
    preferred = np.where(
        frame[CHOICE] == "left", frame["left_summary"], np.where(frame[CHOICE] == "right", frame["right_summary"], "")
    )
    value = np.where(frame[CHOICE] == "tie", 1.0, np.where(preferred == first, 0.0, 2.0))
    return pd.DataFrame({ITEM: frame[ITEM].astype(str), RATER: frame[RATER].astype(str), "value": value})


def judge_preference_agreement(frame: pd.DataFrame, judge: pd.DataFrame, judge_name: str) -> dict[str, Any]:
    """An LLM judge's preferences beside people's on the same comparisons.

    ``frame``: people's judgements of one question (with ``left_summary``,
    ``right_summary``); ``judge``: item, preferred (a summary or "tie": its answer that
    counts, a flip between the two orders already a tie), consistent (the same answer in
    both orders). Position consistency is the share of the judge's comparisons answered
    the same in both orders; Cohen's kappa (unweighted, on A/B/tie put on a fixed order
    of each item's summaries) of the judge with each rater beside the raters' with each
    other, each pair on the comparisons both answered (stats.judges.judge_agreement)."""
    from stats.judges import judge_agreement

    n = int(len(judge))
    consistent = int(judge["consistent"].sum()) if n else 0
    result: dict[str, Any] = {
        "judge": judge_name,
        "n_comparisons": n,
        "position_consistency": consistent / n if n else None,
        "n_flips": n - consistent,
    }
    people = preference_codes(frame)
    firsts = {
        str(item): (min(left, right), max(left, right))
        for item, left, right in frame[[ITEM, "left_summary", "right_summary"]].itertuples(index=False)
    }
    rows = []
    for item, preferred in judge[[ITEM, "preferred"]].itertuples(index=False):
        pair = firsts.get(str(item))
        if pair is None:
            continue  # no person compared it: nothing to agree with
        rows.append((str(item), 1.0 if preferred == "tie" else 0.0 if preferred == pair[0] else 2.0))
    judged = pd.DataFrame(rows, columns=[ITEM, "value"])
    if not len(judged) or not len(people):
        return {**result, "pairs": [], "judge_mean_kappa": None, "human_mean_kappa": None}
    agreement = judge_agreement(people, judged, [0.0, 1.0, 2.0], judge_name)
    pairs = [
        {
            "rater_a": p["rater_a"],
            "rater_b": p["rater_b"],
            "n": p["n"],
            "kappa": p["unweighted"],
            "with_judge": p["with_judge"],
        }
        for p in agreement.pairs
    ]
    from stats.judges import mean_defined

    return {
        **result,
        "pairs": pairs,
        "judge_mean_kappa": mean_defined([p["kappa"] for p in pairs if p["with_judge"]]),
        "human_mean_kappa": mean_defined([p["kappa"] for p in pairs if not p["with_judge"]]),
    }
