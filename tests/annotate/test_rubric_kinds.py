"""Rubric kinds beyond the LitSumm scale: N/A, per-finding, spans and cross-question rules."""

import copy

import pytest

from annotate.models import Rating, Rationale, Revision, Span
from annotate.rubrics import AnswerContext, AnswerValidationError, RubricDefinition, RubricDefinitionError
from annotate.selectors.queue import revision_answers
from annotate.services.ratings import submit_rating
from annotate.services.rubrics import builtin_rubric_path, load_rubric, read_rubric_file
from tests.annotate.factpico import complete_answers, make_factpico_assignment
from tests.conftest import api_client_for
from tests.factories import revision_history

FACTPICO = read_rubric_file(builtin_rubric_path("factpico"))


def test_factpico_rubric_declares_every_kind_and_its_scales():
    d = RubricDefinition.from_dict(FACTPICO)
    kinds = {q.key: q.kind for q in d.questions}
    assert kinds == {
        "added_info": "span",
        "population": "scale",
        "intervention": "scale",
        "comparator": "scale",
        "outcome": "scale",
        "outcome_exhaustive": "choice",
        "evidence": "per_finding",
        "contradictions": "span",
        "comments": "text",
    }
    pico = d.question("population")
    # Analysis can ask each question for its scale and its N/A treatment.
    assert pico.values == (1, 2, 3, 4) and pico.na.analysis == "missing" and pico.na.rationale_required
    assert d.question("evidence").scale_bounds == (1, 4)
    assert d.question("added_info").span_questions[0].values == ("yes", "no")
    assert d.question("contradictions").target == "linked"


def changed(path, value):
    raw = copy.deepcopy(FACTPICO)
    target = raw
    for part in path[:-1]:
        target = target[part]
    target[path[-1]] = value
    return raw


@pytest.mark.parametrize(
    "raw,message",
    [
        (
            changed(["questions", 0, "options"], [{"value": "a", "label": "A"}, {"value": "b", "label": "B"}]),
            "question 'added_info': span questions take no options",
        ),
        (changed(["questions", 0, "target"], "abstract"), "question 'added_info': target must be one of"),
        (changed(["questions", 8, "na"], {"label": "N/A"}), "question 'comments': only scale questions can offer N/A"),
        (changed(["questions", 1, "na"], {"analysis": "ignore"}), "question 'population': na.analysis must be one of"),
        (
            changed(["questions", 6, "options"], [{"value": "x", "label": "X"}, {"value": "y", "label": "Y"}]),
            "question 'evidence': scale values must be integers",
        ),
        (
            changed(["questions", 0, "span_questions"], [{"key": "factual", "kind": "scale", "prompt": "F"}]),
            "question 'added_info', span question 1: kind must be choice or text",
        ),
        (
            changed(
                ["rules"],
                [{"when": {"question": "nope", "in": [1]}, "then": {"question": "outcome", "in": [1]}, "message": "m"}],
            ),
            "rule 1: when names unknown question 'nope'",
        ),
        (
            changed(
                ["rules"],
                [
                    {
                        "when": {"question": "outcome", "in": [9]},
                        "then": {"question": "outcome", "in": [1]},
                        "message": "m",
                    }
                ],
            ),
            "rule 1: when: in needs a list of values of 'outcome'",
        ),
    ],
)
def test_invalid_definitions_name_the_question_or_rule(raw, message):
    with pytest.raises(RubricDefinitionError) as excinfo:
        RubricDefinition.from_dict(raw)
    assert message in excinfo.value.message


@pytest.mark.django_db
def test_complete_factpico_submission_stores_ratings_rationales_and_spans(rater_a):
    assignment, finding = make_factpico_assignment(rater_a)
    answers, rationales = complete_answers(assignment, finding)
    submit_rating(assignment=assignment, rater=rater_a, answers=answers, rationales=rationales, version=1)
    [revision] = revision_history(assignment)
    stored_answers, stored_rationales = revision_answers(revision)
    assert stored_answers["evidence"] == {str(finding.uuid): 3}
    assert stored_rationales["evidence"] == {str(finding.uuid): "Direction right, size missing."}
    assert stored_answers["added_info"] == [
        {
            "target": "summary",
            **{k: answers["added_info"][0][k] for k in ("start", "end", "text", "answers", "rationale")},
        }
    ]
    assert Rating.objects.get(question="evidence").finding == finding
    assert Span.objects.get().text == "a dummy pill"
    assert Rationale.objects.filter(rating__revision=revision).count() == 5


def expect_400(client, assignment, answers, rationales, key, fragment):
    response = client.post(
        f"/api/assignments/{assignment.uuid}/submit/",
        {"version": 1, "answers": answers, "rationales": rationales},
        format="json",
    )
    assert response.status_code == 400, response.json()
    fields = response.json()["error"]["fields"]
    assert key in fields and fragment in fields[key], fields
    assert not Revision.objects.exists() and not Span.objects.exists()


