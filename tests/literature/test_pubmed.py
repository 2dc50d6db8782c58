"""PubMed as an engine and an import, through the real client against the scripted
E-utilities server: licences from PMC, articles without abstracts, dates and exclusions,
errors that change nothing. The pipeline on PubMed is in
tests/generation/test_question_pipeline.py."""

from datetime import date
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from annotate.models import Source
from literature.ncbi import EutilsClient
from literature.pubmed import PubMedEngine, import_articles
from tests.factories import StudyFactory
from tests.literature.ncbi_server import NcbiServer, Reply, esearch_xml, pmc_article, pubmed_article

pytestmark = pytest.mark.django_db

CC_BY = (
    '<license license-type="open-access" xlink:href="http://creativecommons.org/licenses/by/4.0/">'
    "<license-p>CC BY 4.0.</license-p></license>"
)


def library():
    return {
        "pubmed": {
            "101": pubmed_article(
                "101",
                title="Aspirin after stroke: a randomised trial.",
                abstract=(("BACKGROUND", "Stroke recurs."), ("RESULTS", "Aspirin reduced recurrence.")),
                authors=(("Smith", "John", "J"), ("Doe", "Ann", "A")),
                journal="Stroke Journal",
                doi="10.1/a101",
                pmcid="PMC9101",
            ),
            "102": pubmed_article("102", title="A letter without an abstract.", abstract=()),
            "103": pubmed_article("103", title="Closed-access aspirin cohort.", abstract=((None, "Cohort data."),)),
        },
        "pmc": {"9101": pmc_article("PMC9101", licence=CC_BY)},
    }


def client(server):
    return EutilsClient(base_url=server.base_url, timeout=10.0, backoff_base=0.01, requests_per_second=1000.0)


def test_articles_become_sources_with_their_own_citation_and_licence():
    study = StudyFactory(slug="pm")
    with NcbiServer(**library()) as server:
        imported = import_articles(study=study, pmids=["101", "102", "103", "404"], client=client(server))
    assert list(imported.sources) == ["101", "102", "103"]  # 404: not in PubMed
    a = Source.objects.get(study=study, key="101")
    assert a.text.startswith("Aspirin after stroke: a randomised trial.\nBACKGROUND: Stroke recurs.")
    assert a.licence == "CC BY 4.0" and a.licence_url.startswith("http://creativecommons.org/licenses/by/4.0")
    assert a.external_ids == {"pmid": "101", "pmcid": "PMC9101", "doi": "10.1/a101"}
    assert a.metadata["citation"].startswith("Smith J, Doe A. Aspirin after stroke")
    assert a.metadata["year"] == 2020 and len(a.sentences) >= 2
    letter = Source.objects.get(study=study, key="102")
    assert letter.text == "A letter without an abstract." and letter.metadata["no_abstract"] is True
    assert imported.without_abstract == ["102"]
    # Not in PMC: no open licence, so an export withholds its text.
    assert Source.objects.get(study=study, key="103").licence == ""
    assert imported.open_access == ["101"]


def test_the_engine_restricts_dates_drops_exclusions_and_returns_hits_with_sources():
    study = StudyFactory(slug="pm-engine")
    with NcbiServer(replies={"esearch.fcgi": [Reply(esearch_xml(["103", "101", "102"]))]}, **library()) as server:
        engine = PubMedEngine(study, client=client(server))
        hits = engine.search("aspirin stroke", limit=2, published_before=date(2021, 3, 1), exclude=["PMC9101"])
        search = next(r for r in server.requests if r.utility == "esearch.fcgi")
    # The day before the cut-off, inclusive: "up to one day before the publication date".
    assert (search.params["mindate"], search.params["maxdate"], search.params["datetype"]) == (
        "1800/01/01",
        "2021/02/28",
        "pdat",
    )
    assert search.params["term"] == "aspirin stroke"
    # 101 is excluded by its PMCID, known only once its record is fetched.
    assert [(h.identifier, h.rank) for h in hits] == [("103", 1), ("102", 2)]
    assert all(h.source_id == Source.objects.get(study=study, key=h.identifier).pk for h in hits)


def test_zero_hits_is_no_hits():
    study = StudyFactory(slug="pm-zero")
    zero = esearch_xml([], count=0, errors=[("PhraseNotFound", "zzzz")])
    with NcbiServer(replies={"esearch.fcgi": [Reply(zero)]}) as server:
        assert PubMedEngine(study, client=client(server)).search("zzzz") == []
    assert not Source.objects.filter(study=study).exists()


def test_import_pubmed_command_and_a_failure_that_changes_nothing(monkeypatch):
    StudyFactory(slug="pm-cmd")
    for name in ("NCBI_API_KEY", "NCBI_TIMEOUT", "NCBI_MAX_RETRIES"):
        monkeypatch.delenv(name, raising=False)
    with NcbiServer(replies={"esearch.fcgi": [Reply(esearch_xml(["101", "103"]))]}, **library()) as server:
        monkeypatch.setenv("NCBI_EUTILS_URL", server.base_url)
        out = StringIO()
        call_command("import_pubmed", "--study", "pm-cmd", "--query", "aspirin", "--max", "2", stdout=out)
    assert "Imported 2 article(s) into pm-cmd" in out.getvalue()
    assert "1 with an open-access licence" in out.getvalue()
    assert set(Source.objects.filter(study__slug="pm-cmd").values_list("key", flat=True)) == {"101", "103"}
    broken = {"efetch.fcgi": [Reply("<PubmedArticleSet><PubmedArticle>")]}  # malformed XML
    with NcbiServer(replies=broken) as server:
        monkeypatch.setenv("NCBI_EUTILS_URL", server.base_url)
        with pytest.raises(CommandError, match="Nothing was imported"):
            call_command("import_pubmed", "--study", "pm-cmd", "--pmid", "555")
    assert not Source.objects.filter(key="555").exists()
    with pytest.raises(CommandError, match="not a PubMed id"):
        call_command("import_pubmed", "--study", "pm-cmd", "--pmid", "12a")
    with pytest.raises(CommandError, match="not both"):
        call_command("import_pubmed", "--study", "pm-cmd")


