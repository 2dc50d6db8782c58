"""Reading verdicts from structured and from sloppy answers."""

import math

import pytest

from generation.pipelines import calibrate_threshold, summary_probability
from generation.verdicts import parse_claim_verdict, parse_statement_verdicts, yes_probability


def verdicts(text, n):
    return [v.verdict for v in parse_statement_verdicts(text, n)]


def test_structured_verdicts():
    text = (
        '{"verdicts": [{"statement": 1, "explanation": "Stated.", "supported": true},'
        ' {"statement": 2, "explanation": "Placebo, not drug A.", "supported": false}]}'
    )
    parsed = parse_statement_verdicts(text, 2)
    assert [v.verdict for v in parsed] == ["supported", "not_supported"]
    assert parsed[1].explanation == "Placebo, not drug A."


def test_structured_verdicts_in_words_and_out_of_order():
    text = '{"verdicts": [{"statement": 2, "verdict": "not_supported"}, {"statement": 1, "verdict": "Supported"}]}'
    assert verdicts(text, 2) == ["supported", "not_supported"]


def test_sloppy_numbered_lines():
    text = (
        "Here are my findings:\n"
        "1. True - the context states a 12 mmHg fall.\n"
        "2: False. The context reports headache, not nausea.\n"
        "Statement 3 - not supported: no such trial.\n"
    )
    assert verdicts(text, 3) == ["supported", "not_supported", "not_supported"]


def test_the_word_false_elsewhere_does_not_fail_a_supported_statement():
    # The LitSumm authors' code failed the whole summary on any "False" in the answer.
    text = "1. True - the claim that the drug was false-positive prone is stated.\n2. True - stated."
    assert verdicts(text, 2) == ["supported", "supported"]


def test_a_missing_verdict_is_unverified():
    parsed = parse_statement_verdicts('{"verdicts": [{"statement": 1, "supported": true}]}', 2)
    assert [v.verdict for v in parsed] == ["supported", "unverified"]
    assert verdicts("I cannot tell.", 1) == ["unverified"]


def test_claim_verdicts_from_json_and_from_text():
    verdict, critique = parse_claim_verdict(
        '{"critique": "Only one abstract says so.", "quotes": [],'
        ' "revised_claim": "Trial 1 found X.", "supported": "no"}'
    )
    assert verdict == "not_supported"
    assert "Only one abstract" in critique and "Trial 1 found X." in critique
    assert parse_claim_verdict('Critique: quoted "fell by 12". Supported: "Yes" Revised Claim: N/A')[0] == "supported"
    assert parse_claim_verdict("Supported: yes? On reflection... Supported: No")[0] == "not_supported"
    assert parse_claim_verdict("Hard to say.")[0] == "unverified"


def test_probability_from_logprobs_normalised_over_yes_and_no():
    logprobs = [
        {"token": '"', "logprob": -0.01, "top": []},
        {
            "token": "yes",
            "logprob": math.log(0.6),
            "top": [["yes", math.log(0.6)], ["no", math.log(0.2)], ["Yes", math.log(0.1)]],
        },
        {"token": '"}', "logprob": -0.01, "top": []},
    ]
    assert yes_probability(logprobs, "supported") == pytest.approx(0.7 / 0.9)


def test_probability_without_logprobs_is_zero_or_one():
    assert yes_probability(None, "supported") == 1.0
    assert yes_probability(None, "not_supported") == 0.0
    assert yes_probability(None, "unverified") is None


def test_summary_probability_is_the_product_of_verified_claims():
    claims = [{"probability": 0.9}, {"probability": 0.5}, {"probability": None}]
    assert summary_probability(claims) == pytest.approx(0.45)
    assert summary_probability([{"probability": None}]) is None


def test_threshold_calibration_is_the_midpoint_of_the_two_means():
    assert calibrate_threshold([0.9, 0.7], [0.1, 0.3]) == pytest.approx(0.5)
    with pytest.raises(ValueError):
        calibrate_threshold([], [0.1])
