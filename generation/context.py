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
- MMR runs in O(n·d) memory: TF-IDF rows stay sparse, relevance is one product with
  the centroid, and the similarity to the closest pick is a running maximum updated
  with one row of dot products per pick. Picks stop once no remaining sentence can
  fit the budget, so a source of thousands of sentences costs n x k, not n x n.
"""

from __future__ import annotations

import heapq
import random
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
from scipy import sparse

from core.commands import counted
from generation.llm import count_tokens
from stats.metrics import embedding_model

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
    return "mmr-minilm" if embedding_model() is not None else "mmr-tfidf"


def sentence_vectors(texts: Sequence[str], method: str) -> np.ndarray | sparse.csr_matrix:
    """Unit-length vectors, one row per text (an all-zero row for a text with no
    content words). TF-IDF rows stay sparse: a dense copy of thousands of sentences
    over their whole vocabulary would take hundreds of MB."""
    from sklearn.preprocessing import normalize

    if method == "mmr-minilm":
        vectors = np.asarray(embedding_model().encode(list(texts), normalize_embeddings=True), dtype=float)
    else:
        from sklearn.feature_extraction.text import TfidfVectorizer

        try:
            vectors = TfidfVectorizer(sublinear_tf=True, stop_words="english").fit_transform(texts).tocsr()
        except ValueError:  # nothing but stop words: every sentence is as good as any other
            vectors = sparse.csr_matrix((len(texts), 1))
    return normalize(vectors, norm="l2")


def mmr_picks(vectors: np.ndarray | sparse.spmatrix, *, seed: int, lam: float = MMR_LAMBDA) -> Iterator[int]:
    """Row indices in the order MMR picks them, lazily: stop iterating and no more
    work is done.

    Memory is O(n·d), never O(n²): relevance is one product with the centroid, and
    the similarity to the closest pick so far is a running maximum, updated with one
    row of similarities (an L2-normalised dot product) per pick.
    """
    n = vectors.shape[0]
    if n == 0:
        return
    rows = sparse.csr_matrix(vectors) if sparse.issparse(vectors) else np.asarray(vectors, dtype=float)
    # A pick's similarities are a combination of the columns of its few terms.
    columns = rows.tocsc() if sparse.issparse(rows) else None
    centroid = np.asarray(rows.mean(axis=0)).ravel()
    norm = np.linalg.norm(centroid)
    relevance = np.asarray(rows @ (centroid / norm)).ravel() if norm else np.zeros(n)
    tiebreak = list(range(n))
    random.Random(seed).shuffle(tiebreak)
    rank = np.empty(n, dtype=np.int64)
    rank[tiebreak] = np.arange(n)
    closest = np.zeros(n)
    taken = np.zeros(n, dtype=bool)
    for _ in range(n):
        # Round the scores so float noise does not beat the seeded tie-break.
        score = np.round(lam * relevance - (1 - lam) * closest, 9)
        score[taken] = -np.inf
        candidates = np.flatnonzero(score == score.max())
        best = int(candidates[np.argmin(rank[candidates])])
        taken[best] = True
        yield best
        np.maximum(closest, _similarities(rows, columns, best), out=closest)


def _similarities(rows, columns, index: int) -> np.ndarray:
    """Dot products of row `index` with every row."""
    if columns is None:
        return rows @ rows[index]
    start, end = rows.indptr[index], rows.indptr[index + 1]
    terms, weights = rows.indices[start:end], rows.data[start:end]
    return np.asarray(columns[:, terms] @ weights).ravel()


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
            skipped=f"only {counted(len(lines), 'sentence')} in the source; at least {min_sentences} are needed",
        )
    total = prompt_tokens + sum(line.tokens for line in lines)
    if total <= budget:
        return Context(lines=tuple(lines), available=len(lines), tokens=total, budget=budget, method="all", seed=seed)

    method = method or embedding_method()
    order = mmr_picks(sentence_vectors([line.text for line in lines], method), seed=seed)
    picked, used = [], prompt_tokens
    # The shortest sentence not yet considered (stale entries are skipped lazily).
    shortest = [(line.tokens, line.index) for line in lines]
    heapq.heapify(shortest)
    considered = set()
    for index in order:
        considered.add(index)
        # A long sentence that does not fit is passed over; a shorter later pick may.
        if used + lines[index].tokens <= budget:
            picked.append(index)
            used += lines[index].tokens
        while shortest and shortest[0][1] in considered:
            heapq.heappop(shortest)
        if not shortest or used + shortest[0][0] > budget:
            break  # nothing left fits: the rest of the MMR order cannot change the selection
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
                f"only {counted(len(selected), 'sentence')} fit the budget of {budget} tokens; "
                f"at least {min_sentences} are needed"
            ),
        )
    return Context(lines=selected, available=len(lines), tokens=used, budget=budget, method=method, seed=seed)
