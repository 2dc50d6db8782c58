"""FactPICO Table 4's pairing: each human attribute against an LLM evaluator's overall
score, the average of its element ratings, beside the element-by-element rows (Table 10).
The golden figures are worked out by hand below."""

import math

import pandas as pd
import pytest

from stats.metaeval_questions import evaluator_overall, meta_evaluation_tables

# Four summaries; the evaluator rated two elements (N/A for c's outcome).
METRICS = pd.DataFrame(
    {
        "item": ["a", "b", "c", "d"],
        "eval.factpico_fulltext.population": [4.0, 3.0, 2.0, 1.0],
        "eval.factpico_fulltext.outcome": [2.0, 3.0, None, 1.0],
        "rougeL": [0.1, 0.2, 0.3, 0.4],
    }
)
# One rater's population and outcome ratings (1-5).
ANSWERS = pd.DataFrame(
    {
        "item": ["a", "b", "c", "d"] * 2,
        "question": ["population"] * 4 + ["outcome"] * 4,
        "score": [5.0, 4.0, 3.0, 1.0, 1.0, 2.0, 3.0, 4.0],
    }
)


def test_the_overall_score_is_the_mean_of_the_elements_rated():
    overall = evaluator_overall(METRICS)["eval.factpico_fulltext.overall"].tolist()
    # a: (4 + 2) / 2, b: (3 + 3) / 2, c: 2 (outcome N/A), d: (1 + 1) / 2
    assert overall == [3.0, 3.0, 2.0, 1.0]
    assert "eval.rougeL.overall" not in evaluator_overall(METRICS).columns


def test_each_attribute_is_paired_with_the_overall_score_beside_the_elements():
    tables = meta_evaluation_tables(
        answers=ANSWERS,
        metrics=evaluator_overall(METRICS),
        generators=pd.Series(["g1", "g2", "g3", "g4"], index=["a", "b", "c", "d"]),
        scales={"population": (1.0, 5.0), "outcome": (1.0, 5.0)},
        metric_columns=["eval.factpico_fulltext.population", "eval.factpico_fulltext.outcome",
                        "eval.factpico_fulltext.overall"],
    )  # fmt: skip
    cell = tables["summary_level"]["eval.factpico_fulltext.overall"]["population"]
    # overall x = (3, 3, 2, 1), population y = (5, 4, 3, 1): of the 6 pairs, (a, b) is tied
    # in x only and the other 5 are concordant: tau-b = 5 / sqrt(6 * 5).
    assert cell["n"] == 4
    assert cell["kendall_tau_b"] == pytest.approx(5 / math.sqrt(30))
    # Ranks x = (3.5, 3.5, 2, 1), y = (4, 3, 2, 1): rho = 4.5 / sqrt(4.5 * 5).
    assert cell["spearman_rho"] == pytest.approx(4.5 / math.sqrt(22.5))
    # outcome y = (1, 2, 3, 4) against x = (3, 3, 2, 1): 5 discordant pairs, 1 tied in x.
    against_outcome = tables["summary_level"]["eval.factpico_fulltext.overall"]["outcome"]
    assert against_outcome["kendall_tau_b"] == pytest.approx(-5 / math.sqrt(30))
    # The element-by-element rows stay beside it: population against population is 1.
    assert tables["summary_level"]["eval.factpico_fulltext.population"]["population"]["kendall_tau_b"] == 1.0
