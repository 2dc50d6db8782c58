"""Retrieval scores of question answering against the question's reference articles
(Clinfo.ai, section 4 and Table 3). Pure functions: no ORM.

An article may be known by several identifiers (a source key, its PMID, PMCID, DOI); a
reference is found when any identifier of a retrieved article equals it. Each reference
counts once, however many articles answer to it.

- precision: of the articles judged relevant, the share that are references;
- recall: of the references, the share among the articles judged relevant;
- F1: their harmonic mean;
- retrieved recall: of the references, the share anywhere in what was retrieved (judged
  relevant or not): the ceiling the relevance step can reach;
- source included: whether the question's excluded article (the systematic review it came
  from) was retrieved at all, before the regime removed it (Table 3's last column).

A ratio with nothing to divide by is None (not 0): a question without references has no
recall, an answer that kept nothing has no precision. Study-level figures are the mean
and sample standard deviation over the questions where the figure exists, as Table 3
reports them, with the number of questions.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class RetrievalScores:
    retrieved: int
    judged_relevant: int | None  # None: no relevance decisions were made
    references: int
    references_retrieved: int
    references_relevant: int | None
    precision: float | None
    recall: float | None
    f1: float | None
    retrieved_recall: float | None
    source_included: bool


def _found(references: set[str], articles: Iterable[frozenset[str]]) -> set[str]:
    found: set[str] = set()
    for names in articles:
        found |= names & references
    return found


def _ratio(part: int, whole: int) -> float | None:
    return part / whole if whole else None


def retrieval_scores(
    *,
    retrieved: Sequence[frozenset[str]],
    relevant: Sequence[bool | None],
    references: Iterable[str],
    excluded_hits: Iterable[str] = (),
    exclude: Iterable[str] = (),
) -> RetrievalScores:
    """Scores of one retrieval. `retrieved[i]` is the identifiers of the i-th article kept,
    `relevant[i]` its relevance decision (None: not judged; if no article was judged, the
    relevance-based figures are None). `excluded_hits` are what the regime removed;
    `exclude` the question's identifiers to exclude."""
    if len(retrieved) != len(relevant):
        raise ValueError("retrieved and relevant must have the same length")
    refs = set(references)
    judged = any(r is not None for r in relevant)
    kept = [names for names, r in zip(retrieved, relevant, strict=True) if r]
    in_retrieved = _found(refs, retrieved)
    precision = recall = f1 = None
    n_relevant = refs_relevant = None
    if judged:
        n_relevant = len(kept)
        refs_relevant = len(_found(refs, kept))
        articles_that_are_refs = sum(1 for names in kept if names & refs)
        precision = _ratio(articles_that_are_refs, n_relevant)
        recall = _ratio(refs_relevant, len(refs))
        if precision is not None and recall is not None:
            f1 = 0.0 if precision + recall == 0 else 2 * precision * recall / (precision + recall)
    excluded = set(exclude)
    source_included = bool(excluded & set(excluded_hits)) or any(names & excluded for names in retrieved)
    return RetrievalScores(
        retrieved=len(retrieved),
        judged_relevant=n_relevant,
        references=len(refs),
        references_retrieved=len(in_retrieved),
        references_relevant=refs_relevant,
        precision=precision,
        recall=recall,
        f1=f1,
        retrieved_recall=_ratio(len(in_retrieved), len(refs)),
        source_included=source_included,
    )


@dataclass(frozen=True)
class MeanSD:
    mean: float | None
    sd: float | None
    n: int


def mean_sd(values: Iterable[float | None]) -> MeanSD:
    """Mean and sample standard deviation (n - 1) of the values that exist."""
    xs = [float(v) for v in values if v is not None]
    if not xs:
        return MeanSD(None, None, 0)
    mean = sum(xs) / len(xs)
    sd = math.sqrt(sum((x - mean) ** 2 for x in xs) / (len(xs) - 1)) if len(xs) > 1 else None
    return MeanSD(mean, sd, len(xs))


def study_scores(scores: Sequence[RetrievalScores]) -> dict[str, MeanSD]:
    """Each figure over a study's questions (mean, SD, number of questions it exists for)."""
    return {
        "precision": mean_sd(s.precision for s in scores),
        "recall": mean_sd(s.recall for s in scores),
        "f1": mean_sd(s.f1 for s in scores),
        "retrieved_recall": mean_sd(s.retrieved_recall for s in scores),
        "source_included": mean_sd(float(s.source_included) for s in scores),
    }
