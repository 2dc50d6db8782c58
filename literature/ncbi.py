"""A thin, well-behaved client of NCBI's E-utilities: PubMed search and records, PMC texts.

Why not Biopython's `Bio.Entrez`, the field's standard client: it cannot be pointed at a
local server cleanly. Each of its functions hard-codes its eutils.ncbi.nlm.nih.gov URL;
its retries never read Retry-After; its rate limiter is an unlocked module global and
email, tool and api_key are module globals, so two clients (or threads) share and race
on them; and its parser validates against DTDs, downloading one it lacks from the URL in
the document. Our tests run the real client over HTTP against a scripted server
(tests/literature/ncbi_server.py), so this is a small client on httpx2 (the HTTP client
openai depends on; the `httpx` name is not installed) and defusedxml instead.

Choices:
- Every request is a form POST: efetch as NCBI recommends for long id lists, esearch too,
  so the API key is never in a URL (which httpx2 logs at INFO and proxies record). The
  key is never logged nor put in an error message.
- Rate: request starts at most 3 a second without a key, 10 with one (NCBI's limits; we
  aim at 90 % of them, core.ratelimit.HEADROOM), by one limiter per base URL and key
  shared by every process through Redis when one is configured (RATE_LIMIT_REDIS_URL, or
  a Redis broker), else by the process, so two clients or two workers do not double it.
- Retries on 429, 5xx, timeouts and dropped connections, exponential backoff with jitter;
  Retry-After (seconds or HTTP date) wins, capped at backoff_max. Other 4xx fail at once.
  Giving up, or a 200 carrying an error (`<ERROR>`, a JSON "error"), raises NcbiError.
  ErrorList/WarningList in esearch are soft (NCBI sends PhraseNotFound with zero hits):
  they become `SearchResult.warnings`.
- XML through defusedxml: the DOCTYPE every PubMed answer has is accepted (its DTD is
  never fetched); entity declarations (billion laughs) are refused.
- Citations come from the article's own record, never from its ReferenceList.

Settings are read from the environment when a client is built (`from_environment`):
NCBI_EUTILS_URL, NCBI_API_KEY, NCBI_TOOL, NCBI_EMAIL, NCBI_TIMEOUT (s), NCBI_MAX_RETRIES.
"""

from __future__ import annotations

import datetime
import json
import logging
import re
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from urllib.parse import urlsplit
from xml.etree.ElementTree import Element, ParseError

import defusedxml.ElementTree as SafeET
import httpx2
from defusedxml import DefusedXmlException
from django.core.exceptions import ImproperlyConfigured

from core.env import env_float, env_int, env_str
from core.exceptions import ApplicationError
from core.ratelimit import HEADROOM, Pacer, key_name, pacer
from core.retry import RetriesExhausted, send_politely

logger = logging.getLogger(__name__)

DEFAULT_URL = "https://eutils.ncbi.nlm.nih.gov/entrez/eutils/"
DEFAULT_TOOL = "litsumm-ratings"
MAX_BATCH = 200  # NCBI: use POST above ~200 ids; batches also keep responses small
# NCBI requires mindate with maxdate; PubMed's own translations use 3000 as "no limit".
EARLIEST, LATEST = "1800/01/01", "3000/12/31"
XLINK = "{http://www.w3.org/1999/xlink}"
ALI = "{http://www.niso.org/schemas/ali/1.0/}"
_DATE = re.compile(r"\d{4}(/\d{1,2}(/\d{1,2})?)?")


class NcbiError(ApplicationError):
    """NCBI did not answer usefully (after the retries, when retrying made sense)."""

    code = "ncbi_error"
    http_status = 502


@dataclass(frozen=True)
class NcbiSettings:
    base_url: str
    api_key: str = field(repr=False)
    tool: str
    email: str
    timeout: float
    max_retries: int


