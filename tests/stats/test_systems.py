"""Human scores per system (FactPICO Tables 3 and 12), worked by hand on a small study."""

import math

import pandas as pd
import pytest

from stats.systems import system_table

GENERATORS = pd.Series({"s1": "g1", "s2": "g1", "s3": "g2", "s4": "g2"})
ANSWERS = pd.DataFrame(
    [
        ("s1", "r1", "population", 4.0),
        ("s1", "r2", "population", 2.0),
        ("s1:f1", "r1", "evidence", 3.0),
        ("s1:f2", "r1", "evidence", 1.0),
        ("s1:f1", "r2", "evidence", 4.0),
        ("s2", "r1", "population", 3.0),
        ("s2:f1", "r1", "evidence", 2.0),
        ("s3", "r1", "population", 1.0),
        ("s3", "r2", "population", math.nan),  # N/A counted as missing
    ],
    columns=["item", "rater", "question", "score"],
)
SPANS = pd.DataFrame(
    [
        ("s1", "r1", "added_info", "yes"),
        ("s1", "r2", "added_info", "no"),
        ("s2", "r1", "added_info", "no"),
        ("s3", "r1", "added_info", "no"),
        ("s2", "r2", "contradictions", None),
    ],
    columns=["item", "rater", "question", "factual"],
)
METRICS = pd.DataFrame({"item": ["s1", "s2", "s3", "s4"], "n_words": [10, 20, 30, 40], "delta_fk": [1, 3, -2, 9]})


def table(scales):
    return system_table(
        answers=ANSWERS,
        spans=SPANS,
        generators=GENERATORS,
        metrics=METRICS,
        scales=scales,
        span_questions=["added_info", "contradictions"],
    )


def test_per_system_means_counts_and_shares_by_hand():
    result = table({"population": (1.0, 4.0), "evidence": (1.0, 4.0)})
    g1, g2 = result["rows"]
    assert (g1["generator"], g1["n_summaries"], g1["n_rated"]) == ("g1", 2, 2)
    # population: s1 (4 + 2) / 2 = 3, s2 3 -> 3; evidence: s1 (3 + 1 + 4) / 3 = 8/3, s2 2 -> 7/3.
    assert g1["scores"] == {"population": pytest.approx(3.0), "evidence": pytest.approx(7 / 3)}
    assert g1["average"] == pytest.approx((3 + 7 / 3) / 2)  # one shared scale: the mean of the columns
    assert (g1["n_words"], g1["delta_fk"], g1["rougeL"]) == (pytest.approx(15.0), pytest.approx(2.0), None)
    # #N and %N: three added spans in g1, two of them not factual, in both of its summaries.
    assert g1["spans"]["added_info"] == {"n": 3, "share": 1.0, "n_not_factual": 2, "share_not_factual": 1.0}
    assert g1["spans"]["contradictions"] == {"n": 1, "share": 0.5}  # asked no "factual"
    # g2: s4 is not rated, so it is in no mean and no share; s3's N/A is a missing score.
    assert (g2["n_summaries"], g2["n_rated"]) == (2, 1)
    assert g2["scores"] == {"population": pytest.approx(1.0), "evidence": None}
    assert g2["average"] == pytest.approx(1.0) and g2["n_words"] == pytest.approx(30.0)
    assert g2["spans"]["added_info"] == {"n": 1, "share": 1.0, "n_not_factual": 1, "share_not_factual": 1.0}
    assert g2["spans"]["contradictions"] == {"n": 0, "share": 0.0}
    assert result["average_scale"] == "question scale"


def test_scales_of_different_lengths_are_averaged_on_zero_to_one():
    result = table({"population": (1.0, 4.0), "evidence": (1.0, 5.0)})
    g1 = result["rows"][0]
    # population 3 on 1-4 -> 2/3; evidence 7/3 on 1-5 -> 1/3.
    assert g1["average"] == pytest.approx((2 / 3 + 1 / 3) / 2) and result["average_scale"] == "0-1"
