"""A scripted NCBI E-utilities server for tests, on 127.0.0.1 and a free port.

The real client (literature.ncbi) talks HTTP to it at `server.base_url`, which ends in
/entrez/eutils/ as NCBI's does. Each request is routed by its utility (esearch.fcgi,
efetch.fcgi). A queue of replies per utility comes first (the last one repeats); with no
queue, efetch answers from the server's small databases (`pubmed`: PMID → PubmedArticle
XML; `pmc`: numeric PMC id → <article> XML), leaving out ids it does not hold, as NCBI
does, and in ascending id order rather than the order asked (NCBI promises no order).
Replies can be slow, fail with any status and headers, or drop the connection.

The builders below write XML in NCBI's documented shapes (eSearchResult; PubmedArticleSet
with its DOCTYPE, as efetch db=pubmed retmode=xml sends it; pmc-articleset of JATS
<article>s), written here by hand from the DTDs' element names, not copied from NCBI.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from urllib.parse import parse_qsl, urlsplit
from xml.sax.saxutils import escape

from tests import local_server
from tests.local_server import ScriptedServer


@dataclass
class Reply(local_server.Reply):
    content_type: str = "text/xml; charset=UTF-8"


@dataclass
class Request:
    method: str
    utility: str
    query: str  # the raw URL query string
    params: dict[str, str]  # query and form fields together
    received_at: float

    @property
    def ids(self) -> list[str]:
        return [i for i in self.params.get("id", "").split(",") if i]


Script = Callable[[Request], Reply]


class NcbiServer(ScriptedServer):
    url_path = "/entrez/eutils/"

    def __init__(
        self,
        *,
        replies: dict[str, list[Reply | Script]] | None = None,
        pubmed: dict[str, str] | None = None,
        pmc: dict[str, str] | None = None,
    ):
        self._script(replies)
        self.pubmed = dict(pubmed or {})
        self.pmc = dict(pmc or {})
        self._listen(self._handler())

    def parse(self, method: str, path: str, body: bytes) -> Request:
        url = urlsplit(path)
        params = dict(parse_qsl(url.query, keep_blank_values=True))
        params.update(parse_qsl(body.decode("utf-8"), keep_blank_values=True))
        return Request(method, url.path.rsplit("/", 1)[-1], url.query, params, time.monotonic())

    def choose(self, request: Request) -> Reply:
        item = self.scripted(request.utility, request)
        if item is not None:
            return item
        if request.utility == "efetch.fcgi" and request.params.get("db") == "pubmed":
            return Reply(pubmed_set(self.pubmed[i] for i in sorted(request.ids, key=int) if i in self.pubmed))
        if request.utility == "efetch.fcgi" and request.params.get("db") == "pmc":
            return Reply(pmc_set(self.pmc[i] for i in sorted(request.ids, key=int) if i in self.pmc))
        return Reply(status=500, body=f"no script for {request.utility}")


def esearch_xml(
    ids: Iterable[str] = (),
    *,
    count: int | None = None,
    translation: str = "",
    errors: Iterable[tuple[str, str]] = (),
    warnings: Iterable[tuple[str, str]] = (),
) -> str:
    """An eSearchResult; `errors`/`warnings` are (tag, text) pairs for ErrorList/WarningList.
    The TranslationStack carries a per-term Count of its own, as NCBI's does."""
    ids = list(ids)
    id_list = "".join(f"<Id>{escape(i)}</Id>" for i in ids)
    error_list = "".join(f"<{t}>{escape(x)}</{t}>" for t, x in errors)
    warning_list = "".join(f"<{t}>{escape(x)}</{t}>" for t, x in warnings)
    return (
        '<?xml version="1.0" encoding="UTF-8" ?>\n'
        '<!DOCTYPE eSearchResult PUBLIC "-//NLM//DTD esearch 20060628//EN" '
        '"https://eutils.ncbi.nlm.nih.gov/eutils/dtd/20060628/esearch.dtd">\n'
        f"<eSearchResult><Count>{len(ids) if count is None else count}</Count>"
        f"<RetMax>{len(ids)}</RetMax><RetStart>0</RetStart><IdList>{id_list}</IdList>"
        "<TranslationSet/><TranslationStack><TermSet><Term>term[All Fields]</Term><Field>All Fields</Field>"
        "<Count>987654</Count><Explode>N</Explode></TermSet><OP>GROUP</OP></TranslationStack>"
        f"<QueryTranslation>{escape(translation)}</QueryTranslation>"
        + (f"<ErrorList>{error_list}</ErrorList>" if error_list else "")
        + (f"<WarningList>{warning_list}</WarningList>" if warning_list else "")
        + "</eSearchResult>\n"
    )