def ncbi_settings() -> NcbiSettings:
    """The NCBI_* variables, read now (never at import)."""
    timeout = env_float("NCBI_TIMEOUT", 30.0)
    if timeout <= 0:
        raise ImproperlyConfigured(f"NCBI_TIMEOUT must be positive, got {timeout}")
    return NcbiSettings(
        base_url=env_str("NCBI_EUTILS_URL", DEFAULT_URL),
        api_key=env_str("NCBI_API_KEY"),
        tool=env_str("NCBI_TOOL", DEFAULT_TOOL),
        email=env_str("NCBI_EMAIL"),
        timeout=timeout,
        max_retries=env_int("NCBI_MAX_RETRIES", 4, minimum=0),
    )


@dataclass(frozen=True)
class SearchResult:
    count: int
    ids: tuple[str, ...]
    query_translation: str
    warnings: tuple[str, ...]


@dataclass(frozen=True)
class Article:
    pmid: str
    title: str
    abstract: str
    authors: tuple[str, ...]
    journal: str
    year: int | None
    doi: str
    pmcid: str
    publication_types: tuple[str, ...]

    def citation(self) -> str:
        """Vancouver-like, from this record alone: "Smith J, Doe A, Roe B, et al. Title.
        Journal. 2020. doi:10.1/x. PMID: 123". Missing parts are left out."""
        names = ", ".join(self.authors[:3]) + (", et al" if len(self.authors) > 3 else "")
        parts = [names, self.title, self.journal, str(self.year or ""), f"doi:{self.doi}" if self.doi else ""]
        text = [p if p.endswith((".", "?", "!")) else p + "." for p in parts if p]
        return " ".join([*text, f"PMID: {self.pmid}"] if self.pmid else text)


@dataclass(frozen=True)
class FullText:
    pmcid: str
    title: str
    text: str
    licence: str
    licence_url: str
    open_access: bool
    # The article's own record in its JATS front matter (never its reference list).
    pmid: str = ""
    doi: str = ""
    abstract: str = ""
    journal: str = ""
    year: int | None = None
    authors: tuple[str, ...] = ()

    def citation(self) -> str:
        return Article(
            pmid=self.pmid,
            title=self.title,
            abstract="",
            authors=self.authors,
            journal=self.journal,
            year=self.year,
            doi=self.doi,
            pmcid=self.pmcid,
            publication_types=(),
        ).citation()


def shared_limiter(base_url: str, api_key: str) -> Pacer:
    """One limiter per (endpoint, key): NCBI counts requests per key (or per address
    without one), not per client object. Shared by every process through Redis when one
    is configured (core.ratelimit: RATE_LIMIT_REDIS_URL, or a Redis CELERY_BROKER_URL),
    else by this process's threads."""
    return pacer(key_name("eutils", base_url, api_key))


