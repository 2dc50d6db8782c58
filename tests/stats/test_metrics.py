"""Automatic metrics per summary, against hand computations."""

from __future__ import annotations

import math

import pandas as pd
import pytest
import textstat

from stats.metrics import metrics_frame, text_metrics, verification_metrics


def test_rouge_is_stemmed_f1_of_summary_against_source():
    # Porter stems: summary "the cat run quickli", source "the cat are run fast".
    # ROUGE-1: 3 shared unigrams (the, cat, run): P = 3/4, R = 3/5, F1 = 2PR/(P+R) = 2/3.
    # ROUGE-2: summary bigrams (the cat, cat run, run quickli), source bigrams (the cat,
    #   cat are, are run, run fast); 1 shared: P = 1/3, R = 1/4, F1 = 2/7.
    # ROUGE-L: longest common subsequence "the cat run" = 3: same as ROUGE-1 here, 2/3.
    # Without stemming only "the" would match (cats/cat, runs/running differ).
    result = text_metrics("the cat runs quickly", "the cats are running fast")
    assert result.rouge1 == pytest.approx(2 / 3)
    assert result.rouge2 == pytest.approx(2 / 7)
    assert result.rougeL == pytest.approx(2 / 3)


def test_rouge_l_differs_from_rouge_1_when_order_differs():
    # Summary "b a", source "a b": both unigrams shared (ROUGE-1 = 1), LCS length 1 (ROUGE-L = 1/2).
    result = text_metrics("bread apples", "apples bread")
    assert result.rouge1 == pytest.approx(1.0)
    assert result.rougeL == pytest.approx(0.5)
    assert result.rouge2 == 0.0


def test_flesch_kincaid_grade_by_hand_and_its_change():
    # Every word has one syllable (textstat's pyphen counts agree, checked below), so the
    # grade is 0.39 * words/sentences + 11.8 * 1 - 15.59:
    #   summary: 14 words, 2 sentences -> 0.39 * 7 + 11.8 - 15.59 = -1.06
    #   source:  15 words, 1 sentence  -> 0.39 * 15 + 11.8 - 15.59 = 2.06
    # textstat's own rounded function would give -1.2 for the summary (floor(x - 0.5) on
    # a negative number); we report the unrounded grade.
    summary = "The cat sat on the mat. The dog ran to the big red ball."
    source = "The cat sat on the mat and the dog ran to the big red ball."
    assert textstat.syllable_count(summary) == 14 and textstat.syllable_count(source) == 15
    result = text_metrics(summary, source)
    assert result.fk_grade_summary == pytest.approx(-1.06)
    assert result.fk_grade_source == pytest.approx(2.06)
    # FactPICO's ΔFK (Table 3, "ΔFK ↑", GPT-4 +2.87): the abstract's grade minus the summary's,
    # so this summary, simpler than its source, is +3.12 (higher is simpler).
    assert result.delta_fk == pytest.approx(2.06 - (-1.06)) and result.delta_fk > 0
    assert result.n_words == 14
    assert textstat.flesch_kincaid_grade(summary) == -1.2  # the module's rounding is left alone


def test_empty_summary_has_no_grade():
    result = text_metrics("", "The cat sat on the mat.")
    assert math.isnan(result.fk_grade_summary) and math.isnan(result.delta_fk)
    assert result.n_words == 0 and result.rouge1 == 0.0


def test_verification_metrics_by_hand():
    # Probabilities 0.9 and 0.2: mean 0.55, product 0.18. Verified verdicts: one supported,
    # one not: share 1/2. The unverified claim without a probability counts only in n_claims.
    result = verification_metrics([("supported", 0.9), ("not_supported", 0.2), ("unverified", None)])
    assert (result.n_claims, result.n_scored) == (3, 2)
    assert result.verification_mean == pytest.approx(0.55)
    assert result.verification_product == pytest.approx(0.18)
    assert result.claims_supported_share == pytest.approx(0.5)


def test_verification_without_scored_claims_is_undefined_not_zero():
    result = verification_metrics([("unverified", None)])
    assert math.isnan(result.verification_mean) and math.isnan(result.verification_product)
    assert math.isnan(result.claims_supported_share)


def test_metrics_frame_rows_columns_and_claims():
    texts = pd.DataFrame(
        {
            "item": ["s1", "s2"],
            "summary_text": ["the cat runs quickly", "bread apples"],
            "source_text": ["the cats are running fast", "apples bread"],
        }
    )
    claims = pd.DataFrame({"item": ["s1", "s1"], "verdict": ["supported", "supported"], "probability": [0.5, 0.8]})
    frame = metrics_frame(texts, claims, embeddings=False)
    assert list(frame["item"]) == ["s1", "s2"]
    assert frame.loc[0, "rouge1"] == pytest.approx(2 / 3)
    assert frame.loc[1, "rougeL"] == pytest.approx(0.5)
    assert frame.loc[0, "verification_product"] == pytest.approx(0.4)
    assert math.isnan(frame.loc[1, "verification_mean"])  # s2 has no claims
    assert frame.loc[1, "n_claims"] == 0
    assert "embedding_similarity" not in frame.columns
    without_claims = metrics_frame(texts, None, embeddings=False)
    assert "verification_mean" not in without_claims.columns


def test_metrics_frame_refuses_missing_text_columns():
    with pytest.raises(ValueError, match="source_text"):
        metrics_frame(pd.DataFrame({"item": [1], "summary_text": ["x"]}), embeddings=False)
