"""The NCBI client, run for real over HTTP against a scripted E-utilities server.

Timing assertions are lower bounds only (a loaded machine is slower, never faster), with
a small tolerance for when the server stamps a request's arrival.
"""

from __future__ import annotations

import datetime
import email.utils
import json
import logging
import threading
import time

import pytest
from django.core.exceptions import ImproperlyConfigured

from literature.ncbi import Article, EutilsClient, NcbiError, ncbi_settings
from tests.literature.ncbi_server import (
    NcbiServer,
    Reply,
    esearch_xml,
    pmc_article,
    pmc_set,
    pubmed_article,
)

TOLERANCE = 0.05
KEY = "secret-ncbi-key-0123456789"

# A record in the shape efetch db=pubmed retmode=xml sends (element names from NLM's
# PubMed DTD), written for this test: a structured abstract with inline markup, more
# than three authors, and a ReferenceList whose entries carry their own PMIDs and DOIs.
REAL_SHAPED = """<?xml version="1.0" ?>
<!DOCTYPE PubmedArticleSet PUBLIC "-//NLM//DTD PubMedArticle, 1st January 2025//EN" "https://dtd.nlm.nih.gov/ncbi/pubmed/out/pubmed_250101.dtd">
<PubmedArticleSet>
<PubmedArticle>
  <MedlineCitation Status="MEDLINE" Owner="NLM" IndexingMethod="Automated">
    <PMID Version="1">36000001</PMID>
    <Article PubModel="Print-Electronic">
      <Journal>
        <JournalIssue CitedMedium="Internet"><Volume>53</Volume><Issue>7</Issue>
          <PubDate><Year>2022</Year><Month>Jul</Month></PubDate></JournalIssue>
        <Title>Stroke</Title><ISOAbbreviation>Stroke</ISOAbbreviation>
      </Journal>
      <ArticleTitle>Early anticoagulation after stroke with <i>atrial fibrillation</i>:
        a systematic review.</ArticleTitle>
      <ELocationID EIdType="doi" ValidYN="Y">10.1000/own.2022.1</ELocationID>
      <Abstract>
        <AbstractText Label="BACKGROUND" NlmCategory="BACKGROUND">Timing is <b>debated</b>.</AbstractText>
        <AbstractText Label="RESULTS" NlmCategory="RESULTS">Bleeding did not increase
          (OR 0.9; 95% CI 0.7-1.1).</AbstractText>
        <CopyrightInformation>(c) 2022 The Authors.</CopyrightInformation>
      </Abstract>
      <AuthorList CompleteYN="Y">
        <Author ValidYN="Y"><LastName>Smith</LastName><ForeName>Jane A</ForeName><Initials>JA</Initials></Author>
        <Author ValidYN="Y"><LastName>Doe</LastName><ForeName>Alan</ForeName><Initials>A</Initials></Author>
        <Author ValidYN="Y"><CollectiveName>Stroke Trials Group</CollectiveName></Author>
        <Author ValidYN="Y"><LastName>Roe</LastName><ForeName>Beth</ForeName><Initials>B</Initials></Author>
      </AuthorList>
      <PublicationTypeList>
        <PublicationType UI="D016428">Journal Article</PublicationType>
        <PublicationType UI="D000078182">Systematic Review</PublicationType>
      </PublicationTypeList>
    </Article>
    <CommentsCorrectionsList><CommentsCorrections RefType="CommentIn">
      <RefSource>Lancet. 2023</RefSource><PMID Version="1">37000002</PMID>
    </CommentsCorrections></CommentsCorrectionsList>
  </MedlineCitation>
  <PubmedData>
    <PublicationStatus>ppublish</PublicationStatus>
    <ArticleIdList>
      <ArticleId IdType="pubmed">36000001</ArticleId>
      <ArticleId IdType="doi">10.1000/own.2022.1</ArticleId>
    </ArticleIdList>
    <ReferenceList>
      <Reference><Citation>First R. An older trial. Neurology. 2001;1:1.</Citation>
        <ArticleIdList><ArticleId IdType="doi">10.9999/ref.first</ArticleId>
        <ArticleId IdType="pubmed">11111111</ArticleId><ArticleId IdType="pmc">PMC1111</ArticleId>
        </ArticleIdList></Reference>
      <Reference><Citation>Second S. Another. Stroke. 2010;2:2.</Citation>
        <ArticleIdList><ArticleId IdType="pubmed">22222222</ArticleId></ArticleIdList></Reference>
    </ReferenceList>
  </PubmedData>
</PubmedArticle>
</PubmedArticleSet>
"""