class EutilsClient:
    """esearch and efetch over HTTP; see the module docstring for the choices."""

    def __init__(
        self,
        *,
        base_url: str = DEFAULT_URL,
        api_key: str = "",
        tool: str = DEFAULT_TOOL,
        email: str = "",
        timeout: float = 30.0,
        max_retries: int = 4,
        backoff_base: float = 1.0,
        backoff_max: float = 30.0,
        requests_per_second: float | None = None,
        batch_size: int = MAX_BATCH,
    ):
        if not 1 <= batch_size <= MAX_BATCH:
            raise ValueError(f"batch_size must be between 1 and {MAX_BATCH}, got {batch_size}")
        self.base_url = base_url.rstrip("/") + "/"
        self._api_key = api_key
        self.tool, self.email = tool, email
        self.max_retries, self.backoff_base, self.backoff_max = max_retries, backoff_base, backoff_max
        self.requests_per_second = requests_per_second or (10.0 if api_key else 3.0)
        self.batch_size = batch_size
        self._limiter = shared_limiter(self.base_url, api_key)
        self._http = httpx2.Client(timeout=httpx2.Timeout(timeout))

    @classmethod
    def from_environment(cls) -> EutilsClient:
        return cls(**asdict(ncbi_settings()))

    def __enter__(self) -> EutilsClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def esearch(
        self,
        term: str,
        *,
        db: str = "pubmed",
        retmax: int = 20,
        mindate: datetime.date | str | None = None,
        maxdate: datetime.date | str | None = None,
        datetype: str = "pdat",
        sort: str = "relevance",
    ) -> SearchResult:
        """Ids matching `term`, best first. NCBI needs both dates or neither: a lone
        maxdate gets mindate 1800/01/01, a lone mindate gets maxdate 3000/12/31. Zero hits
        is a normal result (count 0), whatever ErrorList NCBI adds to say so."""
        params = {"db": db, "term": term, "retmax": str(retmax), "sort": sort, "retmode": "xml"}
        if mindate is not None or maxdate is not None:
            params["datetype"] = datetype
            params["mindate"] = _date_param(mindate, EARLIEST)
            params["maxdate"] = _date_param(maxdate, LATEST)
        root = self._xml("esearch.fcgi", params, expect="eSearchResult", what=f"the {db} search")
        warnings = [f"{e.tag}: {_text(e)}" for lst in ("ErrorList", "WarningList") for e in root.findall(f"{lst}/*")]
        return SearchResult(
            count=int(root.findtext("Count") or 0),
            ids=tuple(_text(e) for e in root.findall("IdList/Id")),
            query_translation=_text(root.find("QueryTranslation")),
            warnings=tuple(warnings),
        )

    def fetch_articles(self, pmids: Iterable[str | int]) -> list[Article]:
        """PubMed records in the order asked for (each once); ids NCBI does not return
        (deleted, or a book chapter) are missing from the list."""
        wanted = _unique(str(p).strip() for p in pmids)
        found: dict[str, Article] = {}
        for batch in _batches(wanted, self.batch_size):
            what = f"PubMed records ({len(batch)} ids)"
            root = self._efetch("pubmed", batch, expect="PubmedArticleSet", what=what)
            for record in root.findall("PubmedArticle"):
                article = _article(record)
                found[article.pmid] = article
        return [found[p] for p in wanted if p in found]

    def fetch_full_texts(self, pmcids: Iterable[str | int]) -> list[FullText]:
        """PMC articles ("PMC123" or "123") in the order asked for; missing ones left out."""
        wanted = _unique(_pmcid(str(p)) for p in pmcids)
        found: dict[str, FullText] = {}
        for batch in _batches(wanted, self.batch_size):
            numbers = [p.removeprefix("PMC") for p in batch]
            root = self._efetch("pmc", numbers, expect="pmc-articleset", what=f"PMC articles ({len(batch)} ids)")
            for record in root.findall("article"):
                text = _full_text(record)
                found[text.pmcid] = text
        return [found[p] for p in wanted if p in found]

    def _efetch(self, db: str, ids: list[str], *, expect: str, what: str) -> Element:
        return self._xml("efetch.fcgi", {"db": db, "id": ",".join(ids), "retmode": "xml"}, expect=expect, what=what)

    def _xml(self, utility: str, params: dict[str, str], *, expect: str, what: str) -> Element:
        root = self._parse(self._post(utility, params), what)
        if root.tag != expect:
            raise NcbiError(f"NCBI answered <{root.tag}> instead of <{expect}> for {what}")
        return root

    def _post(self, utility: str, params: dict[str, str]) -> bytes:
        url = self.base_url + utility
        path = urlsplit(url).path
        data = {**params, "tool": self.tool, "email": self.email}
        if self._api_key:
            data["api_key"] = self._api_key
        try:
            response, attempts = send_politely(
                lambda: self._http.post(url, data=data),
                pace=self._pace,
                max_retries=self.max_retries,
                backoff_base=self.backoff_base,
                backoff_max=self.backoff_max,
                label=f"NCBI {path}",
            )
        except RetriesExhausted as exc:
            raise NcbiError(f"NCBI {path} failed after {exc.attempts} attempts; last: {exc.failure}") from None
        if response.status_code != 200:
            detail = self._redact(response.text[:200].strip())
            raise NcbiError(
                f"NCBI {path} answered HTTP {response.status_code} (attempt {attempts}, not retried): {detail}"
            )
        return response.content

    def _pace(self) -> None:
        # HEADROOM: aim under NCBI's limit, which it counts at arrival (core.ratelimit).
        self._limiter.wait(1.0 / (self.requests_per_second * HEADROOM))

    def _parse(self, body: bytes, what: str) -> Element:
        if body.lstrip()[:1] in (b"{", b"["):
            raise NcbiError(f"NCBI answered JSON instead of XML for {what}: {self._redact(_json_error(body))}")
        try:
            root = SafeET.fromstring(body)
        except DefusedXmlException as exc:
            raise NcbiError(f"NCBI sent unsafe XML for {what} ({type(exc).__name__}); refused") from None
        except ParseError as exc:
            raise NcbiError(f"NCBI sent malformed XML for {what}: {exc}") from None
        error = root if root.tag == "ERROR" else root.find("ERROR")
        if error is not None:
            raise NcbiError(f"NCBI reported an error for {what}: {self._redact(_text(error))}")
        return root

    def _redact(self, text: str) -> str:
        return text.replace(self._api_key, "[api key]") if self._api_key else text


