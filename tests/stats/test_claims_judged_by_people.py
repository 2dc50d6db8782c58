"""Claims judged by people against each other and against Factored Verification
(stats.claims), worked by hand; agreement checked against scikit-learn and the
krippendorff package; the study report's section built from real submitted answers."""

import math

import krippendorff
import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import cohen_kappa_score

from stats.claims import before_after_revision, claim_agreement, detector_against_people, people_labels

S, N, C = "supported", "not_supported", "cannot_tell"

# (item, claim, detector verdict, [labels by r1, r2]); None: nobody judged it.
CLAIMS = [
    ("A", "a1", N, [N, N]),  # true positive
    ("A", "a2", N, [S, S]),  # false positive
    ("A", "a3", S, [S, S]),  # true negative
    ("B", "b1", N, [N, N]),  # true positive
    ("B", "b2", S, [N, N]),  # false negative
    ("B", "b3", S, [S, N]),  # a tie: left out
    ("B", "b4", N, [N, C]),  # one decided label: not supported -> true positive
    ("C", "c1", S, [S, S]),  # true negative
    ("C", "c2", S, [S, S]),  # true negative
    ("C", "c3", S, [S, S]),  # true negative
    ("D", "d1", N, None),  # verified, never judged
    ("D", "d2", S, None),
    ("D", "d3", S, None),
]


def frames():
    verdicts = pd.DataFrame([(i, c, v) for i, c, v, _ in CLAIMS], columns=["item", "claim", "verdict"])
    judgements = pd.DataFrame(
        [
            (i, c, r, label)
            for i, c, _, labels in CLAIMS
            if labels
            for r, label in zip(["r1", "r2"], labels, strict=True)
        ],
        columns=["item", "claim", "rater", "label"],
    )
    return verdicts, judgements


def wilson(k, n, z=1.959963984540054):
    """Wilson's score interval, from its formula."""
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return centre - half, centre + half


def test_the_detector_against_people_worked_by_hand():
    verdicts, judgements = frames()
    result = detector_against_people(verdicts, judgements)
    assert result["confusion"] == {"tp": 3, "fp": 1, "fn": 1, "tn": 4}
    assert result["n_claims"] == 9 and result["n_undecided"] == 1 and result["n_summaries"] == 3
    assert result["precision"]["value"] == pytest.approx(3 / 4)
    assert result["recall"]["value"] == pytest.approx(3 / 4)
    assert result["negative_predictive_value"]["value"] == pytest.approx(4 / 5)
    assert (result["precision"]["low"], result["precision"]["high"]) == pytest.approx(wilson(3, 4))
    assert (result["negative_predictive_value"]["low"], result["negative_predictive_value"]["high"]) == pytest.approx(
        wilson(4, 5)
    )
    assert result["people_rate"]["value"] == pytest.approx(4 / 9)
    # Over all 13 verified claims, 5 called unsupported; adjusted by what people found.
    assert result["n_verified_claims"] == 13 and result["n_verified_summaries"] == 4
    assert result["reported_rate"]["value"] == pytest.approx(5 / 13)
    assert result["adjusted_rate"] == pytest.approx(5 / 13 * 0.75 + 8 / 13 * 0.2)
    # Unsupported calls per summary: A 2, B 2, C 0, D 1.
    assert result["reported_per_summary"] == pytest.approx(1.25)
    adjusted = [2 * 0.75 + 1 * 0.2, 2 * 0.75 + 2 * 0.2, 3 * 0.2, 1 * 0.75 + 2 * 0.2]
    assert result["adjusted_per_summary"] == pytest.approx(np.mean(adjusted))


def test_with_every_supported_call_right_the_adjustment_is_the_papers_rule():
    # The paper: "our best guess for the true hallucination rate is 2/3 of the reported rate".
    verdicts = pd.DataFrame(
        [("X", f"x{i}", N) for i in range(3)] + [("X", f"y{i}", S) for i in range(7)],
        columns=["item", "claim", "verdict"],
    )
    labels = [N, N, S] + [S] * 7
    judgements = pd.DataFrame(
        [("X", c, "r1", label) for (_, c, _), label in zip(verdicts.itertuples(index=False), labels, strict=True)],
        columns=["item", "claim", "rater", "label"],
    )
    result = detector_against_people(verdicts, judgements)
    assert result["negative_predictive_value"]["value"] == 1.0
    assert result["adjusted_rate"] == pytest.approx(result["reported_rate"]["value"] * 2 / 3)


def test_claim_level_agreement_matches_scikit_learn_and_krippendorff():
    _, judgements = frames()
    result = claim_agreement(judgements, (S, N, C))
    wide = judgements.pivot_table(index=["item", "claim"], columns="rater", values="label", aggfunc="first")
    assert result["n_claims"] == 10 and result["n_raters"] == 2
    (pair,) = result["cohen_kappa"]
    assert pair["kappa"] == pytest.approx(cohen_kappa_score(wide["r1"], wide["r2"]))
    codes = {S: 0, N: 1, C: 2}
    data = np.array([[codes[v] for v in wide[r]] for r in ("r1", "r2")], dtype=float)
    assert result["krippendorff_alpha_nominal"] == pytest.approx(
        krippendorff.alpha(reliability_data=data, level_of_measurement="nominal")
    )
    assert result["percent_agreement"] == pytest.approx(np.mean(wide["r1"] == wide["r2"]))