BILLION_LAUGHS = """<?xml version="1.0"?>
<!DOCTYPE PubmedArticleSet [
 <!ENTITY lol "lol">
 <!ENTITY lol1 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
 <!ENTITY lol2 "&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;">
 <!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">
]>
<PubmedArticleSet><PubmedArticle><MedlineCitation><PMID>1</PMID>
<Article><ArticleTitle>&lol3;</ArticleTitle></Article></MedlineCitation></PubmedArticle></PubmedArticleSet>
"""


def client_for(server: NcbiServer, **options) -> EutilsClient:
    """Fast retries and no rate wait unless a test asks; timeouts generous for slow machines."""
    settings = {"timeout": 10.0, "backoff_base": 0.01, "backoff_max": 5.0, "requests_per_second": 1000.0}
    return EutilsClient(base_url=server.base_url, **{**settings, **options})


def search_reply(*ids: str) -> Reply:
    return Reply(esearch_xml(ids, translation="x"))


# Search


def test_esearch_returns_ids_count_and_query_translation():
    translation = '"asthma"[MeSH Terms] OR "asthma"[All Fields]'
    server = NcbiServer(
        replies={"esearch.fcgi": [Reply(esearch_xml(["3", "1", "2"], count=41, translation=translation))]}
    )
    with server, client_for(server) as client:
        result = client.esearch("asthma", retmax=3)
    assert result.count == 41  # the result's Count, not a term's Count in the TranslationStack
    assert result.ids == ("3", "1", "2")
    assert result.query_translation == translation
    assert result.warnings == ()
    sent = server.requests[0]
    assert (sent.method, sent.utility) == ("POST", "esearch.fcgi")
    assert {k: sent.params[k] for k in ("db", "term", "retmax", "sort")} == {
        "db": "pubmed",
        "term": "asthma",
        "retmax": "3",
        "sort": "relevance",
    }
    assert "mindate" not in sent.params


def test_esearch_sends_date_ranges_in_pairs():
    server = NcbiServer(replies={"esearch.fcgi": [search_reply("1")]})
    with server, client_for(server) as client:
        client.esearch("x", mindate=datetime.date(2020, 1, 5), maxdate="2021/06/30")
        client.esearch("x", maxdate=datetime.date(2019, 12, 31), datetype="edat")
    both, only_max = (r.params for r in server.requests)
    assert (both["mindate"], both["maxdate"], both["datetype"]) == ("2020/01/05", "2021/06/30", "pdat")
    assert (only_max["mindate"], only_max["maxdate"], only_max["datetype"]) == ("1800/01/01", "2019/12/31", "edat")


def test_esearch_rejects_a_date_ncbi_would_not_read():
    with EutilsClient(base_url="http://127.0.0.1:9/") as client, pytest.raises(ValueError, match="YYYY/MM/DD"):
        client.esearch("x", mindate="05-01-2020")