def pubmed_article(
    pmid: str,
    *,
    title: str = "A trial of something.",
    abstract: Iterable[tuple[str | None, str]] = ((None, "Plain abstract."),),
    authors: Iterable[tuple[str, str, str] | str] = (("Smith", "John", "J"),),
    journal: str = "Journal of Tests",
    pub_date: str = "<Year>2020</Year><Month>Feb</Month>",
    article_date: str = "",
    doi: str = "",
    pmcid: str = "",
    publication_types: Iterable[str] = ("Journal Article",),
    references: Iterable[tuple[str, str, str]] = (),
) -> str:
    """One PubmedArticle. `title` and abstract texts are XML fragments (inline markup
    allowed); abstract parts are (Label or None, text); an author is (LastName, ForeName,
    Initials) or a CollectiveName; a reference is (its PMID, its DOI, its citation)."""
    parts = list(abstract)
    abstract_xml = "".join(
        f'<AbstractText Label="{label}" NlmCategory="{label}">{text}</AbstractText>'
        if label
        else f"<AbstractText>{text}</AbstractText>"
        for label, text in parts
    )
    author_xml = "".join(
        f'<Author ValidYN="Y"><CollectiveName>{escape(a)}</CollectiveName></Author>'
        if isinstance(a, str)
        else f'<Author ValidYN="Y"><LastName>{a[0]}</LastName><ForeName>{a[1]}</ForeName><Initials>{a[2]}</Initials>'
        "<AffiliationInfo><Affiliation>Department of Tests, Somewhere.</Affiliation></AffiliationInfo></Author>"
        for a in authors
    )
    types = "".join(f'<PublicationType UI="D000000">{t}</PublicationType>' for t in publication_types)
    ref_xml = "".join(
        f'<Reference><Citation>{escape(c)}</Citation><ArticleIdList><ArticleId IdType="pubmed">{p}</ArticleId>'
        f'<ArticleId IdType="doi">{escape(d)}</ArticleId></ArticleIdList></Reference>'
        for p, d, c in references
    )
    own_ids = f'<ArticleId IdType="pubmed">{pmid}</ArticleId>'
    own_ids += f'<ArticleId IdType="doi">{escape(doi)}</ArticleId>' if doi else ""
    own_ids += f'<ArticleId IdType="pmc">{pmcid}</ArticleId>' if pmcid else ""
    return (
        f'<PubmedArticle><MedlineCitation Status="MEDLINE" Owner="NLM"><PMID Version="1">{pmid}</PMID>'
        "<DateCompleted><Year>2021</Year><Month>03</Month><Day>01</Day></DateCompleted>"
        '<Article PubModel="Print-Electronic"><Journal><ISSN IssnType="Electronic">1234-5678</ISSN>'
        f'<JournalIssue CitedMedium="Internet"><Volume>12</Volume><Issue>3</Issue><PubDate>{pub_date}</PubDate>'
        f"</JournalIssue><Title>{escape(journal)}</Title><ISOAbbreviation>J Tests</ISOAbbreviation></Journal>"
        f"<ArticleTitle>{title}</ArticleTitle><Pagination><MedlinePgn>1-10</MedlinePgn></Pagination>"
        + (f'<ELocationID EIdType="doi" ValidYN="Y">{escape(doi)}</ELocationID>' if doi else "")
        + (
            f"<Abstract>{abstract_xml}<CopyrightInformation>(c) The authors.</CopyrightInformation></Abstract>"
            if parts
            else ""
        )
        + f'<AuthorList CompleteYN="Y">{author_xml}</AuthorList><Language>eng</Language>'
        f"<PublicationTypeList>{types}</PublicationTypeList>"
        + (f'<ArticleDate DateType="Electronic">{article_date}</ArticleDate>' if article_date else "")
        + "</Article><MedlineJournalInfo><Country>England</Country><MedlineTA>J Tests</MedlineTA></MedlineJournalInfo>"
        '<CommentsCorrectionsList><CommentsCorrections RefType="CommentIn"><RefSource>Other J. 2021</RefSource>'
        '<PMID Version="1">99999999</PMID></CommentsCorrections></CommentsCorrectionsList></MedlineCitation>'
        '<PubmedData><History><PubMedPubDate PubStatus="pubmed"><Year>2020</Year><Month>1</Month><Day>2</Day>'
        "</PubMedPubDate></History><PublicationStatus>ppublish</PublicationStatus>"
        f"<ArticleIdList>{own_ids}</ArticleIdList>"
        + (f"<ReferenceList>{ref_xml}</ReferenceList>" if ref_xml else "")
        + "</PubmedData></PubmedArticle>"
    )


