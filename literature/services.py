"""Writes of the literature app: retrieving articles for questions."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from django.db import transaction
from django.utils import timezone

from literature.engines import Engine, Hit
from literature.models import Question, Retrieval, RetrievedArticle

Regime = Retrieval.Regime


def regime_filters(question: Question, regime: str) -> dict:
    """What the search itself is given under a regime (Clinfo.ai, section 4):

    - restricted: articles published before the question's date ("up to one day before
      the publication date"; without a date the search is not date-restricted), and never
      the excluded identifiers;
    - exclude-source: no date limit; the excluded identifiers are removed after the
      search (recorded as excluded hits, so "source included" can be measured);
    - unrestricted: nothing removed."""
    if regime == Regime.RESTRICTED:
        return {"published_before": question.published_on, "exclude": list(question.exclude_ids)}
    if regime in (Regime.EXCLUDE_SOURCE, Regime.UNRESTRICTED):
        return {"published_before": None, "exclude": []}
    raise ValueError(f"unknown regime {regime!r}")


def union_hits(results: Sequence[Sequence[Hit]], limit: int) -> list[Hit]:
    """The union of several queries' hits, re-ranked deterministically: by the first query
    that found an article, then its rank there (never by which answer arrived first)."""
    seen: dict[str, Hit] = {}
    for hits in results:
        for hit in hits:
            seen.setdefault(hit.identifier, hit)
    ordered = list(seen.values())[:limit]
    return [Hit(h.identifier, n, h.score, h.source_id) for n, h in enumerate(ordered, start=1)]


@dataclass(frozen=True)
class Search:
    """What a set of queries found under a regime, before it is stored."""

    queries: list[str]
    results: list[list[Hit]]  # per query, as the engine answered
    hits: list[Hit]  # the union, regime applied, ranked 1..limit
    excluded: list[str]  # identifiers the regime removed


def search_question(
    *, question: Question, engine: Engine, regime: str, queries: Sequence[str], limit: int = 20
) -> Search:
    """Run the queries under the regime and union their hits (union_hits)."""
    queries = [q for q in queries if q.strip()]
    filters = regime_filters(question, regime)
    results = [engine.search(q, limit=limit, **filters) for q in queries]
    return combine_results(
        question=question, engine=engine, regime=regime, queries=queries, results=results, limit=limit
    )


def combine_results(
    *,
    question: Question,
    engine: Engine,
    regime: str,
    queries: Sequence[str],
    results: Sequence[Sequence[Hit]],
    limit: int,
) -> Search:
    """The union of queries' results (already searched under the regime's filters), with
    what the regime removes after the search removed, ranked 1..limit."""
    hits = union_hits(results, limit=10**9)
    excluded: list[str] = []
    if regime == Regime.EXCLUDE_SOURCE and question.exclude_ids:
        drop = set(question.exclude_ids)
        excluded = [h.identifier for h in hits if h.identifier in drop or _names(engine, h) & drop]
        hits = [h for h in hits if h.identifier not in excluded]
    hits = [Hit(h.identifier, n, h.score, h.source_id) for n, h in enumerate(hits[:limit], start=1)]
    return Search(list(queries), [list(r) for r in results], hits, excluded)


@transaction.atomic
def save_retrieval(
    *, question: Question, engine_name: str, regime: str, search: Search, settings: dict | None = None
) -> Retrieval:
    """Store a search with its articles in rank order."""
    retrieval = Retrieval.objects.create(
        question=question,
        engine=engine_name,
        regime=regime,
        queries=[{"query": q, "hits": len(r)} for q, r in zip(search.queries, search.results, strict=True)],
        excluded_hits=search.excluded,
        settings=settings or {},
    )
    RetrievedArticle.objects.bulk_create(
        [
            RetrievedArticle(
                retrieval=retrieval, rank=h.rank, identifier=h.identifier, source_id=h.source_id, score=h.score
            )
            for h in search.hits
        ]
    )
    return retrieval


def retrieve_for_question(
    *, question: Question, engine: Engine, regime: str, queries: Sequence[str] | None = None, limit: int = 20
) -> Retrieval:
    """Search for a question (with its own text as the query unless queries are given),
    apply the regime, and store the retrieval with its articles in rank order."""
    search = search_question(
        question=question, engine=engine, regime=regime, queries=queries or [question.text], limit=limit
    )
    return save_retrieval(
        question=question, engine_name=engine.name, regime=regime, search=search, settings={"limit": limit}
    )


@transaction.atomic
def record_relevance(*, retrieval: Retrieval, decisions: dict[str, tuple[bool, str]]) -> None:
    """Store relevance decisions (identifier -> (relevant, reason)) on the retrieval's articles."""
    articles = list(retrieval.articles.filter(identifier__in=decisions))
    for article in articles:
        article.relevant, article.reason = decisions[article.identifier]
    RetrievedArticle.objects.bulk_update(articles, ["relevant", "reason"])
    # The study report's retrieval figures are cached by the retrievals' newest change.
    Retrieval.objects.filter(pk=retrieval.pk).update(updated_at=timezone.now())


def record_rerank(*, retrieval: Retrieval, rerank: dict) -> None:
    """Record on the retrieval which relevant articles a BM25 re-ranking kept out
    (generation.questions: Clinfo.ai's rule above QUESTIONS_RERANK_ABOVE relevant)."""
    settings = {**retrieval.settings, "rerank": rerank}
    Retrieval.objects.filter(pk=retrieval.pk).update(settings=settings, updated_at=timezone.now())
    retrieval.settings = settings


def _names(engine: Engine, hit: Hit) -> frozenset[str]:
    """Every identifier of a hit the engine knows (a local source's PMID, PMCID, ...)."""
    names = getattr(engine, "names_of", None)
    return names(hit) if names else frozenset({hit.identifier})
