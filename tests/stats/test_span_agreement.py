"""Span agreement (marking per sentence, each sub-question on overlapping spans), checked
against hand counts."""

import pandas as pd
import pytest

from stats.spans import overlapping_pairs, sentence_frame, span_agreement

# One summary with three sentences: [0,10) [11,20) [21,30).
SENTENCES = {"s1": [(0, 10), (11, 20), (21, 30)]}
RATERS = {"s1": ["A", "B"]}


FACTUAL = {"factual": ("yes", "no")}


def spans(rows):
    """Rows of (item, rater, start, end, factual answer or None)."""
    return pd.DataFrame(
        [(item, rater, start, end, {} if f is None else {"factual": f}) for item, rater, start, end, f in rows],
        columns=["item", "rater", "start", "end", "answers"],
    )


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
    result = span_agreement(data, SENTENCES, RATERS, FACTUAL)
    assert result.n_sentences == 3
    # Percent agreement 2/3; Randolph with q = 2: (2/3 - 1/2) / (1 - 1/2) = 1/3.
    assert result.sentences["percent_agreement"] == pytest.approx(2 / 3)
    assert result.sentences["randolph_kappa"] == pytest.approx(1 / 3)
    # One overlapping pair (A's [12,15) with B's [13,18)), "yes" against "no".
    assert result.n_overlapping_pairs == 1
    (factual,) = result.sub_questions
    assert factual.key == "factual" and factual.n_pairs == 1
    assert factual.report["percent_agreement"] == pytest.approx(0.0)


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
    assert len(pairs) == 2
    values = sorted((p.answers_a["factual"], p.answers_b["factual"]) for p in pairs.itertuples())
    assert values == [("no", "no"), ("yes", "no")]  # [0,10) pairs with [2,9) (7 chars), not [0,3)


def test_no_spans_at_all_is_perfect_sentence_agreement_and_no_factual_pairs():
    result = span_agreement(spans([]), SENTENCES, RATERS, FACTUAL)
    assert result.sentences["percent_agreement"] == 1.0
    assert result.sub_questions[0].report is None and result.errors["factual"] == "no data"


def test_every_choice_sub_question_gets_its_agreement_whatever_its_name():
    # Two pairs of overlapping spans; severity: (major, major) and (minor, major); the
    # second pair's B span has no "note" answer, so note has no pair at all.
    data = pd.DataFrame(
        [
            ("s1", "A", 0, 9, {"severity": "major"}),
            ("s1", "B", 1, 8, {"severity": "major"}),
            ("s1", "A", 21, 30, {"severity": "minor"}),
            ("s1", "B", 22, 29, {"severity": "major"}),
        ],
        columns=["item", "rater", "start", "end", "answers"],
    )
    result = span_agreement(data, SENTENCES, RATERS, {"severity": ("minor", "major", "critical")})
    (severity,) = result.sub_questions
    assert severity.n_pairs == 2 and severity.error is None
    # One of two pairs agrees: 1/2. Randolph over q = 3 options: (1/2 - 1/3) / (2/3) = 1/4.
    assert severity.report["percent_agreement"] == pytest.approx(0.5)
    assert severity.report["randolph_kappa"] == pytest.approx(0.25)