@pytest.mark.django_db
@pytest.mark.parametrize(
    "mutate,key,fragment",
    [
        (lambda a, r, f: r.pop("population"), "population", "a rationale is required"),
        (lambda a, r, f: a.update(outcome=5), "outcome", "must be one of 1, 2, 3, 4, na"),
        (
            lambda a, r, f: (a.update(comparator="na"), r.pop("comparator")),
            "comparator",
            "a rationale is required for N/A",
        ),
        (lambda a, r, f: a.update(evidence={}), "evidence", "Result 1: an answer is required"),
        (lambda a, r, f: r.update(evidence={}), "evidence", "Result 1: a rationale is required"),
        (lambda a, r, f: a.update(evidence={"not-a-finding": 4}), "evidence", "unknown finding(s): not-a-finding"),
        (lambda a, r, f: a["added_info"][0].update(end=10_000), "added_info", "outside the text"),
        (lambda a, r, f: a["added_info"][0].update(text="a dummy pil!"), "added_info", "does not match"),
        (lambda a, r, f: a["added_info"][0].update(rationale=""), "added_info", "span 1: a rationale is required"),
        (lambda a, r, f: a["added_info"][0].update(answers={}), "added_info", "needs an answer"),
        (
            lambda a, r, f: a["added_info"][0].update(answers={"factual": "maybe"}),
            "added_info",
            "must be one of yes, no",
        ),
        (
            lambda a, r, f: a.update(contradictions=[{"start": 0, "end": 5, "text": "Grown", "rationale": "x"}]),
            "contradictions",
            "needs its source part",
        ),
    ],
)
def test_invalid_submission_is_refused_with_the_question_key(rater_a, mutate, key, fragment):
    assignment, finding = make_factpico_assignment(rater_a)
    answers, rationales = complete_answers(assignment, finding)
    mutate(answers, rationales, finding)
    expect_400(api_client_for(rater_a), assignment, answers, rationales, key, fragment)


@pytest.mark.django_db
def test_linked_span_round_trips_with_its_source_part(rater_a):
    assignment, finding = make_factpico_assignment(rater_a)
    answers, rationales = complete_answers(assignment, finding)
    source_text = assignment.summary.source.text
    answers["contradictions"] = [
        {
            "start": 0,
            "end": 10,
            "text": "Grown-ups ",
            "rationale": "Not the same.",
            "link": {"start": 0, "end": 6, "text": source_text[:6]},
        }
    ]
    answers["contradictions"][0].update(end=9, text="Grown-ups")
    submit_rating(assignment=assignment, rater=rater_a, answers=answers, rationales=rationales, version=1)
    stored = revision_answers(revision_history(assignment)[0])[0]["contradictions"][0]
    assert stored["link"] == {"target": "source", "start": 0, "end": 6, "text": "Adults"}


@pytest.mark.django_db
def test_span_offsets_count_code_points_and_round_trip_exactly(rater_a):
    text = "Café ☕ and 😀 emoji: the drug “worked” ≥ 3 times versus a dummy pill. Attacks fell."
    assignment, finding = make_factpico_assignment(rater_a, summary_text=text)
    answers, rationales = complete_answers(assignment, finding)
    phrase = "“worked” ≥ 3"
    start = text.index(phrase)  # code points, as Python counts
    answers["added_info"] = [
        {
            "start": start,
            "end": start + len(phrase),
            "text": phrase,
            "answers": {"factual": "no"},
            "rationale": "Exaggerated.",
        }
    ]
    submit_rating(assignment=assignment, rater=rater_a, answers=answers, rationales=rationales, version=1)
    span = Span.objects.get()
    assert (span.start, span.end) == (start, start + len(phrase))
    assert text[span.start : span.end] == span.text == phrase


def test_consistency_rules_apply_only_to_final_submissions():
    d = RubricDefinition.from_dict(read_rubric_file(builtin_rubric_path("litsumm")))
    bad = {"overall": 5, "failure_modes": ["hallucination"]}
    assert d.validate(bad, final=False).values == bad
    with pytest.raises(AnswerValidationError) as excinfo:
        d.validate(bad, final=True)
    assert list(excinfo.value.errors) == ["overall"]
    assert d.validate({"overall": 3, "failure_modes": ["hallucination"]}, final=True)


def test_span_answer_rule_requires_the_tickbox():
    raw = {
        "key": "spans-and-ticks",
        "title": "T",
        "questions": [
            {
                "key": "spans",
                "kind": "span",
                "prompt": "Spans",
                "span_questions": [
                    {
                        "key": "factual",
                        "kind": "choice",
                        "prompt": "Factual?",
                        "options": [{"value": "yes", "label": "Yes"}, {"value": "no", "label": "No"}],
                    }
                ],
            },
            {
                "key": "modes",
                "kind": "checkboxes",
                "prompt": "Modes",
                "options": [{"value": "hallucination", "label": "H"}, {"value": "other", "label": "O"}],
            },
        ],
        "rules": [
            {
                "when": {"question": "spans", "span_answer": {"factual": "no"}},
                "then": {"question": "modes", "includes": "hallucination"},
                "message": "A not-factual span needs the hallucination tickbox.",
            }
        ],
    }
    d = RubricDefinition.from_dict(raw)
    ctx = AnswerContext(summary_text="Some text here.")
    span = {"start": 0, "end": 4, "text": "Some", "answers": {"factual": "no"}}
    with pytest.raises(AnswerValidationError) as excinfo:
        d.validate({"spans": [span]}, final=True, context=ctx)
    assert excinfo.value.errors == {"modes": "A not-factual span needs the hallucination tickbox."}
    assert d.validate({"spans": [span], "modes": ["hallucination"]}, final=True, context=ctx)


@pytest.mark.django_db
def test_a_new_rubric_version_leaves_old_answers_on_the_old_version(assignment_a, rater_a):
    old_rubric = assignment_a.study.rubric
    submit_rating(assignment=assignment_a, rater=rater_a, answers={"overall": 3}, version=1)
    raw = read_rubric_file(builtin_rubric_path("litsumm"))
    raw["questions"][2]["prompt"] = "Feedback for the writer"
    new_rubric = load_rubric(definition=raw)
    assert new_rubric.version == old_rubric.version + 1
    revision = Revision.objects.get()
    assert revision.rubric == old_rubric
    old_rubric.refresh_from_db()
    assert old_rubric.definition["questions"][2]["prompt"] == "Feedback"
