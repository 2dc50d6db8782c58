"""The report of a rubric that is not FactPICO's: every question it asks gets a figure,
read by the kind of the question (a span question whose sub-question is `severity`, a
tickbox question, a choice question), section titles come from the rubric, and the
FactPICO paper is not cited. Figures are worked by hand below and checked against
statsmodels and the krippendorff package."""

from __future__ import annotations

import numpy as np
import pytest
from django.urls import reverse
from krippendorff import alpha as krippendorff_alpha
from sklearn.metrics import cohen_kappa_score
from statsmodels.stats.inter_rater import fleiss_kappa

from analysis.services import compute_study_report
from annotate.models import StudyMembership
from annotate.services.members import add_study_member
from annotate.services.ratings import submit_rating
from annotate.services.rubrics import upload_rubric
from tests.analysis.reports import open_computed
from tests.factories import AssignmentFactory, SourceFactory, StudyFactory, SummaryFactory, UserFactory

RUBRIC = """
key: lab-check
title: Lab check of plain summaries
questions:
  - key: problems
    kind: span
    target: summary
    prompt: Mark each problem
    span_questions:
      - key: severity
        kind: choice
        prompt: How serious is it?
        options:
          - {value: minor, label: Minor}
          - {value: major, label: Major}
  - key: issues
    kind: checkboxes
    prompt: Which issues does it have?
    options:
      - {value: jargon, label: Jargon}
      - {value: length, label: Too long}
  - key: verdict
    kind: choice
    prompt: Your verdict
    options:
      - {value: accept, label: Accept}
      - {value: revise, label: Revise}
      - {value: reject, label: Reject}
"""

TEXT = "Alpha one. Beta two."  # two sentences: [0, 10) and [11, 20)

# Six summaries, two raters (A, B). Spans: (start, end, severity).
SPANS = {
    "A": [[(0, 5, "major")], [(11, 15, "minor")], [(0, 5, "minor")], [], [(11, 15, "minor")], []],
    "B": [[(0, 9, "major")], [(11, 19, "major")], [], [], [(11, 15, "minor")], []],
}
ISSUES = {
    "A": [["jargon"], [], ["jargon", "length"], [], ["length"], ["jargon"]],
    "B": [["jargon"], ["jargon"], ["jargon"], [], [], ["jargon"]],
}
VERDICT = {
    "A": ["accept", "accept", "revise", "reject", "revise", "accept"],
    "B": ["accept", "revise", "revise", "reject", "accept", "accept"],
}


@pytest.fixture
def custom_study(db):
    admin = UserFactory(username="lab-admin")
    rubric, _ = upload_rubric(text=RUBRIC, user=admin)
    study = StudyFactory(rubric=rubric)
    add_study_member(study=study, user=admin, role=StudyMembership.Role.ADMIN)
    raters = {name: UserFactory(username=name) for name in ("A", "B")}
    source = SourceFactory(study=study)
    summaries = [SummaryFactory(source=source, text=TEXT, generator="sys-1") for _ in range(6)]
    for name, user in raters.items():
        add_study_member(study=study, user=user, role=StudyMembership.Role.RATER)
        for i, summary in enumerate(summaries):
            assignment = AssignmentFactory(summary=summary, rater=user)
            spans = [
                {"start": s, "end": e, "text": TEXT[s:e], "answers": {"severity": sev}} for s, e, sev in SPANS[name][i]
            ]
            answers = {"problems": spans, "issues": ISSUES[name][i], "verdict": VERDICT[name][i]}
            submit_rating(assignment=assignment, rater=user, answers=answers, version=assignment.version)
    return study, admin


def _agreement(report, question, option=None):
    (section,) = [a for a in report["agreement"] if a["question"] == question and a.get("option") == option]
    return section["report"]


def test_choice_question_agreement_is_nominal_over_its_options(custom_study):
    study, _ = custom_study
    verdict = _agreement(compute_study_report(study=study, n_resamples=20), "verdict")
    # Agree on items 1, 3, 4, 6: 4 of 6.
    assert verdict["percent_agreement"] == pytest.approx(4 / 6)
    # Both raters: accept 3, revise 2, reject 1, so p_e = (9 + 4 + 1) / 36 = 7/18 for Cohen
    # and Fleiss alike: kappa = (2/3 - 7/18) / (1 - 7/18) = 5/11.
    (pair,) = verdict["cohen_kappa"]
    assert pair["unweighted"] == pytest.approx(5 / 11)
    assert verdict["fleiss_kappa"] == pytest.approx(5 / 11)
    # Randolph, q = 3 options: (2/3 - 1/3) / (2/3) = 1/2.
    assert verdict["randolph_kappa"] == pytest.approx(1 / 2)
    # Krippendorff nominal: 12 values (accept 6, revise 4, reject 2), 4 disagreeing
    # coincidences: alpha = 1 - 11 * 4 / (144 - 36 - 16 - 4) = 1 - 44/88 = 1/2.
    assert verdict["krippendorff_alpha"]["nominal"] == pytest.approx(1 / 2)
    codes = {"accept": 0, "revise": 1, "reject": 2}
    a, b = ([codes[v] for v in VERDICT[r]] for r in ("A", "B"))
    assert pair["unweighted"] == pytest.approx(cohen_kappa_score(a, b))
    assert verdict["krippendorff_alpha"]["nominal"] == pytest.approx(
        krippendorff_alpha(np.array([a, b], dtype=float), level_of_measurement="nominal")
    )