@pytest.mark.parametrize("query", ["", "?!", " -- "])
def test_pubmed_is_not_asked_a_query_without_a_word(query):
    study = StudyFactory(slug="pm-empty")
    with NcbiServer(**library()) as server:
        engine = PubMedEngine(study, client=client(server))
        assert not engine.searchable(query) and engine.search(query) == []
        assert server.requests == []


# --- by PMCID -------------------------------------------------------------------------------


def pmc_library():
    body = (("Results", ("Aspirin reduced recurrence by a third.", "Bleeding was rare.")),)
    return {
        "pmc": {
            "9101": pmc_article("PMC9101", title="Aspirin after stroke", licence=CC_BY, sections=body),
            "9102": pmc_article("PMC9102", title="A closed article", licence="", sections=body).replace(
                'pub-id-type="pmid">12345', 'pub-id-type="pmid">12346'
            ),
        }
    }


def run_pmcid(*args):
    out = StringIO()
    call_command("import_pubmed", "--study", "pm", *args, stdout=out)
    return out.getvalue()


def test_articles_by_pmcid_with_their_full_text_when_open(monkeypatch):
    study = StudyFactory(slug="pm")
    with NcbiServer(**pmc_library()) as server:
        monkeypatch.setenv("NCBI_EUTILS_URL", server.base_url)
        message = run_pmcid("--pmcid", "PMC9101", "--pmcid", "9102", "--pmcid", "PMC404", "--full-text")
        requests = list(server.requests)
    assert "Imported 2 article(s) into pm" in message and "not found in PMC: PMC404" in message
    assert (
        "2 with an open-access licence" not in message
        and "1 with an open-access licence, 1 with their full text" in message
    )
    assert [(r.utility, r.params["db"]) for r in requests] == [("efetch.fcgi", "pmc")]
    # Keyed by the PMID in the article's JATS record (the same source --pmid makes).
    open_one = Source.objects.get(study=study, key="12345", external_ids__pmcid="PMC9101")
    body = "Results\n\nAspirin reduced recurrence by a third.\n\nBleeding was rare."
    assert open_one.text == f"Aspirin after stroke\nThe abstract.\n{body}"
    assert open_one.licence == "CC BY 4.0" and open_one.metadata["full_text"] is True
    assert open_one.metadata["origin"] == "PMC"


def test_without_full_text_or_an_open_licence_only_title_and_abstract(monkeypatch):
    study = StudyFactory(slug="pm")
    library = pmc_library()
    library["pmc"]["9101"] = library["pmc"]["9101"].replace('pub-id-type="pmid">12345', 'pub-id-type="pmid">777')
    with NcbiServer(**library) as server:
        monkeypatch.setenv("NCBI_EUTILS_URL", server.base_url)
        run_pmcid("--pmcid", "PMC9101", "--pmcid", "PMC9102", "--full-text")
    closed = Source.objects.get(study=study, external_ids__pmcid="PMC9102")
    assert closed.text == "A closed article\nThe abstract." and closed.licence == ""  # exports withhold it
    assert closed.metadata["full_text"] is False
    opened = Source.objects.get(study=study, key="777")
    assert "Bleeding was rare." in opened.text
    StudyFactory(slug="pm2")
    with NcbiServer(**pmc_library()) as server:
        monkeypatch.setenv("NCBI_EUTILS_URL", server.base_url)
        call_command("import_pubmed", "--study", "pm2", "--pmcid", "PMC9101", stdout=StringIO())
    assert Source.objects.get(study__slug="pm2").text == "Aspirin after stroke\nThe abstract."


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--pmcid", "PMCx1"], "not a PubMed id or PMCID: PMCx1"),
        (["--pmcid", "PMC1", "--pmid", "1"], "give one of --pmid"),
        (["--pmid", "1", "--full-text"], "--full-text goes with --pmcid"),
    ],
)
def test_bad_pmcid_options_are_refused(args, message):
    StudyFactory(slug="pm")
    with pytest.raises(CommandError, match=message):
        call_command("import_pubmed", "--study", "pm", *args)
    assert not Source.objects.exists()


def test_a_pmc_outage_imports_nothing(monkeypatch):
    StudyFactory(slug="pm")
    with NcbiServer(replies={"efetch.fcgi": [Reply(status=503)]}, **pmc_library()) as server:
        monkeypatch.setenv("NCBI_EUTILS_URL", server.base_url)
        monkeypatch.setenv("NCBI_MAX_RETRIES", "1")
        with pytest.raises(CommandError, match="HTTP 503.*Nothing was imported"):
            run_pmcid("--pmcid", "PMC9101")
    assert not Source.objects.exists()
