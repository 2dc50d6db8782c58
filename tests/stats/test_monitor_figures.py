"""stats.monitor on edge cases, worked by hand (the full batch is in
tests/annotate/test_monitor.py)."""

from stats.monitor import AnswerRow, GoldRow, ItemRow, batch_figures, leave_one_out_agreement, straight_lining


def test_no_items_yet_gives_no_medians_and_zeros():
    figures = batch_figures(items=[], answers=[], gold=[], raters=["ra", "rb"])
    assert figures.median_seconds is None and figures.fast_limit is None
    assert [(f.rater, f.items, f.median_seconds, f.too_fast, f.agreement, f.gold_accuracy) for f in figures.raters] == [
        ("ra", 0, None, 0, None, None),
        ("rb", 0, None, 0, None, None),
    ]


def test_straight_lining_counts_from_two_answers_and_takes_the_highest_question():
    """ra: q1 answers 2, 2, 5 -> 2/3; q2 answers 4, 4 -> 2/2 = 1.0 (the highest);
    rb: one answer only -> not counted. A non-scale question never counts."""
    rows = [
        AnswerRow("ra", "i1", "q1", 2, True),
        AnswerRow("ra", "i2", "q1", 2, True),
        AnswerRow("ra", "i3", "q1", 5, True),
        AnswerRow("ra", "i1", "q2", 4, True),
        AnswerRow("ra", "i2", "q2", 4, True),
        AnswerRow("ra", "i1", "c", "x", False),
        AnswerRow("ra", "i2", "c", "x", False),
        AnswerRow("ra", "i3", "c", "x", False),
        AnswerRow("rb", "i1", "q1", 3, True),
    ]
    assert straight_lining(rows) == {"ra": (1.0, "q2")}
    assert straight_lining(rows, min_answers=3) == {"ra": (2 / 3, "q1")}


def test_agreement_pairs_each_answer_with_every_other_raters_answer():
    """One item, one question, answers A, A, B: ra pairs with rb (match) and rc (no) ->
    1 of 2; rb likewise 1 of 2; rc 0 of 2. A rater alone on an item has no pair."""
    rows = [
        AnswerRow("ra", "i1", "q", "A", False),
        AnswerRow("rb", "i1", "q", "A", False),
        AnswerRow("rc", "i1", "q", "B", False),
        AnswerRow("ra", "i2", "q", "A", False),
    ]
    assert leave_one_out_agreement(rows) == {"ra": (2, 1), "rb": (2, 1), "rc": (2, 0)}


def test_too_fast_is_strictly_under_the_fraction_of_the_batch_median():
    """Times 10, 20, 30, 40: median 25; fraction 0.4 -> limit 10: 10 s is not under it."""
    items = [ItemRow("ra", "i1", 10), ItemRow("ra", "i2", 20), ItemRow("rb", "i1", 30), ItemRow("rb", "i2", 40)]
    figures = batch_figures(items=items, answers=[], gold=[GoldRow("rb", True)], fast_fraction=0.4)
    assert figures.median_seconds == 25 and figures.fast_limit == 10
    assert [(f.rater, f.too_fast, f.median_seconds, f.gold_accuracy) for f in figures.raters] == [
        ("ra", 0, 15.0, None),
        ("rb", 0, 35.0, 1.0),
    ]