def test_each_tickbox_option_is_a_binary_item_and_nothing_ticked_is_no(custom_study):
    study, _ = custom_study
    report = compute_study_report(study=study, n_resamples=20)
    jargon = _agreement(report, "issues", "jargon")
    # Jargon: A 1 0 1 0 0 1, B 1 1 1 0 0 1 (A's empty answers on items 2, 4 are "no").
    assert jargon["n_items"] == 6 and jargon["percent_agreement"] == pytest.approx(5 / 6)
    # Cohen: p_o = 5/6, p_e = (3*4 + 3*2) / 36 = 1/2, kappa = (5/6 - 1/2) / (1/2) = 2/3.
    assert jargon["cohen_kappa"][0]["unweighted"] == pytest.approx(2 / 3)
    # Krippendorff: 7 ones, 5 zeros, one disagreeing item (2 coincidences):
    # alpha = 1 - 11 * 2 / (2 * 7 * 5) = 24/35.
    assert jargon["krippendorff_alpha"]["nominal"] == pytest.approx(24 / 35)
    length = _agreement(report, "issues", "length")
    # Length: A 0 0 1 0 1 0, B never: 4 of 6 agree; B constant, so p_e = p_o and kappa = 0;
    # alpha = 1 - 11 * 4 / (2 * 2 * 10) = -1/10.
    assert length["percent_agreement"] == pytest.approx(4 / 6)
    assert length["cohen_kappa"][0]["unweighted"] == pytest.approx(0.0)
    assert length["krippendorff_alpha"]["nominal"] == pytest.approx(-0.1)
    per_item = np.array([[2, 0], [2, 0], [1, 1], [2, 0], [1, 1], [2, 0]])  # length: raters not ticking, ticking
    assert length["fleiss_kappa"] == pytest.approx(fleiss_kappa(per_item, method="fleiss"))
    sections = [a for a in report["agreement"] if a["question"] == "issues"]
    assert {s["option"] for s in sections} == {"jargon", "length"} and all(s["ci"] for s in sections)


def test_span_agreement_for_a_sub_question_not_named_factual(custom_study):
    study, _ = custom_study
    (section,) = compute_study_report(study=study, n_resamples=20)["span_agreement"]
    assert section["question"] == "problems" and section["prompt"] == "Mark each problem"
    # Marking: 12 sentences; A marks 4 (1:s0, 2:s1, 3:s0, 5:s1), B 3; they differ on 3:s0 only.
    sentences = section["sentences"]
    assert section["n_sentences"] == 12 and sentences["percent_agreement"] == pytest.approx(11 / 12)
    assert sentences["randolph_kappa"] == pytest.approx(5 / 6)  # (11/12 - 1/2) / (1/2)
    # Fleiss: pooled 7/24 marked; p_e = (49 + 289) / 576; kappa = (528 - 338) / (576 - 338) = 95/119.
    assert sentences["fleiss_kappa"] == pytest.approx(95 / 119)
    (severity,) = section["sub_questions"]
    assert severity["key"] == "severity" and severity["prompt"] == "How serious is it?"
    # Three overlapping pairs: (major, major), (minor, major), (minor, minor).
    assert severity["n_pairs"] == 3 and severity["error"] is None
    assert severity["report"]["percent_agreement"] == pytest.approx(2 / 3)
    assert severity["report"]["randolph_kappa"] == pytest.approx(1 / 3)  # (2/3 - 1/2) / (1/2)
    # Krippendorff: minor 3, major 3, 2 disagreeing coincidences: 1 - 5 * 2 / 18 = 4/9.
    assert severity["report"]["krippendorff_alpha"]["nominal"] == pytest.approx(4 / 9)
    pairs = np.array([[1, 0, 0], [1, 1, 0]], dtype=float)  # A, B per pair; 0 minor, 1 major
    assert severity["report"]["krippendorff_alpha"]["nominal"] == pytest.approx(
        krippendorff_alpha(pairs, level_of_measurement="nominal")
    )


def test_the_page_titles_sections_from_the_rubric_and_does_not_cite_factpico(custom_study, client, monkeypatch):
    from analysis import services

    monkeypatch.setattr(services, "BOOTSTRAP_RESAMPLES", 20)
    study, admin = custom_study
    client.force_login(admin)
    html = open_computed(client, reverse("analysis:report", args=[study.slug])).content.decode()
    assert "FactPICO" not in html
    assert "Span agreement" in html and "Mark each problem" in html
    assert "severity (How serious is it?), on overlapping spans" in html
    assert "issues: Jargon" in html and "issues: Too long" in html and ">verdict<" in html
    assert "No rater pair rated the same summary" not in html
