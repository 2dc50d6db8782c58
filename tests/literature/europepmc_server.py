"""A scripted Europe PMC REST server for tests, on 127.0.0.1 and a free port.

It speaks the protocol Europe PMC documents (https://europepmc.org/RestfulWebService),
under the same path (/europepmc/webservices/rest/):

- `GET search?query=…&format=json&resultType=core&pageSize=…&cursorMark=…` answers
  `{"version", "hitCount", "nextCursorMark", "request", "resultList": {"result": [...]}}`;
  cursorMark `*` is the first page; the last page's nextCursorMark is the mark sent
  (Europe PMC's "no more results"). The server's `page_cap` makes pages smaller than asked,
  so tests page with few records.
- `GET {PMCID}/fullTextXML` answers the article's JATS <article> (200, application/xml), or
  404 when the article has no open-access full text.

A queue of replies per endpoint ("search", "fullTextXML") comes first (the last repeats),
for refusals and outages: any status and headers, a delay (a timeout), a dropped connection.
The result records and XML are written here by hand from Europe PMC's documented field
names, not copied from Europe PMC.
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import parse_qsl, urlsplit

from tests import local_server
from tests.local_server import ScriptedServer


@dataclass
class Reply(local_server.Reply):
    content_type: str = "application/json;charset=UTF-8"


@dataclass
class Request:
    endpoint: str  # "search" or "fullTextXML"
    path: str
    params: dict[str, str]
    received_at: float


def result(pmcid: str = "", *, pmid: str = "", doi: str = "", title: str = "A study.", open_access: bool = True,
           source: str = "PMC", licence: str = "cc by", year: str = "2021") -> dict:  # fmt: skip
    """One result of resultType=core, with the fields Europe PMC documents for it."""
    record = {
        "id": pmcid or pmid,
        "source": source if pmcid else "MED",
        "pmid": pmid,
        "pmcid": pmcid,
        "doi": doi,
        "title": title,
        "authorString": "Smith J, Doe A.",
        "journalInfo": {"journal": {"title": "Journal of Tests"}},
        "pubYear": year,
        "isOpenAccess": "Y" if open_access else "N",
        "inEPMC": "Y" if pmcid else "N",
        "license": licence,
        "hasTextMinedTerms": "Y",
    }
    return {k: v for k, v in record.items() if v != ""}


def full_text_xml(pmcid: str, paragraphs: list[str], *, licence_href: str = "http://creativecommons.org/licenses/by/4.0/",
                  title: str = "A full text", pmid: str = "") -> str:  # fmt: skip
    """A JATS <article> as Europe PMC's fullTextXML sends it; `paragraphs` are XML fragments."""
    licence = (
        f'<license xlink:href="{licence_href}"><license-p>This article is distributed under {licence_href}.'
        "</license-p></license>"
        if licence_href
        else ""
    )
    ids = f'<article-id pub-id-type="pmcid">{pmcid}</article-id>'
    ids += f'<article-id pub-id-type="pmid">{pmid}</article-id>' if pmid else ""
    body = "".join(f"<p>{p}</p>" for p in paragraphs)
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        '<article xmlns:xlink="http://www.w3.org/1999/xlink" article-type="research-article">'
        f"<front><journal-meta><journal-title-group><journal-title>Journal of Tests</journal-title>"
        f"</journal-title-group></journal-meta><article-meta>{ids}"
        f"<title-group><article-title>{title}</article-title></title-group>"
        '<contrib-group><contrib contrib-type="author"><name><surname>Smith</surname><given-names>John</given-names>'
        '</name></contrib></contrib-group><pub-date pub-type="epub"><year>2021</year></pub-date>'
        f"<permissions>{licence}</permissions><abstract><p>An abstract.</p></abstract></article-meta></front>"
        f'<body><sec id="s1"><title>Results</title>{body}</sec></body>'
        '<back><ref-list><ref id="r1"><mixed-citation>Other A. MIR21 elsewhere. 2001.</mixed-citation></ref>'
        "</ref-list></back></article>"
    )


def _mark(offset: int) -> str:
    return "AoJ" + base64.urlsafe_b64encode(str(offset).encode()).decode()


def _offset(mark: str) -> int:
    return 0 if mark == "*" else int(base64.urlsafe_b64decode(mark[3:].encode()).decode())


class EuropePmcServer(ScriptedServer):
    url_path = "/europepmc/webservices/rest/"

    def __init__(
        self,
        *,
        results: list[dict] | None = None,
        texts: dict[str, str] | None = None,
        replies: dict[str, list[Reply | Callable[[Request], Reply]]] | None = None,
        page_cap: int = 1000,
    ):
        self._script(replies)
        self.results = list(results or [])
        self.texts = dict(texts or {})
        self.page_cap = page_cap
        self._listen(self._handler())

    def parse(self, method: str, path: str, body: bytes) -> Request:
        url = urlsplit(path)
        endpoint = "search" if url.path.endswith("/search") else url.path.rsplit("/", 1)[-1]
        return Request(endpoint, url.path, dict(parse_qsl(url.query, keep_blank_values=True)), time.monotonic())

    def choose(self, request: Request) -> Reply:
        item = self.scripted(request.endpoint, request)
        if item is not None:
            return item
        if request.endpoint == "search":
            return self.search(request)
        pmcid = request.path.rsplit("/", 2)[-2]
        if pmcid in self.texts:
            return Reply(self.texts[pmcid], content_type="application/xml;charset=UTF-8")
        return Reply("", status=404, content_type="text/plain")

    def search(self, request: Request) -> Reply:
        p = request.params
        if p.get("format") != "json" or not p.get("query"):
            return Reply(json.dumps({"errCode": 400, "errMsg": "bad request"}), status=400)
        start = _offset(p.get("cursorMark", "*"))
        size = min(int(p.get("pageSize", "25")), self.page_cap)
        page = self.results[start : start + size]
        end = start + len(page)
        body = {
            "version": "6.9",
            "hitCount": len(self.results),
            "nextCursorMark": _mark(end) if end < len(self.results) else p.get("cursorMark", "*"),
            "request": {
                "queryString": p["query"],
                "resultType": p.get("resultType", "lite"),
                "cursorMark": p.get("cursorMark", "*"),
                "pageSize": size,
                "sort": "",
            },  # fmt: skip
            "resultList": {"result": page},
        }
        return Reply(json.dumps(body))