def pubmed_set(articles: Iterable[str]) -> str:
    return (
        '<?xml version="1.0" ?>\n'
        '<!DOCTYPE PubmedArticleSet PUBLIC "-//NLM//DTD PubMedArticle, 1st January 2025//EN" '
        '"https://dtd.nlm.nih.gov/ncbi/pubmed/out/pubmed_250101.dtd">\n'
        f"<PubmedArticleSet>{''.join(articles)}</PubmedArticleSet>\n"
    )


def pmc_article(
    pmcid: str,
    *,
    title: str = "A full text",
    licence: str = "",
    sections: Iterable[tuple[str, Iterable[str]]] | None = (("Introduction", ("First paragraph.",)),),
    id_type: str = "pmcid",
) -> str:
    """A JATS <article>: `licence` is the XML of its <license> element (or ""); sections are
    (title, paragraphs as XML fragments); sections=None writes no <body> (abstract only)."""
    body = ""
    if sections is not None:
        secs = "".join(
            f'<sec id="s{n}"><title>{t}</title>{"".join(f"<p>{p}</p>" for p in ps)}'
            '<fig id="f1"><label>Figure 1</label><caption><p>A figure caption.</p></caption></fig></sec>'
            for n, (t, ps) in enumerate(sections, start=1)
        )
        body = f"<body>{secs}</body>"
    return (
        '<article xmlns:xlink="http://www.w3.org/1999/xlink" xmlns:mml="http://www.w3.org/1998/Math/MathML" '
        'xmlns:ali="http://www.niso.org/schemas/ali/1.0/" article-type="research-article" dtd-version="1.3">'
        '<front><journal-meta><journal-id journal-id-type="nlm-ta">J Tests</journal-id></journal-meta>'
        f'<article-meta><article-id pub-id-type="{id_type}">{pmcid}</article-id>'
        '<article-id pub-id-type="pmid">12345</article-id>'
        f"<title-group><article-title>{title}</article-title></title-group>"
        f"<permissions><copyright-statement>(c) 2021 The Authors</copyright-statement>{licence}</permissions>"
        "<abstract><p>The abstract.</p></abstract></article-meta></front>"
        f'{body}<back><ref-list><ref id="r1"><mixed-citation>Other A. Other. 2001.</mixed-citation></ref>'
        "</ref-list></back></article>"
    )


def pmc_set(articles: Iterable[str]) -> str:
    return (
        '<?xml version="1.0" ?>\n'
        '<!DOCTYPE pmc-articleset PUBLIC "-//NLM//DTD ARTICLE SET 2.0//EN" '
        '"https://dtd.nlm.nih.gov/ncbi/pmc/articleset/nlm-articleset-2.0.dtd">\n'
        f"<pmc-articleset>{''.join(articles)}</pmc-articleset>\n"
    )
