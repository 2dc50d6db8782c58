"""Comparisons of systems (stats/pairwise.py): Bradley–Terry against a published worked
example and an independent logistic-regression fit, the rest worked by hand."""

import math

import numpy as np
import pandas as pd
import pytest

from stats.pairwise import (
    PairwiseInputError,
    agreement_with_pointwise,
    bradley_terry_ranking,
    bradley_terry_strengths,
    intransitive_triads,
    position_bias,
    preference_agreement,
    win_tie_loss,
)


def judgements(rows):
    """rows of (item, rater, left, right, choice)."""
    return pd.DataFrame(rows, columns=["item", "rater", "left", "right", "choice"])


def from_wins(wins: dict[tuple[str, str], int]) -> pd.DataFrame:
    rows, i = [], 0
    for (winner, loser), count in wins.items():
        for _ in range(count):
            # Alternate sides so the position does not follow the winner.
            left, right, choice = (winner, loser, "left") if i % 2 else (loser, winner, "right")
            rows.append((f"i{i}", "r", left, right, choice))
            i += 1
    return judgements(rows)


def test_bradley_terry_reproduces_the_published_worked_example():
    """Wikipedia, "Bradley–Terry model", worked example: four teams, 22 games; the
    maximum-likelihood worths, scaled to a geometric mean of 1, are 0.640, 1.043, 0.660, 2.270."""
    wins = {("A", "B"): 2, ("A", "D"): 1, ("B", "A"): 3, ("B", "C"): 5, ("C", "B"): 3, ("C", "D"): 1}
    wins |= {("D", "A"): 4, ("D", "C"): 3}
    strengths = bradley_terry_strengths(from_wins(wins), alpha=0)
    worth = {s: math.exp(v) for s, v in strengths.items()}  # centred log worths: geometric mean 1
    assert [round(worth[s], 3) for s in "ABCD"] == [0.640, 1.043, 0.660, 2.270]


def test_bradley_terry_with_ties_as_half_wins_is_the_logistic_regression_fit():
    """The same model fitted independently: a binomial GLM (statsmodels) with one column per
    system (+1 winner, -1 loser, the first system as reference), no intercept, each
    decisive judgement weight 1 and a tie half a win each way."""
    import statsmodels.api as sm

    rng = np.random.default_rng(7)
    systems = ["s1", "s2", "s3", "s4"]
    true = {"s1": 0.8, "s2": 0.2, "s3": -0.3, "s4": -0.7}
    rows = []
    for i in range(300):
        left, right = rng.choice(systems, 2, replace=False)
        p_left = 1 / (1 + math.exp(true[right] - true[left]))
        u = rng.random()
        choice = "tie" if u < 0.15 else ("left" if u < 0.15 + 0.85 * p_left else "right")
        rows.append((f"i{i}", f"r{i % 3}", left, right, choice))
    frame = judgements(rows)
    ours = bradley_terry_strengths(frame, alpha=0)

    x, weights = [], []
    for left, right, choice in frame[["left", "right", "choice"]].itertuples(index=False):
        forward = np.array([float(s == left) - float(s == right) for s in systems])
        if choice == "tie":
            x += [forward, -forward]
            weights += [0.5, 0.5]
        else:
            x.append(forward if choice == "left" else -forward)
            weights.append(1.0)
    design = np.array(x)[:, 1:]  # s1 is the reference (strength 0)
    fit = sm.GLM(np.ones(len(design)), design, family=sm.families.Binomial(), freq_weights=np.array(weights)).fit()
    theirs = np.concatenate([[0.0], fit.params])
    theirs -= theirs.mean()
    assert [ours[s] for s in systems] == pytest.approx(list(theirs), abs=1e-4)


