"""Europe PMC: LitSumm's literature acquisition (Green et al., "Sentence Acquisition").

LitSumm finds articles mentioning an RNA through Europe PMC's REST search, restricted to the
open-access subset with full text in Europe PMC and without preprints
(`"<ID>" AND IN_EPMC:Y AND OPEN_ACCESS:Y AND NOT SRC:PPR`), then retrieves each article's
full text and 1) validates that the identifier is mentioned in it and 2) extracts the
sentences that mention it, each kept with the PMCID it came from. `acquire_sentences` does
that for one identifier or term (with its synonyms: LitSumm uses RNAcentral's
cross-references for other names of the same RNA) and imports the sentences as one source
of the study, each sentence's reference its article's PMCID, as LitSumm's contexts are.

The client speaks Europe PMC's documented REST protocol
(https://europepmc.org/RestfulWebService):

- `GET {base}search?query=…&format=json&resultType=core&pageSize=…&cursorMark=…`: pages of
  results in `resultList.result`, the next page's `nextCursorMark` (the same mark as the
  one sent, or none, when there are no more);
- `GET {base}{PMCID}/fullTextXML`: the article's JATS XML, for open-access articles only
  (404 for others).

Like the NCBI client (literature.ncbi, whose JATS reading it shares): retries 429, 5xx,
timeouts and dropped connections with backoff honouring Retry-After; other 4xx fail at once
(a full text's 404 means "no open-access text", and the article is left out with the
reason); XML parsed by defusedxml; requests spaced (EUROPEPMC_RATE a second, shared by the
process's clients, and by every process through Redis when one is set: core.ratelimit).
Settings: EUROPEPMC_URL, EUROPEPMC_TIMEOUT, EUROPEPMC_MAX_RETRIES,
EUROPEPMC_RATE, EUROPEPMC_EMAIL (sent as `email`, as Europe PMC asks heavy users to).
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from urllib.parse import urlsplit
from xml.etree.ElementTree import ParseError

import defusedxml.ElementTree as SafeET
import httpx2
from defusedxml import DefusedXmlException

from annotate.models import Source, Study
from core.env import env_float, env_int, env_str
from core.exceptions import ApplicationError
from core.ratelimit import HEADROOM
from core.retry import RetriesExhausted, send_politely
from core.sentences import split_spans
from datasets.importing import ImportResult, import_records
from literature.ncbi import FullText, _full_text, shared_limiter

logger = logging.getLogger(__name__)

DEFAULT_URL = "https://www.ebi.ac.uk/europepmc/webservices/rest/"
# LitSumm's restriction: open access, full text in Europe PMC, no preprints.
OPEN_ACCESS_FILTER = "IN_EPMC:Y AND OPEN_ACCESS:Y AND NOT SRC:PPR"
PAGE_SIZE_MAX = 1000  # Europe PMC's largest pageSize
# A source's text is at most 20,000 characters (core.text_validation); sentences past this
# are left out, counted in the source's metadata.
MAX_SOURCE_CHARS = 19_000


class EuropePmcError(ApplicationError):
    """Europe PMC failed after its retries, refused the request, or sent something unusable."""


@dataclass(frozen=True)
class SearchHit:
    id: str
    source: str  # MED, PMC, PPR, ...
    pmcid: str
    pmid: str
    doi: str
    title: str
    authors: str
    journal: str
    year: int | None
    open_access: bool
    licence: str  # as the search states it ("cc by"); the full text's own licence wins


@dataclass(frozen=True)
class SearchPage:
    hit_count: int
    hits: list[SearchHit]
    next_cursor: str | None


class EuropePmcClient:
    def __init__(
        self,
        *,
        base_url: str = DEFAULT_URL,
        email: str = "",
        timeout: float = 30.0,
        max_retries: int = 4,
        backoff_base: float = 1.0,
        backoff_max: float = 30.0,
        requests_per_second: float = 5.0,
    ):
        self.base_url = base_url.rstrip("/") + "/"
        self.email = email
        self.max_retries, self.backoff_base, self.backoff_max = max_retries, backoff_base, backoff_max
        self.requests_per_second = requests_per_second
        self._limiter = shared_limiter(self.base_url, "")
        self._http = httpx2.Client(timeout=httpx2.Timeout(timeout))

    @classmethod
    def from_environment(cls) -> EuropePmcClient:
        return cls(
            base_url=env_str("EUROPEPMC_URL", DEFAULT_URL),
            email=env_str("EUROPEPMC_EMAIL", ""),
            timeout=env_float("EUROPEPMC_TIMEOUT", 30.0),
            max_retries=env_int("EUROPEPMC_MAX_RETRIES", 4, minimum=0),
            requests_per_second=env_float("EUROPEPMC_RATE", 5.0),
        )

    def __enter__(self) -> EuropePmcClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    # --- search ----------------------------------------------------------------------------

    def search_page(self, query: str, *, cursor: str = "*", page_size: int = 100) -> SearchPage:
        params = {
            "query": query,
            "format": "json",
            "resultType": "core",
            "pageSize": str(min(max(page_size, 1), PAGE_SIZE_MAX)),
            "cursorMark": cursor,
        }
        if self.email:
            params["email"] = self.email
        body = self._get("search", params, what="the search")
        try:
            data = json.loads(body)
        except (json.JSONDecodeError, UnicodeDecodeError):
            raise EuropePmcError(f"Europe PMC answered the search without JSON: {body[:80]!r}") from None
        if not isinstance(data, dict) or not isinstance(data.get("resultList"), dict):
            raise EuropePmcError("Europe PMC's search answer has no resultList")
        results = data["resultList"].get("result") or []
        if not isinstance(results, list):
            raise EuropePmcError("Europe PMC's resultList.result is not a list")
        hits = [_hit(r) for r in results if isinstance(r, dict)]
        next_cursor = data.get("nextCursorMark")
        done = not hits or not isinstance(next_cursor, str) or next_cursor == cursor
        return SearchPage(int(data.get("hitCount") or 0), hits, None if done else next_cursor)

    def search(self, query: str, *, limit: int = 100) -> list[SearchHit]:
        """Up to `limit` hits, following cursorMark pages (as Europe PMC documents deep paging)."""
        hits: list[SearchHit] = []
        cursor: str | None = "*"
        while cursor is not None and len(hits) < limit:
            page = self.search_page(query, cursor=cursor, page_size=min(limit - len(hits), PAGE_SIZE_MAX))
            hits += page.hits
            cursor = page.next_cursor
        return hits[:limit]

    # --- full text -------------------------------------------------------------------------

    def full_text(self, pmcid: str) -> FullText | None:
        """The article's JATS full text, or None when Europe PMC has none to give (404:
        not open access, or not in Europe PMC)."""
        pmcid = _normal_pmcid(pmcid)
        body = self._get(f"{pmcid}/fullTextXML", {}, what=f"the full text of {pmcid}", missing_ok=True)
        if body is None:
            return None
        try:
            root = SafeET.fromstring(body)
        except DefusedXmlException as exc:
            raise EuropePmcError(f"Europe PMC sent unsafe XML for {pmcid} ({type(exc).__name__}); refused") from None
        except ParseError as exc:
            raise EuropePmcError(f"Europe PMC sent malformed XML for {pmcid}: {exc}") from None
        record = root if root.tag == "article" else root.find("article")
        if record is None:
            raise EuropePmcError(f"Europe PMC answered <{root.tag}> instead of an <article> for {pmcid}")
        text = _full_text(record)
        return text if text.pmcid else replace(text, pmcid=pmcid)

    # --- HTTP ------------------------------------------------------------------------------

    def _get(self, path: str, params: dict[str, str], *, what: str, missing_ok: bool = False) -> bytes | None:
        url = self.base_url + path
        shown = urlsplit(url).path
        try:
            response, _ = send_politely(
                lambda: self._http.get(url, params=params),
                pace=lambda: self._limiter.wait(1.0 / (self.requests_per_second * HEADROOM)),
                max_retries=self.max_retries,
                backoff_base=self.backoff_base,
                backoff_max=self.backoff_max,
                label=f"Europe PMC {shown}",
            )
        except RetriesExhausted as exc:
            raise EuropePmcError(
                f"Europe PMC {shown} failed for {what} after {exc.attempts} attempts; last: {exc.failure}"
            ) from None
        if response.status_code == 200:
            return response.content
        if response.status_code == 404 and missing_ok:
            return None
        detail = response.text[:200].strip()
        raise EuropePmcError(
            f"Europe PMC {shown} answered HTTP {response.status_code} for {what} (not retried): {detail}"
        )


def _normal_pmcid(value: str) -> str:
    value = value.strip().upper()
    if not value.startswith("PMC"):
        value = f"PMC{value}"
    if not re.fullmatch(r"PMC\d+", value):
        raise EuropePmcError(f"not a PMCID: {value!r}")
    return value


def _hit(r: dict) -> SearchHit:
    journal = r.get("journalTitle") or ((r.get("journalInfo") or {}).get("journal") or {}).get("title") or ""
    year = r.get("pubYear")
    return SearchHit(
        id=str(r.get("id") or ""),
        source=str(r.get("source") or ""),
        pmcid=str(r.get("pmcid") or ""),
        pmid=str(r.get("pmid") or ""),
        doi=str(r.get("doi") or ""),
        title=str(r.get("title") or ""),
        authors=str(r.get("authorString") or ""),
        journal=str(journal),
        year=int(year) if isinstance(year, str | int) and str(year).isdigit() else None,
        open_access=r.get("isOpenAccess") == "Y",
        licence=str(r.get("license") or ""),
    )


# --- acquisition (LitSumm) -----------------------------------------------------------------


def litsumm_query(terms: Sequence[str]) -> str:
    """LitSumm's query for an identifier and its other names: any of them, quoted, in the
    open-access subset with full text, no preprints. (LitSumm adds its ncRNA words, "rna"
    OR "mrna" OR …, to keep out other things with the same name: give them with --query.)"""
    names = " OR ".join(f'"{t.replace(chr(34), "")}"' for t in terms)
    return f"({names}) AND {OPEN_ACCESS_FILTER}"


def mention_pattern(terms: Sequence[str]) -> re.Pattern:
    """A mention of any term as a whole token: not inside a longer identifier or word
    ("MIR21" is not a mention of "MIR2"), case-insensitive as LitScan matches."""
    names = sorted({t.strip() for t in terms if t.strip()}, key=len, reverse=True)
    alternatives = "|".join(re.escape(n) for n in names)
    return re.compile(rf"(?<![\w-])(?:{alternatives})(?![\w]|-\w)", re.IGNORECASE)


@dataclass
class ArticleSentences:
    pmcid: str
    sentences: list[str]
    licence: str
    licence_url: str
    title: str = ""
    pmid: str = ""
    doi: str = ""


@dataclass
class Acquisition:
    source: Source | None
    result: ImportResult
    query: str
    found: int  # search hits
    articles: list[ArticleSentences] = field(default_factory=list)  # validated, with sentences
    left_out: dict[str, str] = field(default_factory=dict)  # PMCID or id -> why


def extract_mentions(text: str, pattern: re.Pattern) -> list[str]:
    """The sentences of a full text that mention a term (core.sentences' splitter)."""
    return [text[a:b] for a, b in split_spans(text) if pattern.search(text[a:b])]


def acquire_sentences(
    *, study: Study, terms: Sequence[str], client: EuropePmcClient, key: str = "", query: str = "", limit: int = 50
) -> Acquisition:
    """LitSumm's acquisition for one identifier (`terms[0]`) and its other names: search,
    fetch each open-access full text, check the mention, keep the sentences mentioning it,
    and import them as one source of the study (key: `key` or the identifier), each sentence
    referenced by its article's PMCID. The source's licence is the articles' common licence,
    or none when they differ (an export then withholds the text); each article's own licence
    is in the source's metadata. All or nothing; nothing is imported when no article has a
    sentence mentioning the term."""
    terms = [t.strip() for t in terms if t and t.strip()]
    if not terms:
        raise ApplicationError("give an identifier or term to look for")
    query = query.strip() or litsumm_query(terms)
    pattern = mention_pattern(terms)
    hits = client.search(query, limit=limit)
    acquisition = Acquisition(source=None, result=ImportResult(), query=query, found=len(hits))
    seen: set[str] = set()
    for hit in hits:
        if not hit.pmcid:
            acquisition.left_out[hit.id or hit.title[:40]] = "no PMCID: no open-access full text"
            continue
        if hit.pmcid in seen:
            continue
        seen.add(hit.pmcid)
        full = client.full_text(hit.pmcid)
        if full is None:
            acquisition.left_out[hit.pmcid] = "Europe PMC has no open-access full text for it"
            continue
        if not full.open_access:
            acquisition.left_out[hit.pmcid] = f"its licence ({full.licence or 'none stated'}) is not an open licence"
            continue
        sentences = extract_mentions(f"{full.title}\n{full.text}", pattern)
        if not sentences:
            acquisition.left_out[hit.pmcid] = "the full text does not mention it (the search matched elsewhere)"
            continue
        acquisition.articles.append(
            ArticleSentences(
                hit.pmcid, sentences, full.licence, full.licence_url, full.title or hit.title, hit.pmid, hit.doi
            )
        )
    if acquisition.articles:
        record, left = source_record(
            study=study, key=key or terms[0], terms=terms, query=query, acquisition=acquisition
        )
        acquisition.result = import_records(lines=[json.dumps(record) + "\n"], only_study=study.slug)
        acquisition.source = Source.objects.get(study=study, key=record["key"])
        if left:
            acquisition.left_out["(length)"] = f"{left} sentence(s) past {MAX_SOURCE_CHARS:,} characters left out"
    return acquisition


def source_record(
    *, study: Study, key: str, terms: Sequence[str], query: str, acquisition: Acquisition
) -> tuple[dict, int]:
    """The JSON Lines source record (docs/import-format.md) and how many sentences did not fit."""
    sentences, used, left = [], 0, 0
    for article in acquisition.articles:
        for text in article.sentences:
            text = " ".join(text.split())
            if used + len(text) + 1 > MAX_SOURCE_CHARS:
                left += 1
                continue
            sentences.append({"text": text, "ref": article.pmcid})
            used += len(text) + 1
    licences = {(a.licence, a.licence_url) for a in acquisition.articles}
    licence, url = licences.pop() if len(licences) == 1 else ("", "")
    return {
        "type": "source",
        "study": study.slug,
        "key": key[:200],
        "title": f"Sentences mentioning {terms[0]}"[:1000],
        "sentences": sentences,
        "licence": licence,
        "licence_url": url,
        "attribution": "Sentences from open-access articles in Europe PMC: "
        + ", ".join(a.pmcid for a in acquisition.articles),
        "metadata": {
            "origin": "Europe PMC",
            "terms": list(terms),
            "query": query,
            "articles": [
                {
                    "pmcid": a.pmcid,
                    "pmid": a.pmid,
                    "doi": a.doi,
                    "title": a.title,
                    "licence": a.licence,
                    "licence_url": a.licence_url,
                    "sentences": len(a.sentences),
                }
                for a in acquisition.articles
            ],
            **({"sentences_left_out": left} if left else {}),
        },
    }, left
