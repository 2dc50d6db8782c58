"""The five reference checks on hand-made summaries, and the check_references command."""

import json

import pytest
from django.core.management import CommandError, call_command

from generation.checks import check_references, cited_refs

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
