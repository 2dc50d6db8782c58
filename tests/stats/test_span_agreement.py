"""FactPICO-style span agreement, checked against hand counts."""

import pandas as pd
import pytest

from stats.spans import overlapping_pairs, sentence_frame, span_agreement

# One summary with three sentences: [0,10) [11,20) [21,30).
SENTENCES = {"s1": [(0, 10), (11, 20), (21, 30)]}
RATERS = {"s1": ["A", "B"]}


def spans(rows):
    return pd.DataFrame(rows, columns=["item", "rater", "start", "end", "factual"])


def test_sentence_marks_include_raters_who_marked_nothing():
    frame = sentence_frame(spans([("s1", "A", 2, 5, "no"), ("s1", "A", 12, 25, "yes")]), SENTENCES, RATERS)
    marks = {(r.item, r.rater): r.value for r in frame.itertuples()}
    assert marks == {
        ("s1#0", "A"): 1,
        ("s1#1", "A"): 1,
        ("s1#2", "A"): 1,
        ("s1#0", "B"): 0,
        ("s1#1", "B"): 0,
        ("s1#2", "B"): 0,
    }


def test_sentence_level_agreement_by_hand():
    # A marks sentences 0 and 1, B marks sentence 1 only: agree on 1 and 2, disagree on 0.
    data = spans([("s1", "A", 0, 4, "no"), ("s1", "A", 12, 15, "yes"), ("s1", "B", 13, 18, "no")])
    result = span_agreement(data, SENTENCES, RATERS)
    assert result.n_sentences == 3
    # Percent agreement 2/3; Randolph with q = 2: (2/3 - 1/2) / (1 - 1/2) = 1/3.
    assert result.sentences["percent_agreement"] == pytest.approx(2 / 3)
    assert result.sentences["randolph_kappa"] == pytest.approx(1 / 3)
    # One overlapping pair (A's [12,15) with B's [13,18)), "yes" against "no".
    assert result.n_overlapping_pairs == 1
    assert result.factual["percent_agreement"] == pytest.approx(0.0)


def test_each_span_pairs_with_the_other_raters_most_overlapping_span_once():
    data = spans(
        [
            ("s1", "A", 0, 10, "yes"),
            ("s1", "B", 0, 3, "yes"),
            ("s1", "B", 2, 9, "no"),
            ("s1", "A", 21, 30, "no"),
            ("s1", "B", 22, 29, "no"),
        ]
    )
    pairs = overlapping_pairs(data)
    assert len(pairs) // 2 == 2
    values = sorted(tuple(g.sort_values("rater")["value"]) for _, g in pairs.groupby("item"))
    assert values == [(0.0, 0.0), (1.0, 0.0)]  # [0,10) pairs with [2,9) (7 chars), not [0,3)


def test_no_spans_at_all_is_perfect_sentence_agreement_and_no_factual_pairs():
    result = span_agreement(spans([]), SENTENCES, RATERS)
    assert result.sentences["percent_agreement"] == 1.0
    assert result.factual is None and result.errors["factual"] == "no data"