def test_zero_hits_with_phrase_not_found_is_a_normal_result():
    zero = esearch_xml(
        [], translation="", errors=[("PhraseNotFound", "qwzxv")], warnings=[("OutputMessage", "No items found.")]
    )
    server = NcbiServer(replies={"esearch.fcgi": [Reply(zero)]})
    with server, client_for(server) as client:
        result = client.esearch("qwzxv")
    assert (result.count, result.ids) == (0, ())
    assert result.warnings == ("PhraseNotFound: qwzxv", "OutputMessage: No items found.")


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("<eSearchResult><ERROR>Invalid query syntax</ERROR></eSearchResult>", "Invalid query syntax"),
        ('{"error": "API rate limit exceeded", "count": "11"}', "API rate limit exceeded"),
        ("<html><body>Service page</body></html>", "<html> instead of <eSearchResult>"),
    ],
)
def test_an_error_inside_a_200_answer_is_an_ncbi_error(body, message):
    server = NcbiServer(replies={"esearch.fcgi": [Reply(body)]})
    with server, client_for(server) as client, pytest.raises(NcbiError, match=message):
        client.esearch("x")
    assert len(server.requests) == 1


# Retries


def test_429_with_retry_after_in_seconds_waits_as_asked():
    limited = Reply('{"error":"API rate limit exceeded"}', status=429, headers={"Retry-After": "1"})
    server = NcbiServer(replies={"esearch.fcgi": [limited, search_reply("7")]})
    with server, client_for(server) as client:
        assert client.esearch("x").ids == ("7",)
    assert len(server.requests) == 2
    assert server.gaps()[0] >= 1.0 - TOLERANCE  # backoff_base alone would wait ~0.01 s


def test_retry_after_as_an_http_date_is_honoured():
    def until_two_seconds_from_now(request):
        when = email.utils.formatdate(time.time() + 2, usegmt=True)  # whole seconds: ≥ 1 s ahead
        return Reply(status=503, headers={"Retry-After": when})

    server = NcbiServer(replies={"esearch.fcgi": [until_two_seconds_from_now, search_reply("7")]})
    with server, client_for(server) as client:
        assert client.esearch("x").ids == ("7",)
    assert server.gaps()[0] >= 1.0 - TOLERANCE


def test_retry_after_is_capped_at_backoff_max():
    server = NcbiServer(replies={"esearch.fcgi": [Reply(status=429, headers={"Retry-After": "30"}), search_reply("7")]})
    with server, client_for(server, backoff_max=0.2) as client:
        assert client.esearch("x").ids == ("7",)
    assert 0.2 - TOLERANCE <= server.gaps()[0] < 15  # capped, with room for a slow machine


def test_503_twice_then_success():
    server = NcbiServer(replies={"esearch.fcgi": [Reply(status=503), Reply(status=502), search_reply("1", "2")]})
    with server, client_for(server) as client:
        assert client.esearch("x").ids == ("1", "2")
    assert len(server.requests) == 3


def test_server_errors_forever_give_up_after_max_retries_plus_one_attempts():
    server = NcbiServer(replies={"esearch.fcgi": [Reply(f'{{"error": "busy", "api-key": "{KEY}"}}', status=503)]})
    with server, client_for(server, max_retries=2, api_key=KEY) as client:
        with pytest.raises(NcbiError) as raised:
            client.esearch("x")
    assert len(server.requests) == 3
    message = str(raised.value)
    assert "/entrez/eutils/esearch.fcgi" in message
    assert "HTTP 503" in message
    assert "3 attempts" in message
    assert KEY not in message


def test_a_timeout_is_retried():
    server = NcbiServer(replies={"esearch.fcgi": [Reply(esearch_xml(["1"]), delay=6.0), search_reply("2")]})
    with server, client_for(server, timeout=2.0) as client:
        assert client.esearch("x").ids == ("2",)
    assert len(server.requests) == 2
    assert server.gaps()[0] >= 2.0 - TOLERANCE


def test_a_dropped_connection_is_retried():
    server = NcbiServer(replies={"esearch.fcgi": [Reply(drop=True), search_reply("2")]})
    with server, client_for(server) as client:
        assert client.esearch("x").ids == ("2",)
    assert len(server.requests) == 2


