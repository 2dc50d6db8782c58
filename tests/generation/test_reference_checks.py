"""The five reference checks on hand-made summaries, and the check_references command."""

import json

import pytest
from django.core.management import CommandError, call_command

from generation.reference_checks import Problem, check_references, cited_refs, context_refs

CONTEXT = {"PMC100", "PMC200", "PMC300"}


def test_a_well_cited_summary_passes_every_check():
    report = check_references("Drug A lowered pressure [PMC100]. It was safe [PMC200].", CONTEXT)
    assert report.passed
    assert (report.sentences, report.references) == (2, 2)
    assert report.problems == []


def test_adjacent_brackets_before_the_stop_count_as_two_references():
    assert cited_refs("Both trials agreed [PMC100][PMC200].") == ["PMC100", "PMC200"]
    report = check_references("Both trials agreed [PMC100][PMC200]. Nothing else was found.", CONTEXT)
    assert (report.sentences, report.references) == (2, 2)
    assert report.checks["adequate"]


def test_et_al_and_eg_do_not_end_sentences():
    # Four "sentences" if abbreviations ended them; 2 references over 4 would still be
    # adequate, so the count itself is asserted.
    summary = "Smith et al. found a fall in pressure [PMC100]. Side effects, e.g. headache, were mild [PMC200]."
    report = check_references(summary, CONTEXT)
    assert report.sentences == 2
    assert report.checks["location"]


def test_p_values_and_citations_after_the_stop_stay_in_their_sentence():
    summary = "Pressure fell (p < .001). [PMC100] The effect lasted 12 weeks [PMC200]."
    report = check_references(summary, CONTEXT)
    assert report.sentences == 2
    assert report.checks["location"]


def test_too_few_references_fail_adequacy():
    summary = "Drug A lowered pressure. It was safe. Few dropped out [PMC100]."
    report = check_references(summary, CONTEXT)
    assert not report.checks["adequate"]
    assert report.failed[0] == "adequate"


def test_half_a_reference_per_sentence_is_enough():
    report = check_references("Drug A lowered pressure [PMC100]. It was safe.", CONTEXT)
    assert report.checks["adequate"]


def test_numbered_citations_fail_the_format_check_and_are_rescued_as_format():
    report = check_references("Drug A lowered pressure [1]. It was safe [2].", CONTEXT)
    assert not report.checks["format"]
    assert report.failed[0] == "format"
    assert "[1]" in report.problems[0].message


def test_an_invented_pmcid_fails_realness_only():
    report = check_references("Drug A lowered pressure [PMC100]. It was safe [PMC999999].", CONTEXT)
    assert report.checks["format"]
    assert not report.checks["real"]
    assert report.failed == ["real"]
    assert "PMC999999" in report.problems[0].message


def test_references_gathered_at_the_end_fail_location():
    summary = "Drug A lowered pressure. It was safe. Few dropped out. Pressure stayed low [PMC100][PMC200][PMC300]."
    report = check_references(summary, CONTEXT)
    assert not report.checks["location"]
    assert report.checks["adequate"]  # 3 references for 4 sentences


def test_one_bracket_with_most_references_fails_max_share():
    summary = "Drug A lowered pressure [PMC100, PMC200, PMC300]. It was safe [PMC100]."
    report = check_references(summary, CONTEXT)
    assert report.references == 4
    assert not report.checks["max_share"]


def test_a_bracket_with_half_the_references_is_allowed():
    report = check_references("Pressure fell [PMC100, PMC200]. It was safe [PMC100][PMC300].", CONTEXT)
    assert report.checks["max_share"]


def test_a_single_cited_sentence_is_not_a_crowded_bracket():
    assert check_references("Drug A lowered pressure [PMC100].", CONTEXT).checks["max_share"]


@pytest.mark.parametrize(
    "sentence",
    [
        "Intracellular [Ca2+] rose within minutes [PMC100].",
        "Uptake of [3H]thymidine fell by half [PMC100].",
        "The authors wrote that it 'was [sic] effective' [PMC100].",
        "Binding of [125I]-labelled ligand was specific [PMC100].",
    ],
)
def test_chemistry_and_editorial_brackets_are_not_references(sentence):
    summary = f"{sentence} It was safe [PMC200]."
    report = check_references(summary, CONTEXT)
    assert report.passed, report.problems
    assert (report.sentences, report.references) == (2, 2)
    assert cited_refs(summary) == ["PMC100", "PMC200"]


