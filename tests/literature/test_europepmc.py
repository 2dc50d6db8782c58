"""LitSumm's literature acquisition from Europe PMC, through the real client against a
scripted server that speaks Europe PMC's documented REST protocol: the query, cursorMark
paging, full texts, the mention checked in each sentence, the articles' licences; and
refusals and outages (429, 5xx, timeouts, dropped connections, bad answers)."""

import email.utils
import time
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from annotate.models import Source
from literature.europepmc import EuropePmcClient, EuropePmcError, acquire_sentences, mention_pattern
from tests.factories import StudyFactory
from tests.literature.europepmc_server import EuropePmcServer, Reply, full_text_xml, result

pytestmark = pytest.mark.django_db
TOLERANCE = 0.05
NC = "http://creativecommons.org/licenses/by-nc/4.0/"


def client_for(server, **options):
    settings = {"timeout": 10.0, "backoff_base": 0.01, "backoff_max": 5.0, "requests_per_second": 1000.0}
    return EuropePmcClient(base_url=server.base_url, **{**settings, **options})


def library(**extra_texts):
    """Four search results: two open-access articles mentioning MIR21 in their text, one
    that names it only in its reference list, one whose full text Europe PMC does not have,
    and a MEDLINE record without a PMCID."""
    results = [
        result("PMC1001", pmid="3001", doi="10.1/a", title="MIR21 in cancer."),
        result("PMC1002", title="A cohort."),
        result("PMC1003", title="Closed text."),
        result(pmid="3004", title="Abstract only.", open_access=False),
        result("PMC1005", title="MIR21 and fibrosis."),
    ]
    texts = {
        "PMC1001": full_text_xml(
            "PMC1001",
            [
                "MIR21 is raised in tumours. MIR210 responds to hypoxia instead.",
                "We measured <italic>mir21</italic> by qPCR (MIR21, n = 40). Nothing else was measured.",
            ],
            pmid="3001",
            title="MIR21 in cancer.",
        ),
        "PMC1002": full_text_xml("PMC1002", ["A cohort of adults was followed. xMIR21x is not a name."]),
        "PMC1005": full_text_xml("PMC1005", ["Loss of MIR21 reduced fibrosis in mice."], title="MIR21 and fibrosis."),
        **extra_texts,
    }
    return results, texts


def test_the_mention_is_a_whole_name_in_any_case():
    pattern = mention_pattern(["MIR21", "hsa-mir-21"])
    for text in ("MIR21 is up.", "(MIR21, n = 4)", "mir21 levels", "the hsa-mir-21 gene", "MIR21."):
        assert pattern.search(text), text
    for text in ("MIR210 is up.", "xMIR21x", "MIR21a", "hsa-mir-21-5p", "MIR2"):
        assert not pattern.search(text), text


def test_sentences_mentioning_the_identifier_become_one_source_referenced_by_pmcid():
    study = StudyFactory(slug="rna")
    results, texts = library()
    with EuropePmcServer(results=results, texts=texts, page_cap=2) as server, client_for(server) as client:
        acquired = acquire_sentences(study=study, terms=["MIR21"], client=client)
    # The query LitSumm sends, Europe PMC's JSON core results, paged by cursorMark.
    searches = [r for r in server.requests if r.endpoint == "search"]
    assert searches[0].params["query"] == '("MIR21") AND IN_EPMC:Y AND OPEN_ACCESS:Y AND NOT SRC:PPR'
    assert (searches[0].params["format"], searches[0].params["resultType"]) == ("json", "core")
    assert [s.params["cursorMark"] for s in searches][0] == "*" and len(searches) == 3  # 5 results, 2 a page
    assert len({s.params["cursorMark"] for s in searches}) == 3
    assert acquired.found == 5
    # Only full texts that mention it, and in them only the sentences that do.
    source = acquired.source
    rows = [(s.text, s.ref) for s in source.sentences]
    assert rows == [
        ("MIR21 in cancer.", "PMC1001"),
        ("MIR21 is raised in tumours.", "PMC1001"),
        ("We measured mir21 by qPCR (MIR21, n = 40).", "PMC1001"),
        ("MIR21 and fibrosis.", "PMC1005"),
        ("Loss of MIR21 reduced fibrosis in mice.", "PMC1005"),
    ]
    assert acquired.left_out == {
        "PMC1002": "the full text does not mention it (the search matched elsewhere)",
        "PMC1003": "Europe PMC has no open-access full text for it",
        "3004": "no PMCID: no open-access full text",
    }
    # Both articles are CC BY 4.0: so is the source; each article's own licence is kept.
    assert (source.licence, source.licence_url) == ("CC BY 4.0", "http://creativecommons.org/licenses/by/4.0/")
    articles = {a["pmcid"]: a for a in source.metadata["articles"]}
    assert articles["PMC1001"]["pmid"] == "3001" and articles["PMC1001"]["sentences"] == 3
    assert source.metadata["origin"] == "Europe PMC" and source.key == "MIR21"
    assert "PMC1001" in source.attribution and "PMC1005" in source.attribution


def test_articles_under_different_licences_leave_the_source_without_one():
    study = StudyFactory(slug="rna")
    results, texts = library(PMC1005=full_text_xml("PMC1005", ["Loss of MIR21 reduced fibrosis."], licence_href=NC))
    with EuropePmcServer(results=results, texts=texts) as server, client_for(server) as client:
        acquired = acquire_sentences(study=study, terms=["MIR21"], client=client)
    assert acquired.source.licence == "" and acquired.source.licence_url == ""  # exports withhold the text
    licences = {a["pmcid"]: a["licence"] for a in acquired.source.metadata["articles"]}
    assert licences == {"PMC1001": "CC BY 4.0", "PMC1005": "CC BY-NC 4.0"}