def test_a_bad_request_fails_at_once_without_the_key_in_the_message():
    bad = Reply(f"<ERROR>Invalid parameter; api_key={KEY}</ERROR>", status=400)
    server = NcbiServer(replies={"esearch.fcgi": [bad, search_reply("1")]})
    with server, client_for(server, api_key=KEY) as client, pytest.raises(NcbiError, match="HTTP 400") as raised:
        client.esearch("x")
    assert len(server.requests) == 1
    assert "Invalid parameter" in str(raised.value)
    assert KEY not in str(raised.value)


# Safe XML


def test_malformed_xml_is_an_ncbi_error_naming_what_was_parsed():
    server = NcbiServer(replies={"efetch.fcgi": [Reply("<PubmedArticleSet><PubmedArticle>")]})
    with server, client_for(server) as client, pytest.raises(NcbiError, match=r"malformed XML for PubMed records"):
        client.fetch_articles(["1"])


def test_an_entity_expansion_payload_is_refused():
    server = NcbiServer(replies={"efetch.fcgi": [Reply(BILLION_LAUGHS)]})
    with server, client_for(server) as client, pytest.raises(NcbiError, match="unsafe XML"):
        client.fetch_articles(["1"])


# PubMed records


def test_a_real_shaped_record_with_its_doctype_parses():
    server = NcbiServer(replies={"efetch.fcgi": [Reply(REAL_SHAPED)]})
    with server, client_for(server) as client:
        [article] = client.fetch_articles(["36000001"])
    assert article.pmid == "36000001"
    assert article.title == "Early anticoagulation after stroke with atrial fibrillation: a systematic review."
    assert article.abstract == (
        "BACKGROUND: Timing is debated.\n\nRESULTS: Bleeding did not increase (OR 0.9; 95% CI 0.7-1.1)."
    )
    assert article.authors == ("Smith JA", "Doe A", "Stroke Trials Group", "Roe B")
    assert (article.journal, article.year) == ("Stroke", 2022)
    assert article.publication_types == ("Journal Article", "Systematic Review")


def test_identifiers_and_citation_come_from_the_article_not_its_references():
    server = NcbiServer(replies={"efetch.fcgi": [Reply(REAL_SHAPED)]})
    with server, client_for(server) as client:
        [article] = client.fetch_articles(["36000001"])
    # The article has no PMC id of its own; its first reference has one.
    assert (article.pmid, article.doi, article.pmcid) == ("36000001", "10.1000/own.2022.1", "")
    assert article.citation() == (
        "Smith JA, Doe A, Stroke Trials Group, et al. Early anticoagulation after stroke with atrial fibrillation: "
        "a systematic review. Stroke. 2022. doi:10.1000/own.2022.1. PMID: 36000001"
    )
    for other in ("11111111", "22222222", "10.9999/ref.first", "An older trial", "37000002"):
        assert other not in article.citation()


def test_an_article_without_ids_of_its_own_does_not_borrow_its_references():
    references = [("31000001", "10.9999/ref.a", "Ref A. A title. J Ref. 2001."), ("32000002", "10.9999/ref.b", "B.")]
    cited = pubmed_article("8", doi="", pmcid="", references=references)
    linked = pubmed_article("9", doi="10.1000/nine", pmcid="PMC909", references=references)
    server = NcbiServer(pubmed={"8": cited, "9": linked})
    with server, client_for(server) as client:
        without, with_ids = client.fetch_articles(["8", "9"])
    assert (without.pmid, without.doi, without.pmcid) == ("8", "", "")
    assert without.citation() == "Smith J. A trial of something. Journal of Tests. 2020. PMID: 8"
    assert (with_ids.doi, with_ids.pmcid) == ("10.1000/nine", "PMC909")


