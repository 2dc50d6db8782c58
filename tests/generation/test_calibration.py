"""Calibrating Factored Verification's threshold from rated summaries (§2.3 of the
paper: the midpoint of the mean P(summary) of faithful and hallucinated summaries).
Expected values are worked by hand in each test."""

import json

import pandas as pd
import pytest
from django.core.management import CommandError, call_command

from annotate.services.ratings import submit_rating
from generation.calibration import calibrate, hallucination_labels
from tests.factories import AssignmentFactory, StudyFactory, SummaryFactory, UserFactory


def frame(rows):
    return pd.DataFrame(
        [
            {"item": item, "rater": rater, "question": q, "finding": "", "answer": answer}
            for item, rater, q, answer in rows
        ]
    )


def test_the_majority_of_raters_decides_and_a_tie_gives_no_label():
    labels = hallucination_labels(
        frame(
            [
                ("a", "1", "failure_modes", ["hallucination", "bad_length"]),
                ("a", "2", "failure_modes", ["hallucination"]),
                ("b", "1", "failure_modes", []),
                ("b", "2", "failure_modes", ["bad_length"]),
                ("b", "3", "failure_modes", ["hallucination"]),
                ("c", "1", "failure_modes", ["hallucination"]),
                ("c", "2", "failure_modes", []),
                ("c", "1", "overall", 1),  # another question: ignored
            ]
        ),
        question="failure_modes",
        values=["hallucination"],
    )
    assert labels == {"a": True, "b": False, "c": None}


def test_a_rater_who_ticked_no_box_voted_faithful():
    rows = [
        ("a", "1", "overall", 5),  # stored no failure_modes answer: ticked nothing
        ("a", "2", "overall", 5),
        ("a", "3", "failure_modes", ["hallucination"]),
    ]
    assert hallucination_labels(frame(rows), question="failure_modes", values=["h"], checkboxes=True) == {"a": False}
    assert hallucination_labels(frame(rows), question="failure_modes", values=["hallucination"], checkboxes=True) == {
        "a": False
    }
    # Without the checkbox rule, only the one rater who answered votes.
    assert hallucination_labels(frame(rows), question="failure_modes", values=["hallucination"]) == {"a": True}


def test_a_scale_answer_can_mean_hallucinated():
    rows = [("a", "1", "overall", 1), ("a", "2", "overall", 2), ("b", "1", "overall", 4), ("b", "2", "overall", 1)]
    assert hallucination_labels(frame(rows), question="overall", values=["1"]) == {"a": None, "b": None}
    assert hallucination_labels(frame(rows), question="overall", values=[1, 2]) == {"a": True, "b": None}


def test_the_threshold_is_the_midpoint_of_the_two_means():
    result = calibrate(
        {"f1": 0.9, "f2": 0.7, "h1": 0.2, "h2": 0.4, "tie": 0.5, "none": None, "unrated": 0.1},
        {"f1": False, "f2": False, "h1": True, "h2": True, "tie": None, "none": True},
    )
    # faithful mean (0.9 + 0.7) / 2 = 0.8, hallucinated mean (0.2 + 0.4) / 2 = 0.3 → θ = 0.55
    assert result.threshold == pytest.approx(0.55)
    assert (result.n_faithful, result.n_hallucinated, result.n_ties, result.n_without_p) == (2, 2, 1, 1)
    assert result.accuracy == 1.0
    with pytest.raises(ValueError):
        calibrate({"f1": 0.9}, {"f1": False})


@pytest.mark.django_db
def test_the_command_calibrates_from_a_rated_study(capsys):
    study = StudyFactory(slug="rated")
    raters = [UserFactory(), UserFactory()]
    # P(summary) as Factored Verification stored it, and each rater's hallucination tick.
    rated = {"f1": (0.9, [False, False]), "f2": (0.6, [False, True]), "h1": (0.2, [True, True]), "t": (0.5, None)}
    for key, (p, ticks) in rated.items():
        summary = SummaryFactory(source__study=study, key=key, metadata={"factored": {"p_summary": p}})
        for rater, ticked in zip(raters, ticks or [True, False], strict=True):
            assignment = AssignmentFactory(summary=summary, rater=rater)
            answers = {"overall": 2, "failure_modes": ["hallucination"]} if ticked else {"overall": 5}
            submit_rating(assignment=assignment, rater=rater, answers=answers, version=assignment.version)
    SummaryFactory(source__study=study, key="imported", metadata={})  # no P: not part of it

    call_command("calibrate_factored_threshold", "--study", "rated", "--json")
    result = json.loads(capsys.readouterr().out)
    # f2 is a tie (one tick of two), as is t: faithful = f1 (0.9), hallucinated = h1 (0.2) → θ = 0.55
    assert result["threshold"] == pytest.approx(0.55)
    assert (result["n_faithful"], result["n_hallucinated"], result["n_ties"]) == (1, 1, 2)

    call_command("calibrate_factored_threshold", "--study", "rated")
    assert capsys.readouterr().out.startswith("GENERATION_FACTORED_THRESHOLD=0.5500")


@pytest.mark.django_db
def test_the_command_says_what_is_missing():
    study = StudyFactory(slug="unrated")
    with pytest.raises(CommandError, match="no question 'nope'"):
        call_command("calibrate_factored_threshold", "--study", "unrated", "--question", "nope")
    with pytest.raises(CommandError, match="was checked by Factored Verification"):
        call_command("calibrate_factored_threshold", "--study", "unrated")
    SummaryFactory(source__study=study, metadata={"factored": {"p_summary": 0.4}})
    with pytest.raises(CommandError, match="has not both"):
        call_command("calibrate_factored_threshold", "--study", "unrated")
    with pytest.raises(CommandError, match="no study"):
        call_command("calibrate_factored_threshold", "--study", "missing")