def test_ranking_intervals_and_place_stability_are_seeded_and_cover_the_fit():
    wins = {("A", "B"): 9, ("B", "A"): 1, ("B", "C"): 8, ("C", "B"): 2, ("A", "C"): 10}
    frame = from_wins(wins)
    ranking = bradley_terry_ranking(frame, n_resamples=200, seed=3)
    assert [r["system"] for r in ranking.systems] == ["A", "B", "C"]
    assert [r["place"] for r in ranking.systems] == [1, 2, 3]
    for row in ranking.systems:
        assert row["ci_low"] <= row["strength"] <= row["ci_high"]
        assert 0 <= row["place_kept"] <= 1
    assert sum(r["probability"] for r in ranking.systems) == pytest.approx(1.0)
    assert ranking.systems[0]["place_kept"] > 0.9  # A wins almost everything
    again = bradley_terry_ranking(frame, n_resamples=200, seed=3)
    assert again.systems == ranking.systems
    assert (ranking.n_judgements, ranking.n_items) == (30, 30)


def test_wins_ties_and_losses_with_wilson_intervals_by_hand():
    rows = (
        [("i1", "r", "A", "B", "left")] * 8 + [("i2", "r", "B", "A", "left")] * 2 + [("i3", "r", "A", "B", "tie")] * 3
    )
    (row,) = win_tie_loss(judgements(rows))
    assert (row["a"], row["b"], row["n"], row["wins_a"], row["ties"], row["wins_b"]) == ("A", "B", 13, 8, 3, 2)
    # Wilson 95%: (p + z²/2n ± z sqrt(p(1-p)/n + z²/4n²)) / (1 + z²/n), p = .8, n = 10.
    z, p, n = 1.959963984540054, 0.8, 10
    centre, half = p + z * z / (2 * n), z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    assert row["win_rate_a"] == 0.8
    assert (row["ci_low"], row["ci_high"]) == (
        pytest.approx((centre - half) / (1 + z * z / n)),
        pytest.approx((centre + half) / (1 + z * z / n)),
    )


def test_position_bias_by_hand():
    # Rater r1: 8 of 10 decisive judgements chose the left summary; r2: 1 of 2; one tie.
    rows = [("i", "r1", "A", "B", "left")] * 8 + [("i", "r1", "A", "B", "right")] * 2
    rows += [("j", "r2", "A", "B", "left"), ("j", "r2", "B", "A", "left"), ("k", "r2", "A", "B", "tie")]
    overall, r1, r2 = position_bias(judgements(rows))
    assert (overall["rater"], overall["n"], overall["left"]) == (None, 12, 10)
    assert (r1["rater"], r1["n"], r1["left"], r1["left_share"]) == ("r1", 10, 8, 0.8)
    # Two-sided exact binomial: P(X >= 8) + P(X <= 2) = 2 * (45 + 10 + 1) / 1024.
    assert r1["p_value"] == pytest.approx(112 / 1024)
    assert (r2["n"], r2["left"], r2["p_value"]) == (2, 2, pytest.approx(0.5))


def test_intransitive_triads_by_hand():
    # Over all raters: A beats B 2-1, B beats C 2-0, C beats A 1-0: the cycle A > B > C > A;
    # D loses to everyone: no cycle through D. Rater r2 alone: B > A only, no triad.
    rows = [
        ("1", "r1", "A", "B", "left"),
        ("2", "r1", "A", "B", "left"),
        ("3", "r2", "A", "B", "right"),
        ("4", "r1", "B", "C", "left"),
        ("5", "r1", "C", "B", "right"),
        ("6", "r1", "A", "C", "right"),
        ("7", "r1", "A", "D", "left"),
        ("8", "r1", "B", "D", "left"),
        ("9", "r1", "C", "D", "left"),
        ("10", "r1", "C", "A", "tie"),
    ]
    result = intransitive_triads(judgements(rows))
    assert result["all"] == [["A", "B", "C"]]
    assert result["per_rater"] == {"r1": [["A", "B", "C"]], "r2": []}