def test_an_article_without_abstract_has_an_empty_abstract():
    server = NcbiServer(pubmed={"5": pubmed_article("5", abstract=())})
    with server, client_for(server) as client:
        [article] = client.fetch_articles(["5"])
    assert article.abstract == ""
    assert article.title == "A trial of something."


def test_a_structured_abstract_keeps_labels_and_inline_text():
    parts = [("OBJECTIVE", "To test <i>in vitro</i> x<sup>2</sup>."), ("CONCLUSIONS", "It works."), (None, "Trailing.")]
    server = NcbiServer(pubmed={"6": pubmed_article("6", abstract=parts)})
    with server, client_for(server) as client:
        [article] = client.fetch_articles(["6"])
    assert article.abstract == "OBJECTIVE: To test in vitro x2.\n\nCONCLUSIONS: It works.\n\nTrailing."


@pytest.mark.parametrize(
    ("pub_date", "article_date", "year"),
    [
        ("<Year>2020</Year><Month>Feb</Month>", "<Year>2019</Year>", 2020),
        ("<MedlineDate>1998 Dec-1999 Jan</MedlineDate>", "", 1998),
        ("<Season>Spring</Season>", "<Year>2017</Year><Month>03</Month><Day>02</Day>", 2017),
        ("<Season>Spring</Season>", "", None),
    ],
)
def test_the_year_comes_from_pubdate_then_medline_date_then_article_date(pub_date, article_date, year):
    server = NcbiServer(pubmed={"7": pubmed_article("7", pub_date=pub_date, article_date=article_date)})
    with server, client_for(server) as client:
        [article] = client.fetch_articles(["7"])
    assert article.year == year


def test_citation_lists_three_authors_then_et_al_and_tolerates_missing_parts():
    full = Article("1", "Is it safe?", "", ("A X", "B Y", "C Z"), "J", 2001, "", "", ())
    assert full.citation() == "A X, B Y, C Z. Is it safe? J. 2001. PMID: 1"
    bare = Article("2", "", "", (), "", None, "", "", ())
    assert bare.citation() == "PMID: 2"


def test_order_is_kept_across_batches_of_200_and_missing_ids_are_left_out():
    held = {str(n): pubmed_article(str(n), title=f"Title {n}.") for n in range(1000, 1450) if n % 7}
    asked = [str(n) for n in reversed(range(1000, 1450))] + ["1001"]  # a repeat is returned once
    server = NcbiServer(pubmed=held)
    with server, client_for(server) as client:
        articles = client.fetch_articles(asked)
    assert [a.pmid for a in articles] == [p for p in asked[:-1] if p in held]
    assert all(a.title == f"Title {a.pmid}." for a in articles)
    assert [len(r.ids) for r in server.requests] == [200, 200, 50]
    assert {(r.method, r.utility, r.params["db"], r.params["retmode"]) for r in server.requests} == {
        ("POST", "efetch.fcgi", "pubmed", "xml")
    }


def test_a_smaller_batch_size_is_respected():
    server = NcbiServer(pubmed={str(n): pubmed_article(str(n)) for n in range(5)})
    with server, client_for(server, batch_size=2) as client:
        assert [a.pmid for a in client.fetch_articles([str(n) for n in range(5)])] == ["0", "1", "2", "3", "4"]
    assert [len(r.ids) for r in server.requests] == [2, 2, 1]


# Identity, key and rate


def test_key_tool_and_email_are_sent_in_the_form_and_never_in_a_url_or_log(caplog):
    caplog.set_level(logging.DEBUG)
    server = NcbiServer(replies={"esearch.fcgi": [Reply(status=503), search_reply("1")]})
    with server, client_for(server, api_key=KEY, tool="my-tool", email="me@example.org") as client:
        client.esearch("x")
    for request in server.requests:
        assert (request.params["api_key"], request.params["tool"], request.params["email"]) == (
            KEY,
            "my-tool",
            "me@example.org",
        )
        assert KEY not in request.query
    assert "esearch.fcgi" in caplog.text  # the retry and the HTTP requests were logged
    assert KEY not in caplog.text