def test_an_article_without_an_open_licence_is_left_out():
    study = StudyFactory(slug="rna")
    results, texts = library(PMC1005=full_text_xml("PMC1005", ["MIR21 here."], licence_href=""))
    with EuropePmcServer(results=results, texts=texts) as server, client_for(server) as client:
        acquired = acquire_sentences(study=study, terms=["MIR21"], client=client)
    assert acquired.left_out["PMC1005"] == "its licence (none stated) is not an open licence"
    assert {a.pmcid for a in acquired.articles} == {"PMC1001"}


def test_other_names_are_searched_and_matched_too():
    study = StudyFactory(slug="rna")
    results, texts = library(PMC1005=full_text_xml("PMC1005", ["hsa-mir-21 was deleted."]))
    with EuropePmcServer(results=results, texts=texts) as server, client_for(server) as client:
        acquired = acquire_sentences(study=study, terms=["MIR21", "hsa-mir-21"], client=client, key="URS0001")
    assert server.requests[0].params["query"].startswith('("MIR21" OR "hsa-mir-21") AND IN_EPMC:Y')
    texts_by_ref = {s.ref: s.text for s in acquired.source.sentences}
    assert texts_by_ref["PMC1005"] == "hsa-mir-21 was deleted." and acquired.source.key == "URS0001"


# --- refusals and outages -------------------------------------------------------------------


def test_429_with_retry_after_then_success():
    results, texts = library()
    limited = Reply('{"errMsg": "too many requests"}', status=429, headers={"Retry-After": "1"})
    server = EuropePmcServer(results=results, texts=texts)
    server.replies["search"] = [limited, server.search]
    with server, client_for(server) as client:
        assert len(client.search("MIR21")) == 5
    assert server.gaps()[0] >= 1.0 - TOLERANCE


def test_retry_after_as_an_http_date_and_5xx_then_success():
    def busy(request):
        return Reply(status=503, headers={"Retry-After": email.utils.formatdate(time.time() + 2, usegmt=True)})

    results, texts = library()
    server = EuropePmcServer(results=results, texts=texts)
    server.replies["fullTextXML"] = [busy, Reply(status=500), Reply(texts["PMC1001"], content_type="application/xml")]
    with server, client_for(server) as client:
        text = client.full_text("PMC1001")
    assert text.pmcid == "PMC1001" and "MIR21 is raised" in text.text and text.pmid == "3001"
    assert len(server.requests) == 3 and server.gaps()[0] >= 1.0 - TOLERANCE


def test_a_timeout_and_a_dropped_connection_are_retried():
    results, texts = library()
    server = EuropePmcServer(results=results, texts=texts)
    server.replies["search"] = [Reply("{}", delay=6.0), Reply(drop=True), server.search]
    with server, client_for(server, timeout=2.0) as client:
        assert len(client.search("MIR21")) == 5
    assert len(server.requests) == 3 and server.gaps()[0] >= 2.0 - TOLERANCE


def test_errors_forever_give_up_and_nothing_is_imported():
    study = StudyFactory(slug="rna")
    results, texts = library()
    server = EuropePmcServer(results=results, texts=texts, replies={"fullTextXML": [Reply(status=500)]})
    with server, client_for(server, max_retries=2) as client:
        with pytest.raises(EuropePmcError, match=r"PMC1001/fullTextXML failed .* after 3 attempts; last: HTTP 500"):
            acquire_sentences(study=study, terms=["MIR21"], client=client)
    assert not Source.objects.exists()


@pytest.mark.parametrize(
    ("reply", "message"),
    [
        (Reply('{"errMsg": "bad query"}', status=400), r"answered HTTP 400 for the search \(not retried\)"),
        (Reply("<html>maintenance</html>"), "answered the search without JSON"),
        (Reply('{"hitCount": 0}'), "has no resultList"),
    ],
)
def test_a_refusal_or_a_bad_answer_is_not_retried_and_says_why(reply, message):
    with EuropePmcServer(replies={"search": [reply]}) as server, client_for(server) as client:
        with pytest.raises(EuropePmcError, match=message):
            client.search("MIR21")
    assert len(server.requests) == 1


def test_unsafe_xml_is_refused():
    bomb = '<?xml version="1.0"?><!DOCTYPE a [<!ENTITY x "xx">]><article>&x;</article>'
    with EuropePmcServer(texts={"PMC1": bomb}) as server, client_for(server) as client:
        with pytest.raises(EuropePmcError, match="unsafe XML"):
            client.full_text("PMC1")


# --- the command ----------------------------------------------------------------------------


def test_the_command_imports_and_says_what_it_left_out(monkeypatch):
    StudyFactory(slug="rna")
    results, texts = library()
    with EuropePmcServer(results=results, texts=texts) as server:
        monkeypatch.setenv("EUROPEPMC_URL", server.base_url)
        out = StringIO()
        call_command("import_europepmc", "--study", "rna", "--term", "MIR21", stdout=out)
    message = out.getvalue()
    assert "Imported source 'MIR21' into rna: 5 sentence(s) from 2 of 5 article(s) found, licence CC BY 4.0" in message
    assert "PMC1003: Europe PMC has no open-access full text for it" in message


def test_the_command_refuses_when_no_article_mentions_it(monkeypatch):
    StudyFactory(slug="rna")
    results, texts = library()
    with EuropePmcServer(results=results[1:4], texts=texts) as server:
        monkeypatch.setenv("EUROPEPMC_URL", server.base_url)
        with pytest.raises(CommandError, match="no article of the 3 found has a sentence mentioning 'MIR21'"):
            call_command("import_europepmc", "--study", "rna", "--term", "MIR21")
    assert not Source.objects.exists()