def test_raters_agreement_on_preferences_by_hand():
    # Four comparisons rated by both raters: they agree on three (position swapped on one).
    rows = [
        ("1", "r1", "A", "B", "left"),
        ("1", "r2", "B", "A", "right"),  # the same preference, A, shown on the other side
        ("2", "r1", "A", "B", "right"),
        ("2", "r2", "A", "B", "right"),
        ("3", "r1", "A", "B", "tie"),
        ("3", "r2", "A", "B", "tie"),
        ("4", "r1", "A", "B", "left"),
        ("4", "r2", "A", "B", "tie"),
    ]
    result = preference_agreement(judgements(rows))
    assert result["percent_agreement"] == pytest.approx(0.75)
    # Cohen by hand: r1 (A, B, tie, A), r2 (A, B, tie, tie): p_o = 3/4; p_e = (2/4)(1/4) + (1/4)(1/4)
    # + (1/4)(2/4) = 5/16; kappa = (3/4 - 5/16) / (1 - 5/16) = 7/11.
    (pair,) = result["cohen_kappa"]
    assert pair["kappa"] == pytest.approx(7 / 11)


def test_preferences_against_pointwise_scores_by_hand():
    rows = [
        ("1", "r", "A", "B", "left"),  # a1 (4) over b1 (2): agrees
        ("2", "r", "A", "B", "right"),  # b2 (3) over a2 (5): disagrees
        ("3", "r", "B", "A", "left"),  # b3 (4) over a3 (3): agrees
        ("4", "r", "A", "B", "tie"),  # ties are left out
        ("5", "r", "A", "B", "left"),  # equal scores
        ("6", "r", "A", "B", "left"),  # a6 never rated alone
    ]
    scores = {"a1": 4, "b1": 2, "a2": 5, "b2": 3, "b3": 4, "a3": 3, "a5": 3, "b5": 3, "b6": 1}
    pairs = [("a1", "b1"), ("a2", "b2"), ("b3", "a3"), ("a4", "b4"), ("a5", "b5"), ("a6", "b6")]
    result = agreement_with_pointwise(judgements(rows), scores, pairs)
    assert (result["n"], result["agree"], result["equal_scores"], result["unscored"]) == (3, 2, 1, 1)
    assert result["share"] == pytest.approx(2 / 3)


def test_bad_input_is_refused_with_the_reason():
    with pytest.raises(PairwiseInputError, match="choice must be one of"):
        win_tie_loss(judgements([("1", "r", "A", "B", "both")]))
    with pytest.raises(PairwiseInputError, match="with itself"):
        win_tie_loss(judgements([("1", "r", "A", "A", "left")]))
    with pytest.raises(PairwiseInputError, match="at least two systems"):
        bradley_terry_strengths(judgements([]))


def test_newton_fit_matches_choix_and_reaches_a_lower_loss():
    """fit_bradley_terry minimises choix's own objective (opt_pairwise): on random
    comparison sets, with and without a penalty, the strengths agree with choix's
    Newton-CG (which stops at a relative change of 1e-5) within 1e-4, and the loss is never
    higher than at choix's answer. A batch of problems gives what each gives alone."""
    import choix

    from stats.pairwise import _penalised_loss, fit_bradley_terry

    rng = np.random.default_rng(11)
    batch, singles = [], []
    for _ in range(60):
        k, n = int(rng.integers(2, 6)), int(rng.integers(5, 60))
        data = [tuple(int(s) for s in rng.choice(k, 2, replace=False)) for _ in range(n)]
        counts = np.zeros((k, k))
        for winner, loser in data:
            counts[winner, loser] += 1
        for alpha in (1e-3, 0.1):
            theirs = np.asarray(choix.opt_pairwise(k, data, alpha=alpha))
            ours = fit_bradley_terry(counts, alpha=alpha)
            assert ours == pytest.approx(theirs - theirs.mean(), abs=1e-4)
            assert _penalised_loss(counts, ours, alpha) <= _penalised_loss(counts, theirs, alpha) + 1e-9
        if k == 4:
            batch.append(counts)
            singles.append(fit_bradley_terry(counts, alpha=1e-3))
    together = fit_bradley_terry(np.array(batch), alpha=1e-3)
    assert together == pytest.approx(np.array(singles), abs=1e-9)