def _date_param(value: datetime.date | str | None, default: str) -> str:
    if value is None:
        return default
    if isinstance(value, datetime.date):
        return value.strftime("%Y/%m/%d")
    if not _DATE.fullmatch(value):
        raise ValueError(f"dates are YYYY/MM/DD (or YYYY, YYYY/MM), got {value!r}")
    return value


def _json_error(body: bytes) -> str:
    try:
        payload = json.loads(body)
    except ValueError:
        return "unreadable JSON"
    return str(payload.get("error", "no error given")) if isinstance(payload, dict) else "unexpected JSON"


def _unique(ids: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(i for i in ids if i))


def _batches(ids: list[str], size: int) -> Iterator[list[str]]:
    for start in range(0, len(ids), size):
        yield ids[start : start + size]


def _text(element: Element | None) -> str:
    """All text inside, inline markup (<i>, <sup>) kept as text, whitespace collapsed."""
    return " ".join("".join(element.itertext()).split()) if element is not None else ""


def _pmcid(raw: str) -> str:
    digits = raw.strip().upper().removeprefix("PMC")
    return f"PMC{digits}" if digits else ""


def _article(record: Element) -> Article:
    """One PubmedArticle. The article's own ids are PubmedData/ArticleIdList (a direct
    child); each Reference of PubmedData/ReferenceList has its own ArticleIdList, which
    must never be read as the article's (Clinfo.ai's original bug)."""
    article = record.find("MedlineCitation/Article")
    if article is None:  # not valid PubMed XML; read what there is
        article = Element("Article")
    own_ids = {e.get("IdType"): _text(e) for e in record.findall("PubmedData/ArticleIdList/ArticleId")}
    doi = own_ids.get("doi") or _text(article.find("ELocationID[@EIdType='doi']"))
    return Article(
        pmid=_text(record.find("MedlineCitation/PMID")),
        title=_text(article.find("ArticleTitle")),
        abstract=_abstract(article),
        authors=tuple(filter(None, (_author(a) for a in article.findall("AuthorList/Author")))),
        journal=_text(article.find("Journal/Title")) or _text(article.find("Journal/ISOAbbreviation")),
        year=_year(article),
        doi=doi,
        pmcid=_pmcid(own_ids.get("pmc", "")),
        publication_types=tuple(_text(t) for t in article.findall("PublicationTypeList/PublicationType")),
    )


def _abstract(article: Element) -> str:
    """Structured abstracts as "LABEL: text" paragraphs separated by blank lines."""
    paragraphs = []
    for part in article.findall("Abstract/AbstractText"):
        text, label = _text(part), (part.get("Label") or "").strip()
        if text:
            paragraphs.append(f"{label}: {text}" if label else text)
    return "\n\n".join(paragraphs)


def _author(author: Element) -> str:
    if author.get("ValidYN") == "N":
        return ""  # an erratum's withdrawn spelling, listed beside the valid one
    collective = _text(author.find("CollectiveName"))
    if collective:
        return collective
    initials = _text(author.find("Initials")) or "".join(w[0] for w in _text(author.find("ForeName")).split())
    return " ".join(filter(None, (_text(author.find("LastName")), initials)))


