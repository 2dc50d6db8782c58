"""How the study report reads per-finding answers and N/A."""

import math

import pandas as pd
import pytest

from analysis.services import compute_study_report, question_specs
from annotate.models import Finding
from annotate.selectors.contents import rubric_definition
from annotate.services.ratings import submit_rating
from annotate.services.rubrics import builtin_rubric_path, load_rubric, read_rubric_file
from stats.frames import prepare_ratings
from tests.annotate.factpico import complete_answers, make_factpico_assignment
from tests.factories import AssignmentFactory, UserFactory


def frame(rows):
    return pd.DataFrame(rows, columns=["item", "rater", "question", "finding", "score", "answer"])


def test_each_finding_is_its_own_item_and_na_is_coded_only_where_declared():
    ratings = frame(
        [
            ("s1", "1", "evidence", "f1", 3.0, 3),
            ("s1", "1", "evidence", "f2", 4.0, 4),
            ("s1", "1", "population", "", math.nan, "na"),
            ("s1", "1", "comparator", "", math.nan, "na"),
        ]
    )
    out = prepare_ratings(ratings, {"population": 5})
    assert list(out["item"]) == ["s1:f1", "s1:f2", "s1", "s1"]
    assert out.loc[2, "score"] == 5.0 and math.isnan(out.loc[3, "score"])
    assert ratings.loc[0, "item"] == "s1"  # the input is not changed


@pytest.mark.django_db
def test_factpico_report_treats_findings_and_na_as_declared(settings):
    raw = read_rubric_file(builtin_rubric_path("factpico"))
    raw["questions"][1]["na"] = {"label": "N/A", "rationale_required": True, "analysis": "category"}
    rubric = load_rubric(definition=raw)
    rater_a, rater_b = UserFactory(username="fa"), UserFactory(username="fb")
    assignment_a, finding = make_factpico_assignment(rater_a)
    study = assignment_a.study
    study.rubric = rubric
    study.save()
    second = Finding.objects.create(
        source=finding.source,
        index=1,
        intervention="x",
        outcome="y",
        start=finding.start,
        end=finding.end,
        evidence=finding.evidence,
    )
    assignment_b = AssignmentFactory(summary=assignment_a.summary, rater=rater_b, position=0)
    for assignment, rater, population in ((assignment_a, rater_a, "na"), (assignment_b, rater_b, 4)):
        answers, rationales = complete_answers(assignment, finding)
        answers["population"] = population
        answers["evidence"][str(second.uuid)] = 2
        rationales["evidence"][str(second.uuid)] = "x"
        submit_rating(
            assignment=assignment, rater=rater, answers=answers, rationales=rationales, version=assignment.version
        )
    assert rubric_definition(study.rubric).na_codes == {"population": 5}
    assert [s.values for s in question_specs(study) if s.key == "population"] == [(1, 2, 3, 4, 5)]
    report = compute_study_report(study=study, n_resamples=10)
    by_question = {a["question"]: a for a in report["agreement"]}
    assert by_question["evidence"]["report"]["n_items"] == 2  # two findings, one summary
    # ... but one summary rated, by each rater (the page read "3 of 1 summaries rated").
    assert (report["n_items_rated"], report["n_summaries"]) == (1, 1)
    assert [r["n_rated"] for r in report["raters"]] == [1, 1]
    population = by_question["population"]["report"]
    # N/A (code 5) against 4: a disagreement on the item, not a missing rating.
    assert population["n_items"] == 1 and population["percent_agreement"] == 0.0
    assert by_question["population"]["scale"] == [1, 2, 3, 4, 5]
    spans = report["span_agreement"][0]
    assert spans["question"] == "added_info" and spans["n_sentences"] == 2  # the summary has two sentences
    # Both raters marked the same phrase, both "factual": full agreement, one overlapping pair.
    assert spans["sentences"]["percent_agreement"] == 1.0
    factual = next(s for s in spans["sub_questions"] if s["key"] == "factual")
    assert spans["n_overlapping_pairs"] == 1 and factual["report"]["percent_agreement"] == 1.0


@pytest.mark.django_db
@pytest.mark.parametrize("rubric_key", ["litsumm", "factpico"])
def test_question_specs_answer_what_a_question_is_as_the_rubric_does(rubric_key):
    """QuestionSpec's predicates mean what annotate.rubrics.Question's of the same name
    mean; a per-finding question reaches the report as a scale (each finding its own item)."""
    from annotate.selectors.contents import rubric_definition
    from tests.factories import StudyFactory

    study = StudyFactory(rubric=load_rubric(definition=read_rubric_file(builtin_rubric_path(rubric_key))))
    questions = rubric_definition(study.rubric).questions
    specs = question_specs(study)
    assert [s.key for s in specs] == [q.key for q in questions]
    assert [s.counts_options for s in specs] == [q.counts_options for q in questions]
    assert [s.plain_scale for s in specs] == [q.is_scale for q in questions]
    # Each rubric has questions on both sides of both predicates, so the comparisons above can fail.
    assert {s.plain_scale for s in specs} == {s.counts_options for s in specs} == {True, False}