@pytest.mark.parametrize(
    "citation,ids",
    [
        ("[1]", ["1"]),
        ("[1,2]", ["1", "2"]),
        ("[1, 2; 4]", ["1", "2", "4"]),
        ("[1-3]", ["1-3"]),
        ("[2–5]", ["2–5"]),
        ("[PMID: 12345678]", ["PMID: 12345678"]),
        ("[doi:10.1056/NEJMoa2034577]", ["doi:10.1056/NEJMoa2034577"]),
        ("[10.1016/j.cell.2020.01.001]", ["10.1016/j.cell.2020.01.001"]),
    ],
)
def test_numbers_pmids_and_dois_are_references_that_fail_the_format_check(citation, ids):
    summary = f"Drug A lowered pressure {citation}. It was safe [PMC100]."
    assert cited_refs(summary) == [*ids, "PMC100"]
    report = check_references(summary, CONTEXT)
    assert report.references == len(ids) + 1
    assert not report.checks["format"] and not report.checks["real"]
    assert report.failed[0] == "format"
    assert report.problems[0].message == "not a PMCID: " + ", ".join(f"[{i}]" for i in sorted(ids))


def test_a_sentence_ending_in_a_chemistry_bracket_does_not_end_with_a_reference():
    # Two of three sentences end in brackets, but only one in a reference: 1/3 < 0.5.
    summary = "Calcium entered the cell [PMC100] as [Ca2+]. Potassium left as [K+]. It was safe [PMC200]."
    report = check_references(summary, CONTEXT)
    assert report.references == 2
    assert not report.checks["location"]
    assert report.problems == [Problem("location", "1 of 3 sentence(s) end with a reference")]


def test_the_contexts_own_ids_count_whatever_they_look_like():
    known = {"drug-a", "trial-b"}
    summary = "Drug A lowered pressure [drug-a]. It was safe [trial-b]. Calcium was [Ca2+]."
    assert cited_refs(summary, known) == ["drug-a", "trial-b"]
    report = check_references(summary, known)
    assert report.references == 2
    assert report.checks == {"adequate": True, "format": True, "real": True, "location": True, "max_share": True}


def test_context_refs_are_the_closing_brackets_and_citation_ids():
    context = (
        "Intracellular [Ca2+] rose as shown earlier [12] [drug-a].\n"
        "Uptake of [3H]thymidine fell [PMC100].\n"
        "See also [PMID: 123] for the method [trial-b]. Cited after the stop. [PMC200]\n"
    )
    assert context_refs(context) == {"drug-a", "PMC100", "PMID: 123", "trial-b", "PMC200"}


@pytest.fixture
def files(tmp_path):
    context = tmp_path / "CONTEXT.txt"
    context.write_text(
        "Drug A lowered systolic pressure [PMC100]. Headache was common [PMC100].\nNo deaths occurred [PMC200].\n"
    )

    def write(summary: str):
        path = tmp_path / "SUMMARY.txt"
        path.write_text(summary)
        return str(path), str(context)

    return write


def test_check_references_command_prints_the_documented_json(files, capsys):
    call_command("check_references", *files("Drug A, e.g. at 10 mg, lowered pressure [PMC100][PMC200]."), "--json")
    out = json.loads(capsys.readouterr().out)
    assert out == {
        "sentences": 1,
        "references": 2,
        "checks": {"adequate": True, "format": True, "real": True, "location": True, "max_share": True},
        "passed": True,
        "problems": [],
    }


def test_check_references_command_fails_on_an_invented_reference(files, capsys):
    with pytest.raises(CommandError, match="real"):
        call_command("check_references", *files("Drug A lowered pressure [PMC123456]."), "--json")
    out = json.loads(capsys.readouterr().out)
    assert out["passed"] is False
    assert out["checks"]["real"] is False
    assert out["problems"] == [{"check": "real", "message": "not in the context: PMC123456"}]


def test_check_references_command_reports_a_missing_file(tmp_path):
    with pytest.raises(CommandError, match="cannot read"):
        call_command("check_references", str(tmp_path / "nope.txt"), str(tmp_path / "nope2.txt"))