def _year(article: Element) -> int | None:
    """PubDate/Year, else the first year of a MedlineDate ("1998 Dec-1999 Jan"), else the
    electronic ArticleDate."""
    for path in ("Journal/JournalIssue/PubDate/Year", "Journal/JournalIssue/PubDate/MedlineDate", "ArticleDate/Year"):
        match = re.search(r"\b\d{4}\b", _text(article.find(path)))
        if match:
            return int(match.group())
    return None


def _full_text(record: Element) -> FullText:
    meta = record.find("front/article-meta")
    ids = {e.get("pub-id-type"): _text(e) for e in meta.findall("article-id")} if meta is not None else {}
    licence, url = _licence(meta.find("permissions/license") if meta is not None else None)
    body = record.find("body")
    journal = record.find("front/journal-meta")
    year = None
    if meta is not None:
        for date in meta.findall("pub-date"):
            found = re.search(r"\b\d{4}\b", _text(date.find("year")))
            if found:
                year = int(found.group())
                break
    authors = []
    for contrib in meta.findall("contrib-group/contrib") if meta is not None else []:
        if contrib.get("contrib-type", "author") != "author":
            continue
        name = contrib.find("name")
        if name is not None:
            initials = "".join(w[0] for w in _text(name.find("given-names")).replace("-", " ").split())
            authors.append(" ".join(filter(None, (_text(name.find("surname")), initials))))
        elif _text(contrib.find("collab")):
            authors.append(_text(contrib.find("collab")))
    abstract = meta.find("abstract") if meta is not None else None
    return FullText(
        pmcid=_pmcid(ids.get("pmcid") or ids.get("pmc") or ""),
        title=_text(meta.find("title-group/article-title")) if meta is not None else "",
        text="\n\n".join(_body_lines(body)) if body is not None else "",
        licence=licence,
        licence_url=url,
        open_access=licence.startswith("CC") or licence == "Public Domain",
        pmid=ids.get("pmid", ""),
        doi=ids.get("doi", ""),
        abstract="\n\n".join(_body_lines(abstract)) if abstract is not None else "",
        journal=_text(journal.find("journal-title-group/journal-title")) or _text(journal.find("journal-title"))
        if journal is not None
        else "",
        year=year,
        authors=tuple(authors),
    )


def _body_lines(element: Element) -> Iterator[str]:
    """Section titles and paragraphs in reading order; figures and tables left out."""
    for child in element:
        if child.tag == "sec":
            title = _text(child.find("title"))
            if title:
                yield title
            yield from _body_lines(child)
        elif child.tag == "p" and _text(child):
            yield _text(child)


def _licence(licence: Element | None) -> tuple[str, str]:
    """(short name, URL). The URL is read from <ali:license_ref> (JATS 1.2+), the licence's
    xlink:href, a link inside its text, or a Creative Commons address written in the text;
    the name from that URL, else from license-type ("cc-by" → "CC BY"), else license-type
    as given ("open-access" without a CC licence: reuse terms unknown, so not open)."""
    if licence is None:
        return "", ""
    linked = [e.get(f"{XLINK}href", "") for e in licence.iter()]
    written = [u.rstrip(".,;)") for u in re.findall(r"https?://creativecommons\.org/\S+", _text(licence))]
    urls = [_text(licence.find(f"{ALI}license_ref")), *linked, *written]
    url = next((u.strip() for u in urls if u.strip()), "")
    kind = (licence.get("license-type") or "").strip()
    return _cc_name(url) or _cc_name(kind) or kind, url


def _cc_name(value: str) -> str:
    lowered = value.lower().replace("_", "-")
    if "publicdomain/zero" in lowered or re.fullmatch(r"cc[- ]?0|cc[- ]?zero", lowered):
        return "CC0"
    if "publicdomain/mark" in lowered or lowered in ("public-domain", "public domain"):
        return "Public Domain"
    match = re.search(r"creativecommons\.org/licenses/([a-z-]+)(?:/(\d+(?:\.\d+)?))?", lowered)
    if match is None:
        match = re.fullmatch(r"cc[- ]((?:by)(?:-(?:nc|sa|nd))*)(?:[- ](\d+(?:\.\d+)?))?", lowered.replace(" ", "-", 1))
    if match is None:
        return ""
    return " ".join(filter(None, ("CC", match.group(1).upper(), match.group(2))))
