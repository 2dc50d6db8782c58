"""Rater severity and drift, worked by hand on a small study."""

from __future__ import annotations

import pandas as pd
import pytest

from stats.severity import drift, severity

# item, rater, value, order (the rater's answer order)
ROWS = [
    ("i1", "a", 2, 1), ("i1", "b", 4, 1), ("i1", "c", 3, 1),
    ("i2", "a", 3, 2), ("i2", "b", 5, 2),
    ("i3", "a", 4, 3), ("i3", "c", 4, 2),
    ("i4", "a", 5, 4),
]  # fmt: skip
FRAME = pd.DataFrame(ROWS, columns=["item", "rater", "value", "order"])


def with_gold(frame):
    """Gold answers: i1 is 2, i4 is 4; each answer compared with them."""
    gold = {"i1": 2, "i4": 4}
    return frame.assign(
        gold_correct=[gold[i] == v if i in gold else None for i, v in zip(frame["item"], frame["value"], strict=True)]
    )


def test_severity_is_the_mean_signed_difference_from_the_other_raters():
    found = {row.rater: row for row in severity(FRAME, n_resamples=500, seed=3)}
    # a: i1 2 - (4+3)/2 = -1.5, i2 3 - 5 = -2, i3 4 - 4 = 0; i4 is shared with nobody.
    assert found["a"].n_shared == 3 and found["a"].severity == pytest.approx(-7 / 6)
    # b: i1 4 - (2+3)/2 = 1.5, i2 5 - 3 = 2.
    assert found["b"].n_shared == 2 and found["b"].severity == pytest.approx(1.75)
    # c: i1 3 - (2+4)/2 = 0, i3 4 - 4 = 0.
    assert found["c"].severity == 0
    # The bootstrap means of a's three differences lie between their extremes.
    assert -2 <= found["a"].ci_low < found["a"].ci_high <= 0


def test_severity_needs_a_shared_item():
    alone = FRAME[FRAME["item"] == "i4"]
    assert severity(alone) == []


def test_drift_windows_agreement_with_others_and_gold():
    windows = [w for w in drift(with_gold(FRAME), window=2) if w.rater == "a"]
    first, second = windows
    # Window 1 (i1, i2): nobody else agreed with a; a matched gold on i1.
    assert (first.first, first.last, first.n_shared) == (1, 2, 2)
    assert first.agreement_with_others == 0.0
    assert (first.n_gold, first.agreement_with_gold) == (1, 1.0)
    # Window 2 (i3, i4): c agreed on i3, i4 has no other rater; a missed gold on i4.
    assert (second.first, second.last, second.n_shared) == (3, 4, 1)
    assert second.agreement_with_others == 1.0
    assert (second.n_gold, second.agreement_with_gold) == (1, 0.0)


def test_drift_follows_each_raters_own_order():
    shuffled = FRAME.assign(order=FRAME["order"].map({1: 4, 2: 3, 3: 2, 4: 1}))
    first = next(w for w in drift(with_gold(shuffled), window=2) if w.rater == "a")
    # Now i4 and i3 come first.
    assert first.agreement_with_others == 1.0 and first.agreement_with_gold == 0.0
    with pytest.raises(ValueError):
        drift(FRAME, window=0)


def test_drift_agreement_is_the_share_of_the_other_raters_answers_that_match_on_a_large_frame():
    """Against the definition counted answer by answer: for each answer, the other raters'
    answers to its item, and the share equal to it (numbers and texts mixed, as the monitor's)."""
    import random

    rng = random.Random(4)
    rows = [
        (f"i{i}:q{q}", f"r{r}", rng.choice([1, 2, 3, "yes", "no"]), rng.random())
        for i in range(60)
        for q in range(3)
        for r in rng.sample(range(8), 3)
    ]
    frame = pd.DataFrame(rows, columns=["item", "rater", "value", "order"])
    expected = {}
    for rater in sorted(frame["rater"].unique()):
        mine = frame[frame["rater"] == rater].sort_values("order", kind="stable")
        shares = []
        for item, value in zip(mine["item"], mine["value"], strict=True):
            theirs = [v for it, r, v, _ in rows if it == item and r != rater]
            shares.append(sum(v == value for v in theirs) / len(theirs) if theirs else None)
        for start in range(0, len(shares), 10):
            part = [s for s in shares[start : start + 10] if s is not None]
            expected[(rater, start // 10 + 1)] = (len(part), sum(part) / len(part) if part else None)
    got = {(w.rater, w.window): (w.n_shared, w.agreement_with_others) for w in drift(frame, window=10)}
    assert got.keys() == expected.keys()
    for key, (n, share) in expected.items():
        assert got[key][0] == n
        assert (got[key][1] is None and share is None) or got[key][1] == pytest.approx(share)