def test_no_api_key_parameter_without_a_key():
    server = NcbiServer(replies={"esearch.fcgi": [search_reply("1")]})
    with server, client_for(server, tool="t", email="") as client:
        client.esearch("x")
    assert "api_key" not in server.requests[0].params
    assert server.requests[0].params["tool"] == "t"


def test_ncbis_default_rates_are_three_a_second_without_key_and_ten_with_one():
    with EutilsClient(base_url="http://127.0.0.1:9/") as without, EutilsClient(api_key=KEY) as with_key:
        assert (without.requests_per_second, with_key.requests_per_second) == (3.0, 10.0)


def test_requests_are_spaced_by_the_rate_limit():
    server = NcbiServer(replies={"esearch.fcgi": [search_reply("1")]})
    with server, client_for(server, requests_per_second=5.0) as client:
        for _ in range(4):
            client.esearch("x")
    assert len(server.gaps()) == 3
    assert min(server.gaps()) >= 0.2 - TOLERANCE


def test_clients_of_the_same_endpoint_and_key_share_one_rate_limit():
    server = NcbiServer(replies={"esearch.fcgi": [search_reply("1")]})
    with server:
        clients = [client_for(server, api_key=KEY, requests_per_second=5.0) for _ in range(2)]
        threads = [threading.Thread(target=lambda c=c: [c.esearch("x") for _ in range(2)]) for c in clients]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        for client in clients:
            client.close()
    assert len(server.requests) == 4
    assert min(server.gaps()) >= 0.2 - TOLERANCE


# PMC full texts

CC_BY_ALI = (
    '<license><ali:license_ref specific-use="textmining" content-type="ccbylicense">'
    "https://creativecommons.org/licenses/by/4.0/</ali:license_ref><license-p>This article is distributed under "
    "the terms of the Creative Commons Attribution 4.0 International License.</license-p></license>"
)
CC_BY_NC_HREF = (
    '<license license-type="open-access" xlink:href="http://creativecommons.org/licenses/by-nc/4.0/">'
    "<license-p>Non-commercial reuse permitted.</license-p></license>"
)
CC0_IN_TEXT = (
    '<license license-type="open-access"><license-p>Dedicated to the public domain: '
    '<ext-link ext-link-type="uri" xlink:href="https://creativecommons.org/publicdomain/zero/1.0/">CC0</ext-link>.'
    "</license-p></license>"
)
TYPE_ONLY = '<license license-type="cc-by-nc-nd"><license-p>See the licence.</license-p></license>'
PUBLISHER = (
    '<license license-type="publisher-specific" xlink:href="https://www.example.org/userlicense/1.0/">'
    "<license-p>Publisher terms.</license-p></license>"
)


@pytest.mark.parametrize(
    ("licence_xml", "licence", "url", "open_access"),
    [
        (CC_BY_ALI, "CC BY 4.0", "https://creativecommons.org/licenses/by/4.0/", True),
        (CC_BY_NC_HREF, "CC BY-NC 4.0", "http://creativecommons.org/licenses/by-nc/4.0/", True),
        (CC0_IN_TEXT, "CC0", "https://creativecommons.org/publicdomain/zero/1.0/", True),
        (TYPE_ONLY, "CC BY-NC-ND", "", True),
        (PUBLISHER, "publisher-specific", "https://www.example.org/userlicense/1.0/", False),
        ("", "", "", False),
    ],
)
def test_pmc_licences(licence_xml, licence, url, open_access):
    server = NcbiServer(pmc={"321": pmc_article("PMC321", licence=licence_xml)})
    with server, client_for(server) as client:
        [text] = client.fetch_full_texts(["PMC321"])
    assert (text.pmcid, text.licence, text.licence_url, text.open_access) == ("PMC321", licence, url, open_access)


