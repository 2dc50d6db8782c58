"""Search engines for clinical questions, one interface for all.

`engine.search(query, limit=, published_before=, exclude=)` returns `Hit`s best first.
Two engines:

- `LocalEngine`: BM25 over the study's own sources, in process, so question studies work
  offline on a fresh machine. BM25 comes from `bm25s` (a maintained package, numpy only;
  Lucene's BM25 variant as Kamphuis et al. 2020 define it, k1=1.5, b=0.75) with its English stop words and the Snowball
  stemmer of PyStemmer. Why not the databases' full-text search: SQLite's FTS5 has a
  bm25() ranking but PostgreSQL's ts_rank is not BM25, so the two databases would rank the
  same question differently; one in-process index ranks identically on both. The index is
  built when the engine is made (about a second per 10,000 abstracts) and lives as long
  as the engine.
- `PubMedEngine` (literature.pubmed): NCBI's esearch, same interface.

Ranks are deterministic: by score, ties by identifier. Articles that score 0 (no query
term in them) are not hits. A query with no searchable words (empty, only stop words or
punctuation: what a weak model writes) finds nothing, and `engine.searchable(query)` says
so beforehand, so the caller can say why.

Publication dates for restricted search: a source's `metadata["published"]` (an ISO day)
or else `metadata["year"]`. With only a year, an article is kept when its year is before
the cut-off day's year (an article of the same year cannot be shown to come before it). A
source with no date is left out of a date-restricted search.

bm25s, numpy and PyStemmer are imported when an index is built or searched, not with
this module: the web app and `make run`'s master import it without needing them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date
from typing import Protocol

from annotate.models import Source, Study
from literature.identifiers import source_identifiers

STOPWORDS = "en"
# Source.metadata["kind"] of an answer's evidence (literature.answers): never indexed.
EVIDENCE_KIND = "evidence"


@dataclass(frozen=True)
class Hit:
    identifier: str  # the source key (local) or the PMID (PubMed)
    rank: int  # 1 = best
    score: float | None
    source_id: int | None = None


class Engine(Protocol):
    name: str

    def search(
        self, query: str, *, limit: int = 20, published_before: date | None = None, exclude: Iterable[str] = ()
    ) -> list[Hit]: ...

    def searchable(self, query: str) -> bool: ...


def source_date(metadata: dict) -> tuple[date | None, int | None]:
    """(publication day, publication year) from a source's metadata, either may be None."""
    metadata = metadata or {}
    day = None
    if isinstance(metadata.get("published"), str):
        try:
            day = date.fromisoformat(metadata["published"][:10])
        except ValueError:
            day = None
    year = metadata.get("year")
    if isinstance(year, str) and year.strip().isdigit():
        year = int(year)
    if not isinstance(year, int) or isinstance(year, bool):
        year = day.year if day else None
    return day, year


def is_published_before(metadata: dict, cutoff: date) -> bool:
    day, year = source_date(metadata)
    if day is not None:
        return day < cutoff
    return year is not None and year < cutoff.year


def tokenize(texts: list[str]) -> list[list[str]]:
    """Each text's terms: lower-cased words, English stop words out, Snowball-stemmed. A
    text of only stop words or punctuation has none. (bm25s leaves such a text out of its
    answer altogether when every text is empty; each text here gets its list.)"""
    if not texts:
        return []
    import bm25s
    import Stemmer

    tokens = bm25s.tokenize(
        texts, stopwords=STOPWORDS, stemmer=Stemmer.Stemmer("english"), show_progress=False, return_ids=False
    )
    return [list(terms) for terms in tokens] if len(tokens) == len(texts) else [[] for _ in texts]


class LocalEngine:
    """BM25 over one study's sources (title and text), answers' evidence excluded."""

    name = "local"

    def __init__(self, study: Study):
        rows = list(
            Source.objects.filter(study=study)
            .order_by("key")
            .values_list("pk", "key", "title", "text", "external_ids", "metadata")
        )
        # In Python, not SQL: a JSON key test that is NULL for most rows reads differently
        # on SQLite and PostgreSQL.
        rows = [row for row in rows if (row[5] or {}).get("kind") != EVIDENCE_KIND]
        self.ids = [pk for pk, *_ in rows]
        self.keys = [key for _, key, *_ in rows]
        self.names = [source_identifiers(key, ext) for _, key, _, _, ext, _ in rows]
        self.metadata = [meta for *_, meta in rows]
        self._position = {key: i for i, key in enumerate(self.keys)}
        import bm25s

        self.index = bm25s.BM25(k1=1.5, b=0.75)
        corpus = tokenize([f"{title}\n{text}" for _, _, title, text, _, _ in rows])
        # bm25s cannot index a corpus without a single term (sources of only stop words).
        self.indexed = any(corpus)
        if self.indexed:
            self.index.index(corpus, show_progress=False)

    def names_of(self, hit: Hit) -> frozenset[str]:
        """Every identifier of a hit's source (key, PMID, PMCID, DOI)."""
        i = self._position.get(hit.identifier)
        return self.names[i] if i is not None else frozenset({hit.identifier})

    def __len__(self) -> int:
        return len(self.ids)

    def searchable(self, query: str) -> bool:
        """Whether the query has a term to search for (not only stop words or punctuation)."""
        return bool(tokenize([query])[0])

    def search(
        self, query: str, *, limit: int = 20, published_before: date | None = None, exclude: Iterable[str] = ()
    ) -> list[Hit]:
        terms = tokenize([query])[0]
        if not self.indexed or not terms or limit < 1:
            return []
        import numpy as np

        scores = np.asarray(self.index.get_scores(terms), dtype=float)
        excluded = set(exclude)
        keep = [
            i
            for i in np.flatnonzero(scores > 0)
            if not (self.names[i] & excluded)
            and (published_before is None or is_published_before(self.metadata[i], published_before))
        ]
        # Best score first; equal scores by key, so ranks never depend on storage order.
        keep.sort(key=lambda i: (-round(float(scores[i]), 9), self.keys[i]))
        return [
            Hit(identifier=self.keys[i], rank=n, score=round(float(scores[i]), 6), source_id=self.ids[i])
            for n, i in enumerate(keep[:limit], start=1)
        ]


def bm25_scores(query: str, documents: list[str]) -> list[float]:
    """BM25 score of each document against the query, the documents themselves the corpus
    (their own IDF), as Clinfo.ai re-ranks its relevant articles: the same tokenizer and
    Lucene variant as LocalEngine (k1=1.5, b=0.75). 0 for every document when the query or
    the documents have no searchable term."""
    import bm25s

    terms = tokenize([query])[0]
    corpus = tokenize(documents)
    if not terms or not any(corpus):
        return [0.0] * len(documents)
    index = bm25s.BM25(k1=1.5, b=0.75)
    index.index(corpus, show_progress=False)
    return [float(x) for x in index.get_scores(terms)]
