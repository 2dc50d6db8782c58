"""PubMed as a search engine and as a way to bring articles into a study.

`PubMedEngine` has the local engine's interface (literature.engines). Articles it finds are
imported as sources of the study (so answers can cite them and raters can read them), each
keyed by its PMID, through the same all-or-nothing importer as JSON Lines files
(datasets.importing.import_records): the text is the title and abstract; the licence is
the open-access licence PMC states for the article when it has one, and otherwise empty,
so exports withhold the text (a PubMed abstract belongs to its publisher). Citations are
built from each article's own record (literature.ncbi.Article), never its reference list.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import date, timedelta

from annotate.models import Source, Study
from datasets.importing import ImportResult, import_records
from literature.engines import Hit
from literature.identifiers import source_identifiers
from literature.ncbi import Article, EutilsClient, FullText


@dataclass
class ImportedArticles:
    sources: dict[str, Source]  # PMID -> source, in the order asked for
    result: ImportResult
    without_abstract: list[str] = field(default_factory=list)
    open_access: list[str] = field(default_factory=list)


def article_record(study: Study, article: Article, licence: str = "", licence_url: str = "") -> dict:
    """The JSON Lines source record of a PubMed article (docs/import-format.md)."""
    text = article.title.strip()
    if article.abstract.strip():
        text = f"{text}\n{article.abstract.strip()}" if text else article.abstract.strip()
    return {
        "type": "source",
        "study": study.slug,
        "key": article.pmid,
        "title": article.title[:1000],
        "text": text or f"PubMed {article.pmid} (no title or abstract)",
        "licence": licence,
        "licence_url": licence_url,
        "external_ids": {
            k: v for k, v in (("pmid", article.pmid), ("pmcid", article.pmcid), ("doi", article.doi)) if v
        },
        "metadata": {
            "origin": "PubMed",
            "journal": article.journal,
            "year": article.year,
            "authors": list(article.authors),
            "publication_types": list(article.publication_types),
            "citation": article.citation(),
            **({"no_abstract": True} if not article.abstract.strip() else {}),
        },
        "ref": article.pmid,
    }


def import_articles(*, study: Study, pmids: Iterable[str], client: EutilsClient) -> ImportedArticles:
    """Fetch the articles (and, for those in PMC, their licence) and import them as sources
    of the study, all or nothing. Articles already imported are updated only if changed."""
    articles = client.fetch_articles(pmids)
    pmcids = [a.pmcid for a in articles if a.pmcid]
    licences = {t.pmcid: t for t in client.fetch_full_texts(pmcids)} if pmcids else {}
    records = []
    for article in articles:
        full = licences.get(article.pmcid)
        open_access = full is not None and full.open_access
        records.append(
            article_record(study, article, full.licence if open_access else "", full.licence_url if open_access else "")
        )
    result = (
        import_records(lines=[json.dumps(r) + "\n" for r in records], only_study=study.slug)
        if records
        else ImportResult()
    )
    stored = {s.key: s for s in Source.objects.filter(study=study, key__in=[a.pmid for a in articles])}
    return ImportedArticles(
        sources={a.pmid: stored[a.pmid] for a in articles if a.pmid in stored},
        result=result,
        without_abstract=[a.pmid for a in articles if not a.abstract.strip()],
        open_access=[a.pmid for a in articles if a.pmcid in licences and licences[a.pmcid].open_access],
    )


# A source's text is at most 20,000 characters (core.text_validation).
MAX_FULL_TEXT_CHARS = 19_000


def full_text_record(study: Study, text: FullText, *, full_text: bool) -> dict:
    """The JSON Lines source record of a PMC article, from its JATS record: keyed by its
    PMID when it has one (the same source `--pmid` makes), else its PMCID. Title and
    abstract; with `full_text` and an open licence, the body too (cut at
    MAX_FULL_TEXT_CHARS, said so in the metadata). The licence only when it is open."""
    key = text.pmid or text.pmcid
    parts = [text.title.strip(), text.abstract.strip()]
    body = text.text.strip() if full_text and text.open_access else ""
    cut = False
    if body:
        room = MAX_FULL_TEXT_CHARS - sum(len(p) + 1 for p in parts)
        cut = len(body) > room
        parts.append(body[: max(room, 0)].rsplit(" ", 1)[0] if cut else body)
    return {
        "type": "source",
        "study": study.slug,
        "key": key,
        "title": text.title[:1000],
        "text": "\n".join(p for p in parts if p) or f"{text.pmcid} (no title or abstract)",
        "licence": text.licence if text.open_access else "",
        "licence_url": text.licence_url if text.open_access else "",
        "external_ids": {k: v for k, v in (("pmid", text.pmid), ("pmcid", text.pmcid), ("doi", text.doi)) if v},
        "metadata": {
            "origin": "PMC",
            "journal": text.journal,
            "year": text.year,
            "authors": list(text.authors),
            "citation": text.citation(),
            "full_text": bool(body),
            **({"full_text_cut": True} if cut else {}),
            **({"no_abstract": True} if not text.abstract.strip() else {}),
        },
        "ref": key,
    }


def import_by_pmcid(*, study: Study, pmcids: Iterable[str], client: EutilsClient, full_text: bool = False):
    """Fetch PMC articles (efetch db=pmc) and import them as sources of the study, all or
    nothing (full_text_record). Returns (the sources by PMCID in the order asked, the
    import's result, the PMCIDs PMC did not return)."""
    wanted = [p.strip().upper() if p.strip().upper().startswith("PMC") else f"PMC{p.strip()}" for p in pmcids]
    texts = client.fetch_full_texts(wanted)
    records = [full_text_record(study, t, full_text=full_text) for t in texts]
    result = (
        import_records(lines=[json.dumps(r) + "\n" for r in records], only_study=study.slug)
        if records
        else ImportResult()
    )
    stored = {s.key: s for s in Source.objects.filter(study=study, key__in=[r["key"] for r in records])}
    by_pmcid = {t.pmcid: stored[t.pmid or t.pmcid] for t in texts}
    return (
        {p: by_pmcid[p] for p in wanted if p in by_pmcid},
        result,
        [p for p in wanted if p not in by_pmcid],
        texts,
    )


class PubMedEngine:
    """esearch for the query (date-restricted and exclusions applied), then the hits
    imported as sources of the study."""

    name = "pubmed"

    def __init__(self, study: Study, client: EutilsClient | None = None):
        self.study = study
        self.client = client or EutilsClient.from_environment()
        self._names: dict[str, frozenset[str]] = {}

    def search(
        self, query: str, *, limit: int = 20, published_before: date | None = None, exclude: Iterable[str] = ()
    ) -> list[Hit]:
        if not self.searchable(query):
            return []
        excluded = set(exclude)
        # "Up to one day before the publication date": PubMed's maxdate is inclusive.
        maxdate = published_before - timedelta(days=1) if published_before else None
        found = self.client.esearch(query, retmax=limit + len(excluded), maxdate=maxdate)
        ids = [i for i in found.ids if i not in excluded]
        imported = import_articles(study=self.study, pmids=ids, client=self.client)
        hits = []
        for pmid in ids:
            source = imported.sources.get(pmid)
            if source is None:
                continue
            names = source_identifiers(source.key, source.external_ids)
            if names & excluded:  # excluded by its PMCID or DOI
                continue
            self._names[pmid] = names
            hits.append(Hit(identifier=pmid, rank=len(hits) + 1, score=None, source_id=source.pk))
            if len(hits) == limit:
                break
        return hits

    def names_of(self, hit: Hit) -> frozenset[str]:
        return self._names.get(hit.identifier, frozenset({hit.identifier}))

    @staticmethod
    def searchable(query: str) -> bool:
        """Whether the query has a word for PubMed to search (PubMed drops its own stop
        words; a query of only punctuation or blanks is refused by esearch)."""
        return any(ch.isalnum() for ch in query)