def test_pmc_full_text_has_section_titles_and_paragraphs_in_order():
    sections = [("Introduction", ["Why <i>this</i>.", "And that."]), ("Methods", ["How."])]
    articles = {
        "11": pmc_article("PMC11", title="Text <i>one</i>", sections=sections, licence=CC_BY_ALI),
        "22": pmc_article("22", title="Abstract only", sections=None, id_type="pmc"),
    }
    server = NcbiServer(pmc=articles)
    with server, client_for(server) as client:
        texts = client.fetch_full_texts(["22", "PMC11", "PMC404"])
    assert [t.pmcid for t in texts] == ["PMC22", "PMC11"]
    abstract_only, full = texts
    assert abstract_only.text == "" and abstract_only.title == "Abstract only"
    assert full.title == "Text one"
    assert full.text == "Introduction\n\nWhy this.\n\nAnd that.\n\nMethods\n\nHow."
    assert server.requests[0].params["db"] == "pmc"
    assert server.requests[0].ids == ["22", "11", "404"]


def test_a_pmc_set_is_parsed_with_its_doctype():
    # pmc_set writes the DOCTYPE NCBI sends; an empty set is a normal answer.
    server = NcbiServer(replies={"efetch.fcgi": [Reply(pmc_set([]))]})
    with server, client_for(server) as client:
        assert client.fetch_full_texts(["PMC1"]) == []


# Settings


def test_from_environment_reads_the_variables_when_the_client_is_built(monkeypatch):
    server = NcbiServer(replies={"esearch.fcgi": [search_reply("1")]})
    with server:
        monkeypatch.setenv("NCBI_EUTILS_URL", server.base_url)
        monkeypatch.setenv("NCBI_API_KEY", KEY)
        monkeypatch.setenv("NCBI_TOOL", "env-tool")
        monkeypatch.setenv("NCBI_EMAIL", "env@example.org")
        monkeypatch.setenv("NCBI_TIMEOUT", "12.5")
        monkeypatch.setenv("NCBI_MAX_RETRIES", "1")
        settings = ncbi_settings()
        with EutilsClient.from_environment() as client:
            client.esearch("x")
    assert (settings.timeout, settings.max_retries) == (12.5, 1)
    assert KEY not in repr(settings)
    assert client.max_retries == 1 and client.requests_per_second == 10.0
    params = server.requests[0].params
    assert (params["api_key"], params["tool"], params["email"]) == (KEY, "env-tool", "env@example.org")


def test_defaults_without_environment(monkeypatch):
    for name in ("NCBI_EUTILS_URL", "NCBI_API_KEY", "NCBI_TOOL", "NCBI_EMAIL", "NCBI_TIMEOUT", "NCBI_MAX_RETRIES"):
        monkeypatch.delenv(name, raising=False)
    settings = ncbi_settings()
    assert settings.base_url == "https://eutils.ncbi.nlm.nih.gov/entrez/eutils/"
    assert (settings.api_key, settings.tool, settings.email) == ("", "litsumm-ratings", "")
    assert (settings.timeout, settings.max_retries) == (30.0, 4)


@pytest.mark.parametrize(("name", "value"), [("NCBI_MAX_RETRIES", "-1"), ("NCBI_TIMEOUT", "0"), ("NCBI_TIMEOUT", "x")])
def test_unreadable_settings_name_the_variable(monkeypatch, name, value):
    monkeypatch.setenv(name, value)
    with pytest.raises(ImproperlyConfigured, match=name):
        ncbi_settings()


def test_json_bodies_are_never_parsed_as_xml():
    # A JSON document is not XML; without the check it would be a ParseError message.
    server = NcbiServer(replies={"efetch.fcgi": [Reply(json.dumps(["not", "xml"]))]})
    with server, client_for(server) as client, pytest.raises(NcbiError, match="JSON instead of XML"):
        client.fetch_articles(["1"])