def test_people_labels_leave_ties_out_and_before_after_revision_compares_people_counts():
    _, judgements = frames()
    people, undecided = people_labels(judgements)
    assert undecided == 1 and "b3" not in set(people["claim"])
    pairs = pd.DataFrame([("A", "C"), ("B", "A"), ("A", "D")], columns=["draft", "revision"])
    # People's unsupported claims: A 1 (a1), B 3 (b1, b2, b4), C 0; D was not judged.
    result = before_after_revision(judgements, pairs)
    assert result == {
        "n_pairs": 2,
        "draft_mean": pytest.approx((1 + 3) / 2),
        "revision_mean": pytest.approx((0 + 1) / 2),
        "mean_change": pytest.approx(((0 - 1) + (1 - 3)) / 2),
        "fewer": 2,
        "more": 0,
    }


def test_the_detector_against_each_raters_own_calls_worked_by_hand():
    from stats.claims import detector_against_each_rater

    verdicts, judgements = frames()
    rows = {r["rater"]: r for r in detector_against_each_rater(verdicts, judgements)}
    # r1: a1 N/N tp, a2 N/S fp, a3 S/S tn, b1 tp, b2 S/N fn, b3 S/S tn, b4 N/N tp, c1-c3 tn.
    assert (rows["r1"]["precision"]["k"], rows["r1"]["precision"]["n"]) == (3, 4)
    assert (rows["r1"]["recall"]["k"], rows["r1"]["recall"]["n"]) == (3, 4)
    assert (rows["r1"]["negative_predictive_value"]["k"], rows["r1"]["negative_predictive_value"]["n"]) == (5, 6)
    # r2: a1 tp, a2 fp, a3 tn, b1 tp, b2 fn, b3 S/N fn, b4 cannot tell (left out), c1-c3 tn.
    assert rows["r2"]["n_claims"] == 9
    assert (rows["r2"]["precision"]["k"], rows["r2"]["precision"]["n"]) == (2, 3)
    assert (rows["r2"]["recall"]["k"], rows["r2"]["recall"]["n"]) == (2, 4)
    assert (rows["r2"]["negative_predictive_value"]["k"], rows["r2"]["negative_predictive_value"]["n"]) == (4, 6)


def test_a_rubric_judge_on_claims_worked_by_hand_and_its_kappa_from_scikit_learn():
    """The judge's own labels (it may answer "cannot tell") against people's majority, and its
    κ with each rater claim by claim beside the raters' with each other."""
    from stats.claims import judge_on_claims

    _, judgements = frames()
    judge = {"a1": N, "a2": S, "a3": S, "b1": N, "b2": S, "b3": S, "b4": C, "c1": S, "c2": S, "c3": S, "d1": N}
    labels = pd.DataFrame([(c[0].upper(), c, label) for c, label in judge.items()], columns=["item", "claim", "label"])
    result = judge_on_claims("judge", labels, judgements, (S, N, C))
    # People: a1 N, a2 S, a3 S, b1 N, b2 N, b3 tie (out), b4 N, c1-c3 S. The judge's "cannot
    # tell" on b4 is no call: a1 tp, b1 tp, b2 fn, a2 a3 c1 c2 c3 tn.
    assert result["confusion"] == {"tp": 2, "fp": 0, "fn": 1, "tn": 5}
    assert result["n_claims"] == 8 and result["n_judged"] == 11
    assert (result["precision"]["k"], result["precision"]["n"]) == (2, 2)
    assert (result["recall"]["k"], result["recall"]["n"]) == (2, 3)
    assert (result["negative_predictive_value"]["k"], result["negative_predictive_value"]["n"]) == (5, 6)

    people = {r: dict(zip(part["claim"], part["label"], strict=True)) for r, part in judgements.groupby("rater")}
    raters = {**people, "judge": judge}
    expected = {}
    for a, b in [("judge", "r1"), ("judge", "r2"), ("r1", "r2")]:
        common = sorted(set(raters[a]) & set(raters[b]))
        expected[(a, b)] = (
            len(common),
            cohen_kappa_score([raters[a][c] for c in common], [raters[b][c] for c in common]),
        )
    got = {(p["rater_a"], p["rater_b"]): (p["n"], p["kappa"], p["with_judge"]) for p in result["pairs"]}
    assert set(got) == set(expected)
    for pair, (n, kappa) in expected.items():
        assert got[pair][0] == n and got[pair][1] == pytest.approx(kappa) and got[pair][2] == ("judge" in pair)
    assert result["judge_mean_kappa"] == pytest.approx(
        (expected[("judge", "r1")][1] + expected[("judge", "r2")][1]) / 2
    )
    assert result["human_mean_kappa"] == pytest.approx(expected[("r1", "r2")][1])
