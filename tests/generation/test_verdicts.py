"""Reading verdicts from structured and from sloppy answers."""

import json
import math

import pytest

from generation.calibration import calibrate_threshold
from generation.claims import summary_probability
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


@pytest.mark.parametrize(
    "line,expected",
    [
        # The statement echoed first, then the verdict, in the usual separators.
        ("1. No deaths occurred: True", "supported"),
        ("1. No deaths occurred - Supported", "supported"),
        ("1. Drug A did not lower diastolic pressure — true", "supported"),
        ("1. False positives were rare: **Yes**", "supported"),
        ("1. The dose is not supported by renal data: correct.", "supported"),
        ("1. Adverse events were supported by diary cards - False", "not_supported"),
        ("1. Patients took vitamin D daily: no", "not_supported"),
        # After a full stop, in brackets, or after an explicit label.
        ("1. No deaths occurred. True.", "supported"),
        ("1. [No deaths occurred] True", "supported"),
        ("1. No deaths occurred (verdict: not supported)", "not_supported"),
        ("1. No patient was lost. Supported: yes. Explanation: no losses are mentioned.", "supported"),
        ("1. Nothing was false. Verdict: False. The context reports one error.", "not_supported"),
        # The verdict first, then an explanation that holds other verdict-like words.
        ("1. True - no deaths were reported, which is not surprising.", "supported"),
        ("1. Not supported: no such trial is described.", "not_supported"),
        ("1. Incorrect: the trial enrolled 80, not 120; the rest is correct", "not_supported"),
        # No separator at all: the last verdict word.
        ("1. The claim that no deaths occurred is not supported", "not_supported"),
        ("1. The claim that no deaths occurred is supported", "supported"),
    ],
)
def test_sloppy_lines_give_the_verdict_that_follows_the_statement(line, expected):
    assert verdicts(line, 1) == [expected]


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


def token(text, p=0.99, top=()):
    """One compact logprobs entry: the token, its probability, and alternatives."""
    return {"token": text, "logprob": math.log(p), "top": [[t, math.log(q)] for t, q in top]}


def test_probability_from_logprobs_normalised_over_yes_and_no():
    logprobs = [
        token('{"'),
        token("supported"),
        token('":"'),
        # yes 0.6 and "Yes" 0.1 are both yes: P = (0.6 + 0.1) / (0.6 + 0.1 + 0.2).
        token("yes", 0.6, [("yes", 0.6), ("no", 0.2), ("Yes", 0.1)]),
        token('"}'),
    ]
    assert yes_probability(logprobs, "supported") == pytest.approx(0.7 / 0.9)


def test_a_no_in_the_critique_after_the_verdict_is_not_the_verdict():
    logprobs = [
        token('{"supported": "'),
        token("yes", 0.7, [("yes", 0.7), ("no", 0.2), ("maybe", 0.05)]),
        token('", "critique": "'),
        token("No", 0.9, [("No", 0.9), ("Yes", 0.05)]),
        token(" deaths were reported."),
        token('"}'),
    ]
    assert yes_probability(logprobs, "supported") == pytest.approx(0.7 / 0.9)


def test_a_quoted_supported_no_inside_the_critique_is_not_the_field():
    # The field says yes (P 0.8 against no 0.1); the critique after it quotes the words
    # "supported": "no", escaped inside the JSON string.
    logprobs = [
        token('{"supported": "'),
        token("yes", 0.8, [("yes", 0.8), ("no", 0.1)]),
        token('", "critique": "A reviewer wrote \\"supported\\": \\"'),
        token("no", 0.9, [("no", 0.9), ("yes", 0.1)]),
        token('\\" about another trial."}'),
    ]
    text = "".join(t["token"] for t in logprobs)
    assert json.loads(text)["supported"] == "yes"  # the test's own answer is valid JSON
    assert yes_probability(logprobs, "supported") == pytest.approx(0.8 / 0.9)


def test_a_json_boolean_is_read_over_true_and_false():
    logprobs = [
        token('{"critique": "Stated.", "supported": '),
        token("true", 0.6, [("true", 0.6), ("false", 0.3), (" true", 0.05)]),
        token("}"),
    ]
    assert yes_probability(logprobs, "supported") == pytest.approx(0.65 / 0.95)


def test_a_value_token_with_its_quotes_and_a_sampled_token_outside_the_top():
    # The value shares its token with the punctuation around it, and the sampled
    # "no" (p 0.05) is not among the top alternatives: it still counts.
    logprobs = [
        token('{"supported'),
        token('":"no', 0.05, [('":"yes', 0.9), ('":"maybe', 0.04)]),
        token('"}'),
    ]
    assert yes_probability(logprobs, "not_supported") == pytest.approx(0.9 / 0.95)


def test_a_loose_supported_label_is_found_too():
    logprobs = [
        token("Critique: no deaths are mentioned. Supported:"),
        token(" No", 0.75, [(" No", 0.75), (" Yes", 0.25)]),
    ]
    assert yes_probability(logprobs, "not_supported") == pytest.approx(0.25)


@pytest.mark.parametrize(
    "logprobs,verdict,expected",
    [
        # The logprobs do not reach the field's value (a truncated list).
        ([token('{"critique": "No quote supports it.", "supported": "')], "not_supported", 0.0),
        # The value is split over two tokens: no yes/no alternatives to compare.
        ([token('{"supported": '), token("tr", 0.5, [("tr", 0.5), ("fa", 0.5)]), token("ue}")], "supported", 1.0),
        # No "supported" field at all, though a yes token is there.
        ([token("yes", 0.3, [("yes", 0.3), ("no", 0.7)])], "supported", 1.0),
    ],
)
def test_logprobs_that_do_not_cover_the_value_fall_back_to_the_verdict(logprobs, verdict, expected):
    assert yes_probability(logprobs, verdict) == expected


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
