"""The report's ROUGE figures are rouge_score's own (RougeScorer with the stemmer), though
computed from cached tokens and with a bit-parallel LCS."""

import random

import pytest
from rouge_score import rouge_scorer

from stats.metrics import lcs_length, text_metrics

WORDS = "the drug reduced attacks in adults with asthma placebo trial results patients were treated".split()


def lcs_table(a, b):
    table = [[0] * (len(b) + 1) for _ in range(len(a) + 1)]
    for i, x in enumerate(a, 1):
        for j, y in enumerate(b, 1):
            table[i][j] = table[i - 1][j - 1] + 1 if x == y else max(table[i - 1][j], table[i][j - 1])
    return table[-1][-1]


def test_lcs_length_equals_the_dynamic_programme():
    rng = random.Random(5)
    for _ in range(300):
        a = [rng.choice(WORDS[:6]) for _ in range(rng.randint(0, 70))]
        b = [rng.choice(WORDS[:6]) for _ in range(rng.randint(0, 70))]
        assert lcs_length(a, b) == lcs_table(a, b)


def test_text_metrics_equal_rouge_scorer():
    scorer = rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL"], use_stemmer=True)
    rng = random.Random(9)
    texts = ["", "Asthma.", "Patients were treated, and the results: fewer attacks!"]
    texts += [" ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 120))) + "." for _ in range(40)]
    for summary in texts:
        for source in rng.sample(texts, 5):
            want = scorer.score(target=source, prediction=summary)
            got = text_metrics(summary, source)
            for name in ("rouge1", "rouge2", "rougeL"):
                assert getattr(got, name) == pytest.approx(want[name].fmeasure, abs=1e-12), (name, summary, source)


def test_the_numpy_kde_equals_scipy_gaussian_kde():
    import numpy as np
    from scipy import stats

    from stats.metaeval import _gaussian_kde, _scott_bandwidth

    rng = np.random.default_rng(2)
    for size in (2, 5, 30, 200):
        data = stats.zscore(rng.normal(size=size) ** 3)
        kde = stats.gaussian_kde(data)
        grid = np.linspace(data.min() - 3, data.max() + 3, 257)
        assert _scott_bandwidth(data) == pytest.approx(float(np.sqrt(kde.covariance[0, 0])), rel=1e-12)
        assert _gaussian_kde(data, _scott_bandwidth(data), grid) == pytest.approx(kde(grid), rel=1e-9, abs=1e-300)
