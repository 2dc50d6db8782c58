"""Agreement statistics against published values, hand computations and other libraries.

Golden values come from sources independent of stats.agreement: papers, software
manuals (SAS, R irr, R irrCAC), Wikipedia's worked tables, fractions worked by hand in
the comments, or a from-scratch computation written here. Never from our own output.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from fractions import Fraction
from itertools import permutations

import krippendorff
import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import cohen_kappa_score
from statsmodels.stats.inter_rater import aggregate_raters, cohens_kappa
from statsmodels.stats.inter_rater import fleiss_kappa as sm_fleiss_kappa

from stats.agreement import (
    AgreementInputError,
    agreement_report,
    bootstrap_ci,
    cohen_kappa,
    fleiss_kappa,
    gwet_ac1,
    krippendorff_alpha,
    pabak,
    percent_agreement,
    randolph_kappa,
)
from stats.frames import reliability_matrix, validate_ratings

# --- building tidy frames from the shapes the sources print ------------------------


def tidy_from_rows(rows: list[list[float | None]], *, raters_are_rows: bool) -> pd.DataFrame:
    """Tidy frame from a printed matrix; None means "not rated"."""
    matrix = np.array([[np.nan if v is None else v for v in row] for row in rows], dtype=float)
    if raters_are_rows:
        matrix = matrix.T  # now items × raters
    records = [
        {"item": i, "rater": f"r{j}", "value": matrix[i, j]}
        for i in range(matrix.shape[0])
        for j in range(matrix.shape[1])
    ]
    return pd.DataFrame.from_records(records)


def tidy_from_count_table(table: list[list[int]], scale: list[int]) -> pd.DataFrame:
    """Tidy frame from an items × categories count table (raters numbered within each item).

    Fleiss-type coefficients only see how many raters chose each category per item, so
    which rater label carries which rating does not matter for them.
    """
    records = []
    for item, counts in enumerate(table):
        ratings = [value for value, count in zip(scale, counts, strict=True) for _ in range(count)]
        records += [{"item": item, "rater": j, "value": v} for j, v in enumerate(ratings)]
    return pd.DataFrame.from_records(records)


def tidy_from_contingency(table: list[list[int]], scale: list[int]) -> pd.DataFrame:
    """Tidy frame for two raters from a contingency table (rows: rater A, columns: rater B)."""
    records = []
    item = 0
    for a, row in zip(scale, table, strict=True):
        for b, count in zip(scale, row, strict=True):
            for _ in range(count):
                records += [{"item": item, "rater": "A", "value": a}, {"item": item, "rater": "B", "value": b}]
                item += 1
    return pd.DataFrame.from_records(records)


# --- Krippendorff (2011) reliability data: 4 observers × 12 units, with missing values ---
# Krippendorff, K. (2011) "Computing Krippendorff's Alpha-Reliability", section C; the
# same data ship with Gwet's R package irrCAC as `cac.raw4raters` (units × raters).
KRIPP_4x12 = [
    [1, 2, 3, 3, 2, 1, 4, 1, 2, None, None, None],  # observer A
    [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, None, 3],  # observer B
    [None, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, None],  # observer C
    [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, None],  # observer D
]
SCALE_1_5 = [1, 2, 3, 4, 5]


@pytest.fixture
def kripp_frame() -> pd.DataFrame:
    return tidy_from_rows(KRIPP_4x12, raters_are_rows=True)


def alpha_from_scratch(rows: list[list[float | None]], level: str) -> float:
    """Krippendorff's alpha from the coincidence matrix, in exact fractions.

    o_ck = sum over units u of (number of c-k pairable value pairs in u) / (m_u - 1);
    alpha = 1 - (n - 1) * sum o_ck d_ck / sum n_c n_k d_ck (Krippendorff 2011, eq. for D_o, D_e).
    """
    units = [[r[u] for r in rows if r[u] is not None] for u in range(len(rows[0]))]
    o: Counter = Counter()
    for values in units:
        m = len(values)
        if m >= 2:
            for i, j in permutations(range(m), 2):
                o[(values[i], values[j])] += Fraction(1, m - 1)
    n_c: Counter = Counter()
    for (c, _k), v in o.items():
        n_c[c] += v
    n = sum(n_c.values())

    def delta2(c: float, k: float) -> Fraction:
        if level == "nominal":
            return Fraction(int(c != k))
        if level == "interval":
            return Fraction(c - k) ** 2
        lo, hi = min(c, k), max(c, k)  # ordinal: ranks from the value frequencies
        return (sum(n_c[g] for g in n_c if lo <= g <= hi) - (n_c[c] + n_c[k]) / 2) ** 2

    d_o = sum(v * delta2(c, k) for (c, k), v in o.items())
    d_e = sum(n_c[c] * n_c[k] * delta2(c, k) for c in n_c for k in n_c) / (n - 1)
    return float(1 - d_o / d_e)


@pytest.mark.parametrize(
    ("level", "published"),
    # Krippendorff (2011): nominal .743, ordinal .815, interval .849 for these data.
    [("nominal", 0.743), ("ordinal", 0.815), ("interval", 0.849)],
)
def test_krippendorff_alpha_matches_krippendorff_2011(kripp_frame, level, published):
    value = krippendorff_alpha(kripp_frame, SCALE_1_5, level=level)
    assert value == pytest.approx(published, abs=5e-4)
    assert value == pytest.approx(alpha_from_scratch(KRIPP_4x12, level), abs=1e-10)


def test_krippendorff_nominal_matches_irrcac_to_four_decimals(kripp_frame):
    # irrCAC README: krippen.alpha.raw(cac.raw4raters) -> coeff.val 0.74342.
    assert round(krippendorff_alpha(kripp_frame, SCALE_1_5, level="nominal"), 4) == 0.7434


# Wikipedia, "Krippendorff's alpha", section "A computational example": 3 coders × 15 units.
WIKI_KRIPP = [
    [None, None, None, None, None, 3, 4, 1, 2, 1, 1, 3, 3, None, 3],
    [1, None, 2, 1, 3, 3, 4, 3, None, None, None, None, None, None, None],
    [None, None, 2, 1, 3, 4, 4, None, 2, 1, 1, 3, 3, None, 4],
]


def test_krippendorff_wikipedia_example():
    frame = tidy_from_rows(WIKI_KRIPP, raters_are_rows=True)
    nominal = krippendorff_alpha(frame, [1, 2, 3, 4], level="nominal")
    interval = krippendorff_alpha(frame, [1, 2, 3, 4], level="interval")
    assert nominal == pytest.approx(0.691, abs=5e-4)  # Wikipedia: alpha_nominal = 0.691
    assert interval == pytest.approx(0.811, abs=5e-4)  # Wikipedia: alpha_interval = 0.811
    assert nominal == pytest.approx(alpha_from_scratch(WIKI_KRIPP, "nominal"), abs=1e-10)
    assert interval == pytest.approx(alpha_from_scratch(WIKI_KRIPP, "interval"), abs=1e-10)


def test_krippendorff_unused_scale_value_does_not_change_interval_alpha():
    # A value nobody used adds no coincidences, so alpha is the same with a wider domain.
    frame = tidy_from_rows(WIKI_KRIPP, raters_are_rows=True)
    wide = krippendorff_alpha(frame, [1, 2, 3, 4, 5, 6], level="ordinal")
    assert wide == pytest.approx(krippendorff_alpha(frame, [1, 2, 3, 4], level="ordinal"), abs=1e-12)


def test_reliability_matrix_is_raters_by_items(kripp_frame):
    data = reliability_matrix(validate_ratings(kripp_frame, SCALE_1_5))
    assert data.shape == (4, 12)


def test_swapping_item_and_rater_columns_changes_alpha(kripp_frame):
    # The orientation trap: treating observers as units (a transposed matrix) gives a
    # different number without any error. Our API names the columns, so the only way to
    # get it wrong is to mislabel them; this shows the mislabelling is not harmless.
    swapped = kripp_frame.rename(columns={"item": "rater", "rater": "item"})
    right = krippendorff_alpha(kripp_frame, SCALE_1_5, level="nominal")
    wrong = krippendorff_alpha(swapped, SCALE_1_5, level="nominal")
    assert wrong != pytest.approx(right, abs=1e-3)
    # ... and the swapped result is exactly what the package gives on the transposed matrix.
    transposed = np.array([[np.nan if v is None else v for v in row] for row in KRIPP_4x12]).T
    package_transposed = krippendorff.alpha(transposed, value_domain=SCALE_1_5, level_of_measurement="nominal")
    assert wrong == pytest.approx(package_transposed, abs=1e-12)


# --- Gwet's irrCAC README (kgwet/irrCAC), raw ratings cac.raw4raters = the data above ---


def test_percent_agreement_matches_irrcac(kripp_frame):
    # pa.coeff.raw(cac.raw4raters): 0.8181818. By hand: 11 units have >= 2 ratings;
    # units 2 (2,2,3,2) and 8 (1,1,2,1) agree on 3 of 6 pairs, unit 6 (1,2,3,4) on 0 of 6,
    # the other 8 units fully: (8 + 0.5 + 0.5 + 0) / 11 = 9/11.
    assert percent_agreement(kripp_frame, SCALE_1_5) == pytest.approx(9 / 11, abs=1e-12)


def test_gwet_ac1_matches_irrcac_with_missing_ratings(kripp_frame):
    # gwet.ac1.raw(cac.raw4raters): pa 0.8181818, pe 0.1903212, AC1 0.77544.
    assert round(gwet_ac1(kripp_frame, SCALE_1_5), 4) == 0.7754


def test_pabak_multirater_matches_irrcac_brennan_prediger(kripp_frame):
    # bp.coeff.raw(cac.raw4raters): 0.77273 = (9/11 - 1/5) / (1 - 1/5).
    assert round(pabak(kripp_frame, SCALE_1_5), 4) == 0.7727


def test_fleiss_and_randolph_use_modal_items_and_full_scale(kripp_frame):
    # Units with the modal number of ratings (4) are units 2..9. By hand:
    #   per-unit P_i = (sum_k n_ik^2 - 4) / 12: 0.5, 1, 1, 1, 0, 1, 0.5, 1 -> P = 6/8 = 0.75
    #   category totals over 32 ratings: 1:4, 2:13, 3:10, 4:5, 5:0
    #   Pe = (16 + 169 + 100 + 25) / 1024 = 310/1024; Fleiss = (0.75 - Pe) / (1 - Pe)
    #   Randolph = (0.75 - 1/5) / (1 - 1/5) = 0.6875 over the full 5-point scale.
    # Category 5 is unused in this subset, so a table over observed categories (q = 4)
    # would give (0.75 - 1/4) / (3/4) = 0.6667 instead.
    p_bar, p_e = Fraction(3, 4), Fraction(310, 1024)
    fleiss = fleiss_kappa(kripp_frame, SCALE_1_5)
    assert fleiss.n_items == 8
    assert fleiss.ratings_per_item == 4
    assert fleiss.value == pytest.approx(float((p_bar - p_e) / (1 - p_e)), abs=1e-12)
    randolph = randolph_kappa(kripp_frame, SCALE_1_5)
    assert randolph.n_items == 8
    assert round(randolph.value, 4) == 0.6875
    assert round(randolph.value, 4) != round(2 / 3, 4)


# irrCAC README, distrib.6raters: 15 subjects, 6 raters, 5 categories (a count table).
DISTRIB_6RATERS = [
    [0, 0, 0, 6, 0],
    [0, 3, 0, 0, 3],
    [0, 1, 4, 0, 1],
    [0, 0, 0, 0, 6],
    [0, 3, 0, 3, 0],
    [2, 0, 4, 0, 0],
    [0, 0, 4, 0, 2],
    [2, 0, 3, 1, 0],
    [2, 0, 0, 4, 0],
    [0, 0, 0, 0, 6],
    [1, 0, 0, 5, 0],
    [1, 1, 0, 4, 0],
    [0, 3, 3, 0, 0],
    [1, 0, 0, 5, 0],
    [0, 2, 0, 3, 1],
]


def test_multirater_coefficients_match_irrcac_distrib_6raters():
    frame = tidy_from_count_table(DISTRIB_6RATERS, SCALE_1_5)
    # gwet.ac1.dist: 0.4448007 (pa 0.5511111); fleiss.kappa.dist: 0.4139265;
    # bp.coeff.dist: 0.4388889 (Brennan-Prediger = Randolph = our multi-rater PABAK here,
    # since every subject has 6 ratings).
    assert round(percent_agreement(frame, SCALE_1_5), 4) == 0.5511
    assert round(gwet_ac1(frame, SCALE_1_5), 4) == 0.4448
    assert round(fleiss_kappa(frame, SCALE_1_5).value, 4) == 0.4139
    assert round(randolph_kappa(frame, SCALE_1_5).value, 4) == 0.4389
    assert round(pabak(frame, SCALE_1_5), 4) == 0.4389


# --- Fleiss' kappa ---------------------------------------------------------------------

# Wikipedia, "Fleiss' kappa", worked example: 10 subjects × 14 raters × 5 categories.
WIKI_FLEISS = [
    [0, 0, 0, 0, 14],
    [0, 2, 6, 4, 2],
    [0, 0, 3, 5, 6],
    [0, 3, 9, 2, 0],
    [2, 2, 8, 1, 1],
    [7, 7, 0, 0, 0],
    [3, 2, 6, 3, 0],
    [2, 5, 3, 2, 2],
    [6, 5, 2, 1, 0],
    [0, 2, 2, 3, 7],
]
# By hand: P_i = (sum_j n_ij^2 - 14) / (14 * 13). The sums of squares are
# 196, 60, 70, 94, 74, 98, 58, 46, 66, 66, so sum_i P_i = 688/182 and P = 688/1820 (0.378).
# Column totals 20, 28, 39, 21, 32 of 140 ratings: Pe = 4170/19600 (0.213).
WIKI_P_BAR = Fraction(688, 1820)
WIKI_PE = Fraction(20**2 + 28**2 + 39**2 + 21**2 + 32**2, 140**2)


def test_fleiss_kappa_wikipedia_table():
    frame = tidy_from_count_table(WIKI_FLEISS, SCALE_1_5)
    result = fleiss_kappa(frame, SCALE_1_5)
    hand = float((WIKI_P_BAR - WIKI_PE) / (1 - WIKI_PE))
    assert result.value == pytest.approx(0.210, abs=5e-4)  # Wikipedia's printed value
    assert round(result.value, 4) == round(hand, 4) == 0.2099
    assert (result.n_items, result.ratings_per_item) == (10, 14)


def test_randolph_kappa_wikipedia_table_by_hand():
    # Randolph (2005): kappa_free = (P - 1/q) / (1 - 1/q) = (688/1820 - 1/5) / (4/5).
    frame = tidy_from_count_table(WIKI_FLEISS, SCALE_1_5)
    hand = float((WIKI_P_BAR - Fraction(1, 5)) / Fraction(4, 5))
    assert round(randolph_kappa(frame, SCALE_1_5).value, 4) == round(hand, 4) == 0.2225


def test_gwet_ac1_wikipedia_table_by_hand():
    # Gwet (2008): pe = 1/(q-1) * sum_k pi_k (1 - pi_k) = (1 - sum_k pi_k^2) / 4 = (1 - Pe_fleiss) / 4
    # (every subject has 14 ratings, so pi_k are the column shares).
    frame = tidy_from_count_table(WIKI_FLEISS, SCALE_1_5)
    pe = (1 - WIKI_PE) / 4
    hand = float((WIKI_P_BAR - pe) / (1 - pe))
    assert round(gwet_ac1(frame, SCALE_1_5), 4) == round(hand, 4) == 0.2256


# Fleiss (1971): 30 patients × 6 psychiatrists × 5 diagnoses (as in R irr's `diagnoses`).
FLEISS_1971 = [
    [4, 4, 4, 4, 4, 4], [2, 2, 2, 5, 5, 5], [2, 3, 3, 3, 3, 5], [5, 5, 5, 5, 5, 5],
    [2, 2, 2, 4, 4, 4], [1, 1, 3, 3, 3, 3], [3, 3, 3, 3, 5, 5], [1, 1, 3, 3, 3, 4],
    [1, 1, 4, 4, 4, 4], [5, 5, 5, 5, 5, 5], [1, 4, 4, 4, 4, 4], [1, 2, 4, 4, 4, 4],
    [2, 2, 2, 3, 3, 3], [1, 4, 4, 4, 4, 4], [2, 2, 4, 4, 4, 5], [3, 3, 3, 3, 3, 5],
    [1, 1, 1, 4, 5, 5], [1, 1, 1, 1, 1, 2], [2, 2, 4, 4, 4, 4], [1, 3, 3, 5, 5, 5],
    [5, 5, 5, 5, 5, 5], [2, 4, 4, 4, 4, 4], [2, 2, 4, 5, 5, 5], [1, 1, 4, 4, 4, 4],
    [1, 4, 4, 4, 4, 5], [2, 2, 2, 2, 2, 4], [1, 1, 1, 1, 5, 5], [2, 2, 4, 4, 4, 4],
    [1, 3, 3, 3, 3, 3], [5, 5, 5, 5, 5, 5],
]  # fmt: skip


def test_fleiss_kappa_fleiss_1971():
    # Fleiss (1971) reports kappa = .430; R irr kappam.fleiss(diagnoses) gives 0.4302445.
    frame = tidy_from_rows(FLEISS_1971, raters_are_rows=False)
    assert round(fleiss_kappa(frame, SCALE_1_5).value, 4) == 0.4302


# --- Randolph's kappa with an unused category (hand computation) -------------------------


def test_randolph_kappa_counts_unused_categories():
    # 4 items × 3 raters on a 1-4 scale where nobody used 4.
    #   item 1: 1,1,1 -> P = 1;  item 2: 1,1,2 -> P = 2/6 = 1/3
    #   item 3: 2,2,3 -> 1/3;    item 4: 3,3,3 -> 1.      mean P = (8/3)/4 = 2/3
    # Full scale (q = 4): (2/3 - 1/4) / (3/4) = 5/9 = 0.5556.
    # Observed categories only (q = 3): (2/3 - 1/3) / (2/3) = 1/2, which is wrong.
    rows = [[1, 1, 1], [1, 1, 2], [2, 2, 3], [3, 3, 3]]
    frame = tidy_from_rows(rows, raters_are_rows=False)
    assert randolph_kappa(frame, [1, 2, 3, 4]).value == pytest.approx(5 / 9, abs=1e-12)
    # The trap, reproduced with the library directly: aggregate_raters without n_cat.
    observed_only, _ = aggregate_raters(np.array(rows))
    assert sm_fleiss_kappa(observed_only, method="randolph") == pytest.approx(0.5, abs=1e-12)


# --- Cohen's kappa -------------------------------------------------------------------------

# SAS PROC FREQ agreement example (3×3; as reproduced in statsmodels' test suite):
# simple kappa 0.4842, weighted kappa with Cicchetti-Allison (= linear) weights 0.4701.
SAS_TABLE = [[0, 4, 1], [0, 8, 0], [0, 1, 5]]


def test_cohen_kappa_sas_table():
    frame = tidy_from_contingency(SAS_TABLE, [1, 2, 3])
    (pair,) = cohen_kappa(frame, [1, 2, 3])
    assert (pair.rater_a, pair.rater_b, pair.n) == ("A", "B", 19)
    assert round(pair.unweighted, 4) == 0.4842
    assert round(pair.linear, 4) == 0.4701
    # No published quadratic value for this table: cross-check with statsmodels instead.
    table = np.array(SAS_TABLE)
    assert pair.quadratic == pytest.approx(cohens_kappa(table, wt="quadratic").kappa, abs=1e-10)
    assert pair.linear == pytest.approx(cohens_kappa(table, wt="linear").kappa, abs=1e-10)


# SAS/STAT User's Guide, PROC FREQ "Getting Started" agreement example: two dermatologists
# rate 88 patients (terrible, poor, marginal, clear); simple kappa 0.3449.
SAS_DERMATOLOGISTS = [[10, 4, 1, 0], [5, 10, 12, 2], [2, 4, 12, 5], [0, 2, 6, 13]]


def test_cohen_kappa_sas_dermatologists():
    frame = tidy_from_contingency(SAS_DERMATOLOGISTS, [1, 2, 3, 4])
    (pair,) = cohen_kappa(frame, [1, 2, 3, 4])
    assert pair.n == 88
    assert round(pair.unweighted, 4) == 0.3449
    table = np.array(SAS_DERMATOLOGISTS)
    for name in ("linear", "quadratic"):
        assert getattr(pair, name) == pytest.approx(cohens_kappa(table, wt=name).kappa, abs=1e-10)


# irrCAC README, cont3x3abstractors (2 abstractors × 100 records, 3 categories).
ABSTRACTORS = [[13, 0, 0], [0, 20, 7], [0, 4, 56]]


def test_two_rater_coefficients_match_irrcac_abstractors():
    frame = tidy_from_contingency(ABSTRACTORS, [1, 2, 3])
    # kappa2.table 0.7964094; pa2.table 0.89; bp2.table 0.835; krippen2.table 0.7972585;
    # gwet.ac1.table 0.8493305. AC1 by hand: pi = (13+13, 27+24, 60+63) / 200
    # = (0.13, 0.255, 0.615); pe = (0.1131 + 0.189975 + 0.236775) / 2 = 0.269925;
    # AC1 = (0.89 - 0.269925) / (1 - 0.269925) = 0.84933.
    # PABAK = (3 * 0.89 - 1) / (3 - 1) = 0.835.
    (pair,) = cohen_kappa(frame, [1, 2, 3])
    assert round(pair.unweighted, 4) == 0.7964
    assert percent_agreement(frame, [1, 2, 3]) == pytest.approx(0.89, abs=1e-12)
    assert pabak(frame, [1, 2, 3]) == pytest.approx(0.835, abs=1e-12)
    assert round(krippendorff_alpha(frame, [1, 2, 3], level="nominal"), 4) == 0.7973
    assert round(gwet_ac1(frame, [1, 2, 3]), 4) == 0.8493


# R irr's `anxiety` data (as in statsmodels' test suite), raters 2 and 3 on a 1-6 scale;
# neither used 5. R irr kappa2 drops unused levels: unweighted -0.006289308,
# "equal" (linear) 0.1459075, "squared" (quadratic) 0.2520325.
ANXIETY_R2 = [3, 6, 4, 6, 2, 4, 2, 4, 3, 3, 2, 3, 3, 3, 2, 2, 1, 3, 3, 4]
ANXIETY_R3 = [2, 1, 4, 4, 3, 2, 1, 6, 1, 1, 1, 2, 3, 3, 1, 1, 3, 3, 2, 2]


@pytest.fixture
def anxiety_frame() -> pd.DataFrame:
    return tidy_from_rows([ANXIETY_R2, ANXIETY_R3], raters_are_rows=True)


def test_weighted_kappa_observed_levels_reproduce_r_irr(anxiety_frame):
    # Declaring only the observed levels as the scale reproduces irr's numbers ...
    (pair,) = cohen_kappa(anxiety_frame, [1, 2, 3, 4, 6])
    assert round(pair.unweighted, 4) == round(-0.006289308, 4)
    assert round(pair.linear, 4) == round(0.1459075, 4)
    assert round(pair.quadratic, 4) == round(0.2520325, 4)
    # ... which is also what sklearn does when labels are left out: the trap.
    no_labels = cohen_kappa_score(ANXIETY_R2, ANXIETY_R3, weights="linear")
    assert round(no_labels, 4) == round(0.1459075, 4)


def test_weighted_kappa_full_scale_counts_the_unused_category(anxiety_frame):
    (pair,) = cohen_kappa(anxiety_frame, [1, 2, 3, 4, 5, 6])
    # Unweighted kappa ignores category distances, so it does not move.
    assert round(pair.unweighted, 4) == round(-0.006289308, 4)
    # Weighted kappa does: with 5 on the scale, 6 is two steps from 4, not one.
    assert round(pair.linear, 4) != round(0.1459075, 4)
    assert round(pair.quadratic, 4) != round(0.2520325, 4)
    full = np.zeros((6, 6))
    for a, b in zip(ANXIETY_R2, ANXIETY_R3, strict=True):
        full[a - 1, b - 1] += 1
    assert pair.linear == pytest.approx(cohens_kappa(full, wt="linear").kappa, abs=1e-10)
    assert pair.quadratic == pytest.approx(cohens_kappa(full, wt="quadratic").kappa, abs=1e-10)


def test_cohen_kappa_uses_only_items_both_raters_rated():
    frame = pd.DataFrame(
        {
            "item": [1, 1, 2, 2, 3, 3, 4],
            "rater": ["a", "b", "a", "b", "a", "b", "a"],
            "value": [1, 1, 2, 2, 1, np.nan, 2],
        }
    )
    (pair,) = cohen_kappa(frame, [1, 2])
    # Items 1 and 2 only: perfect agreement on two categories.
    assert pair.n == 2
    assert pair.unweighted == pytest.approx(1.0)


# --- input validation ------------------------------------------------------------------------


def test_agreement_input_error_is_a_value_error():
    assert issubclass(AgreementInputError, ValueError)


@pytest.mark.parametrize(
    ("frame", "message"),
    [
        (pd.DataFrame({"item": [1, 2], "rater": ["a", "a"], "value": [1, 2]}), "at least 2 raters"),
        (pd.DataFrame({"item": [1, 1], "rater": ["a", "b"], "value": [1, 7]}), "outside the scale"),
        (pd.DataFrame({"item": [1, 1], "rater": ["a", "b"], "value": [1, "3"]}), "non-numeric"),
        (pd.DataFrame({"item": [1, 1], "rater": ["a", "b"], "value": [True, False]}), "booleans"),
        (pd.DataFrame({"item": [1, 1], "rater": ["a", "a"], "value": [1, 2]}), "same \\(item, rater\\)"),
        (pd.DataFrame({"item": [1, 1], "rater": ["a", "b"]}), "lacks column"),
        (
            pd.DataFrame({"item": [1, 1], "rater": ["a", "b"], "value": [1, 2], "question": ["q1", "q2"]}),
            "several questions",
        ),
    ],
)
def test_invalid_frames_are_refused(frame, message):
    with pytest.raises(AgreementInputError, match=message):
        agreement_report(frame, [1, 2, 3])


def test_one_rater_with_only_missing_ratings_does_not_count_as_a_rater():
    frame = pd.DataFrame({"item": [1, 1], "rater": ["a", "b"], "value": [1, np.nan]})
    with pytest.raises(AgreementInputError, match="at least 2 raters"):
        percent_agreement(frame, [1, 2])


@pytest.mark.parametrize("scale", [[1], [3, 2, 1], [1, 1, 2], ["a", "b"], [1, float("inf")]])
def test_invalid_scales_are_refused(scale):
    frame = pd.DataFrame({"item": [1, 1], "rater": ["a", "b"], "value": [1, 1]})
    with pytest.raises(AgreementInputError):
        percent_agreement(frame, scale)


# --- the report --------------------------------------------------------------------------------


def test_report_json_shape(kripp_frame):
    report = agreement_report(kripp_frame, SCALE_1_5).to_json_dict()
    assert list(report) == [
        "n_items",
        "n_items_shared",
        "n_raters",
        "percent_agreement",
        "fleiss_kappa",
        "randolph_kappa",
        "gwet_ac1",
        "pabak",
        "krippendorff_alpha",
        "cohen_kappa",
    ]
    assert (report["n_items"], report["n_raters"]) == (12, 4)
    # Krippendorff (2011): unit 12 has one value, so 11 units are pairable (rated by >= 2).
    assert report["n_items_shared"] == 11
    assert list(report["krippendorff_alpha"]) == ["nominal", "ordinal", "interval"]
    assert len(report["cohen_kappa"]) == 6  # C(4, 2) rater pairs
    assert set(report["cohen_kappa"][0]) == {"rater_a", "rater_b", "n", "unweighted", "linear", "quadratic"}
    assert round(report["krippendorff_alpha"]["nominal"], 4) == 0.7434
    assert round(report["gwet_ac1"], 4) == 0.7754
    json.dumps(report, allow_nan=False)


def test_report_uses_none_where_undefined():
    # Everyone rates everything 3: chance agreement is total, so the kappas and alpha are
    # undefined, while raw agreement is 1.
    frame = pd.DataFrame({"item": [1, 1, 2, 2], "rater": ["a", "b", "a", "b"], "value": [3, 3, 3, 3]})
    report = agreement_report(frame, SCALE_1_5).to_json_dict()
    assert report["percent_agreement"] == 1.0
    assert report["fleiss_kappa"] is None
    assert report["krippendorff_alpha"] == {"nominal": None, "ordinal": None, "interval": None}
    assert report["cohen_kappa"][0]["unweighted"] is None
    # Free-marginal coefficients stay defined: chance is 1/q, not the observed marginals.
    assert report["randolph_kappa"] == pytest.approx(1.0)
    assert report["pabak"] == pytest.approx(1.0)
    json.dumps(report, allow_nan=False)


# --- bootstrap -----------------------------------------------------------------------------------


def test_bootstrap_is_reproducible_with_a_seed(kripp_frame):
    def statistic(f: pd.DataFrame) -> float:
        return krippendorff_alpha(f, SCALE_1_5, level="ordinal")

    first = bootstrap_ci(kripp_frame, statistic, n_resamples=200, seed=7)
    again = bootstrap_ci(kripp_frame, statistic, n_resamples=200, seed=7)
    other = bootstrap_ci(kripp_frame, statistic, n_resamples=200, seed=8)
    assert first == again
    assert (first.low, first.high) != (other.low, other.high)
    assert first.low <= first.estimate <= first.high
    assert first.estimate == pytest.approx(0.815, abs=5e-4)


def test_bootstrap_resamples_whole_items_as_distinct_items(kripp_frame):
    n_items = kripp_frame["item"].nunique()
    rows_per_item = kripp_frame.groupby("item").size().to_dict()

    def n_distinct_items(f: pd.DataFrame) -> float:
        assert f.groupby("item").size().isin(list(rows_per_item.values())).all()
        return float(f["item"].nunique())

    result = bootstrap_ci(kripp_frame, n_distinct_items, n_resamples=50, seed=1)
    assert result.low == result.high == n_items
    assert result.n_undefined == 0


def test_bootstrap_counts_undefined_resamples():
    # Only item 0 has two ratings; a resample that misses it has no pairable item and an
    # undefined percent agreement. P(miss) = (1 - 1/10)^10 ~ 0.35 per resample.
    records = [{"item": 0, "rater": "a", "value": 1}, {"item": 0, "rater": "b", "value": 1}]
    records += [{"item": i, "rater": "a" if i % 2 else "b", "value": 2} for i in range(1, 10)]
    frame = pd.DataFrame.from_records(records)
    result = bootstrap_ci(frame, lambda f: percent_agreement(f, [1, 2]), n_resamples=300, seed=3)
    assert 50 < result.n_undefined < 180
    assert result.low == result.high == 1.0
    assert result.n_resamples == 300


def test_bootstrap_all_undefined_gives_nan():
    frame = pd.DataFrame({"item": [1, 2], "rater": ["a", "b"], "value": [1, 2]})
    result = bootstrap_ci(frame, lambda f: percent_agreement(f, [1, 2]), n_resamples=20, seed=0)
    assert math.isnan(result.estimate)
    assert math.isnan(result.low) and math.isnan(result.high)
    assert result.n_undefined == 20
