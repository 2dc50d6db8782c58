"""Answer-vs-gold scores: the libraries' own results, citations removed, parts split."""

import pytest
from rouge_score import rouge_scorer
from sacrebleu.metrics import BLEU, CHRF

from stats.answer_metrics import answer_scores, scores_by_part, split_answer, without_citations

GOLD = "Early anticoagulation did not increase bleeding after stroke."


def test_identical_text_scores_the_maximum():
    scores = answer_scores(GOLD, GOLD)
    assert scores.rougeL == pytest.approx(1.0) and scores.bleu == pytest.approx(100.0)
    assert scores.chrf == pytest.approx(100.0)


def test_scores_are_the_libraries_own_on_the_answer_without_citations():
    answer = "Early anticoagulation did not raise bleeding [1]. It was safe [2, 3]."
    plain = "Early anticoagulation did not raise bleeding. It was safe."
    assert without_citations(answer) == plain
    scores = answer_scores(answer, GOLD)
    rouge = rouge_scorer.RougeScorer(["rougeL"], use_stemmer=True).score(GOLD, plain)["rougeL"].fmeasure
    assert scores.rougeL == pytest.approx(rouge)
    assert scores.bleu == pytest.approx(BLEU(effective_order=True).sentence_score(plain, [GOLD]).score)
    assert scores.chrf == pytest.approx(CHRF().sentence_score(plain, [GOLD]).score)
    assert 0 < scores.bleu < 100 and 0 < scores.rougeL < 1


def test_no_gold_answer_means_no_score_and_parts_are_split():
    assert answer_scores("anything", "  ") is None
    text = "Two trials found no harm [1][2].\n\nTL;DR: Early anticoagulation is safe [1]."
    assert split_answer(text) == ("Two trials found no harm [1][2].", "Early anticoagulation is safe [1].")
    parts = scores_by_part(text, GOLD)
    assert set(parts) == {"tldr", "synthesis", "combined"}
    assert parts["tldr"] == answer_scores("Early anticoagulation is safe.", GOLD)
    assert scores_by_part("No TL;DR here", GOLD)["tldr"] is None
