"""Cited answers to questions, stored as rateable summaries.

An answer is a `Summary` like any other, so raters, batches, agreement, exports and the
reference checks work on it unchanged. What it is written from is its *evidence*: one
`Source` made of the articles the answer may cite, in citation order. Article n's title
and sentences carry the reference `n`, so a citation `[n]` in the answer resolves to them:
the rating page links it (hover or focus highlights the article), and LitSumm's reference
checks and Factored Verification see `[n]` as a reference the context uses.

Citation numbers follow the retrieval's ranks (the best-ranked evidence article is [1]),
never the order in which per-article LLM answers happened to arrive (Clinfo.ai's own code
numbered by thread completion). Each article's citation line is built from the article's
own record (its source's title, authors, journal, year and identifiers), never from its
reference list.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass

from django.db import transaction

from annotate.models import Source, Summary, sentence_spans
from core.exceptions import ApplicationError
from core.sentences import split_spans
from literature.engines import EVIDENCE_KIND
from literature.models import Question, Retrieval, RetrievedArticle

CITATION = re.compile(r"\[(\d+(?:\s*[,;]\s*\d+)*)\]")
TLDR_PREFIX = "TL;DR: "


class AnswerError(ApplicationError):
    pass


@dataclass(frozen=True)
class Citation:
    number: int
    identifier: str
    source_key: str
    rank: int
    reference: str


def citation_line(source: Source) -> str:
    """A Vancouver-like line from the source's own record (authors, title, journal, year,
    identifiers), skipping what is unknown."""
    meta = source.metadata or {}
    authors = [a for a in meta.get("authors", []) if isinstance(a, str)]
    people = ", ".join(authors[:3]) + (", et al" if len(authors) > 3 else "") if authors else ""
    ids = source.external_ids or {}
    parts = [
        people,
        (source.title or source.key).rstrip("."),
        str(meta.get("journal") or "").rstrip("."),
        str(meta.get("year") or ""),
        f"doi:{ids['doi']}" if ids.get("doi") else "",
        f"PMID: {ids['pmid']}" if ids.get("pmid") else "",
        f"PMCID: {ids['pmcid']}" if ids.get("pmcid") else "",
    ]
    return ". ".join(p for p in parts if p) + "."


def evidence_articles(retrieval: Retrieval, *, unjudged_top: int = 5) -> list[RetrievedArticle]:
    """The articles an answer may cite, best rank first: those judged relevant; when no
    article of the retrieval was judged (no model configured), the `unjudged_top` best."""
    articles = list(retrieval.articles.select_related("source").order_by("rank"))
    if any(a.relevant is not None for a in articles):
        return [a for a in articles if a.relevant]
    return articles[:unjudged_top]


def number_citations(articles: Sequence[RetrievedArticle]) -> list[Citation]:
    """[1], [2], ... by retrieval rank, whatever order `articles` come in."""
    ordered = sorted(articles, key=lambda a: a.rank)
    missing = [a.identifier for a in ordered if a.source is None]
    if missing:
        raise AnswerError(f"articles not imported as sources cannot be cited: {', '.join(missing)}")
    return [
        Citation(n, a.identifier, a.source.key, a.rank, citation_line(a.source)) for n, a in enumerate(ordered, start=1)
    ]


def cited_numbers(text: str) -> list[int]:
    return [int(n) for m in CITATION.finditer(text) for n in re.split(r"\s*[,;]\s*", m.group(1))]


_NEGATIVE_CITATION = re.compile(r"\[\s*-\s*\d+(?:\s*[,;]\s*-?\s*\d+)*\]")


def check_citations(text: str, count: int) -> None:
    """Every [n] must name one of the `count` evidence articles ([0], [-1] and [99] do not)."""
    bad = [f"[{n}]" for n in sorted({n for n in cited_numbers(text) if not 1 <= n <= count})]
    bad += sorted({"".join(m.group().split()) for m in _NEGATIVE_CITATION.finditer(text)})
    if bad:
        articles = "1 article" if count == 1 else f"{count} articles"
        raise AnswerError(f"citation {', '.join(bad)} does not resolve: the evidence has {articles}")


def require_citation(text: str, count: int) -> None:
    """At least one [n] of the text names one of the `count` evidence articles: an answer
    that cites nothing is not a cited answer, whatever else it says."""
    if not any(1 <= n <= count for n in cited_numbers(text)):
        raise AnswerError("the synthesis cites no article: each sentence must end with its article's number, as [1]")


def _evidence_text(citations: Sequence[Citation], sources: dict[str, Source]) -> tuple[str, list[tuple]]:
    """The evidence's text and its sentences (start, end, ref): each article as its
    citation line (one sentence), then its own sentences, every one with the reference n."""
    text, rows = "", []
    for c in citations:
        source = sources[c.source_key]
        head = f"[{c.number}] {c.reference}"
        base = len(text) + (2 if text else 0)
        text = f"{text}\n\n{head}\n{source.text}" if text else f"{head}\n{source.text}"
        rows.append((base, base + len(head), str(c.number)))
        body = base + len(head) + 1
        for start, end in split_spans(source.text):
            rows.append((body + start, body + end, str(c.number)))
    return text, rows


def _common_licence(sources: Sequence[Source]) -> str:
    """The evidence's licence: the articles' own when they all share one, otherwise none
    (an export then withholds the evidence's text)."""
    licences = {s.licence for s in sources}
    return licences.pop() if len(licences) == 1 else ""


@transaction.atomic
def store_answer(
    *,
    question: Question,
    retrieval: Retrieval,
    synthesis: str,
    tldr: str,
    generator: str,
    key: str,
    citations: Sequence[Citation] | None = None,
    metadata: dict | None = None,
) -> Summary:
    """Store an answer (synthesis and TL;DR) with its evidence source, after checking that
    every citation resolves. `generator` says who or what wrote it (never shown to raters)."""
    if retrieval.question_id != question.pk:
        raise AnswerError("the retrieval is not this question's")
    citations = list(citations if citations is not None else number_citations(evidence_articles(retrieval)))
    if not citations:
        raise AnswerError("no evidence to cite: the retrieval kept no relevant article")
    synthesis, tldr = synthesis.strip(), tldr.strip()
    if not synthesis or not tldr:
        raise AnswerError("an answer needs a synthesis and a TL;DR")
    check_citations(f"{synthesis}\n{tldr}", len(citations))
    sources = {s.key: s for s in Source.objects.filter(study=question.study, key__in=[c.source_key for c in citations])}
    text, rows = _evidence_text(citations, sources)
    evidence = Source.objects.create(
        study=question.study,
        key=f"{key}:evidence",
        title=f"Articles for the question: {question.text}"[:1000],
        text=text,
        sentence_spans=sentence_spans(text, rows),
        licence=_common_licence(list(sources.values())),
        # Only what the rating page shows (the question): the study report turns source
        # metadata into columns; what the answer cites lives on the summary.
        metadata={"kind": EVIDENCE_KIND, "question": question.text},
    )
    return Summary.objects.create(
        study=question.study,
        source=evidence,
        key=key,
        text=f"{synthesis}\n\n{TLDR_PREFIX}{tldr}",
        generator=generator,
        metadata={
            **(metadata or {}),
            "question": str(question.uuid),
            "retrieval": str(retrieval.uuid),
            "tldr": tldr,
            "citations": [asdict(c) for c in citations],
        },
    )
