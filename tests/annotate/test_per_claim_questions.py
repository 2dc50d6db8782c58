"""Claims judged by people: a per-claim question asks, for each claim of a
summary (the claims a pipeline recorded, else its sentences), which option holds, with a
rationale each. Validated like every answer, stored whole on one rating, read back
claim by claim; the rater never sees the pipeline's verdict."""

import pytest
from django.test import Client

from annotate.models import Claim, Rating, Revision
from annotate.rubrics import AnswerContext, RubricDefinition, RubricDefinitionError
from annotate.selectors.claims import claim_units
from annotate.selectors.disagreements import batch_disagreements
from annotate.selectors.queue import revision_answers
from annotate.services.ratings import save_draft, submit_rating
from annotate.services.rubrics import load_builtin_rubric
from tests.conftest import api_client_for
from tests.factories import AssignmentFactory, SourceFactory, StudyFactory, SummaryFactory, revision_history

SUMMARY = "Drug A lowered blood pressure. It was safe in children. Nobody dropped out."

QUESTION = {
    "key": "claims_supported",
    "kind": "per_claim",
    "prompt": "Is each claim supported?",
    "required": True,
    "rationale": "required",
    "options": [
        {"value": "supported", "label": "Supported"},
        {"value": "not_supported", "label": "Not supported"},
        {"value": "cannot_tell", "label": "Cannot tell"},
    ],
}


def definition(**changes) -> RubricDefinition:
    return RubricDefinition.from_dict({"key": "c", "title": "C", "questions": [{**QUESTION, **changes}]})


def test_a_per_claim_question_needs_the_supported_and_not_supported_options():
    with pytest.raises(RubricDefinitionError, match="needs the options 'supported' and 'not_supported'"):
        definition(options=[{"value": "yes", "label": "Yes"}, {"value": "no", "label": "No"}])
    with pytest.raises(RubricDefinitionError, match="only scale questions can offer N/A"):
        definition(na=True)


def test_every_claim_needs_an_allowed_answer_and_its_rationale_on_submit():
    rubric = definition()
    context = AnswerContext(summary_text=SUMMARY, claim_ids=("c1", "c2"))
    clean = rubric.validate(
        {"claims_supported": {"c1": "supported", "c2": "cannot_tell"}},
        {"claims_supported": {"c1": "Said in the results.", "c2": "Too vague."}},
        final=True,
        context=context,
    )
    assert clean.values == {"claims_supported": {"c1": "supported", "c2": "cannot_tell"}}
    assert clean.rationales == {"claims_supported": {"c1": "Said in the results.", "c2": "Too vague."}}

    def problem(answers, rationales, final=True):
        with pytest.raises(Exception) as caught:
            rubric.validate(
                {"claims_supported": answers}, {"claims_supported": rationales}, final=final, context=context
            )
        return caught.value.errors["claims_supported"]

    assert problem({"c1": "supported"}, {"c1": "ok"}) == "Claim 2: an answer is required"
    assert problem({"c1": "supported", "c2": "supported"}, {"c1": "ok"}) == "Claim 2: a rationale is required"
    assert problem({"c1": "maybe"}, {}, final=False) == "Claim 1: must be one of supported, not_supported, cannot_tell"
    assert problem({"c9": "supported"}, {}, final=False) == "unknown claim(s): c9"
    # A draft may hold some claims only.
    assert rubric.validate({"claims_supported": {"c2": "supported"}}, None, final=False, context=context).values


def test_a_final_answer_to_some_questions_only_leaves_the_others_to_a_drafts_check():
    """`only` (the rubric judge's answers: it is not asked span questions): the questions
    named must be complete, the others need nothing but may not hold wrong values."""
    rubric = RubricDefinition.from_dict(
        {
            "key": "c",
            "title": "C",
            "questions": [
                QUESTION,
                {
                    "key": "overall",
                    "kind": "scale",
                    "prompt": "Overall?",
                    "required": True,
                    "options": [{"value": v, "label": str(v)} for v in (1, 2, 3)],
                },
            ],
        }
    )
    context = AnswerContext(summary_text=SUMMARY, claim_ids=("c1", "c2"))
    assert rubric.validate({"overall": 2}, None, final=True, context=context, only={"overall"}).values == {"overall": 2}
    with pytest.raises(Exception) as caught:
        rubric.validate({"overall": 2}, None, final=True, context=context)
    # Every claim's problem at once, each naming its claim.
    assert caught.value.errors == {"claims_supported": "Claim 1: an answer is required; Claim 2: an answer is required"}
    assert caught.value.parts == {
        "claims_supported": [("c1", "Claim 1: an answer is required"), ("c2", "Claim 2: an answer is required")]
    }
    with pytest.raises(Exception) as caught:
        rubric.validate({"claims_supported": {"c1": "maybe"}}, None, final=True, context=context, only={"overall"})
    assert caught.value.errors == {
        "claims_supported": "Claim 1: must be one of supported, not_supported, cannot_tell",
        "overall": "an answer is required",
    }


@pytest.mark.django_db
def test_the_claims_are_the_recorded_ones_else_the_sentences():
    summary = SummaryFactory(text=SUMMARY)
    units = claim_units(summary)
    assert [(u.id, u.text, u.recorded) for u in units] == [
        ("sentence-1", "Drug A lowered blood pressure.", False),
        ("sentence-2", "It was safe in children.", False),
        ("sentence-3", "Nobody dropped out.", False),
    ]
    assert all(summary.text[u.start : u.end] == u.text for u in units)
    second = Claim.objects.create(summary=summary, index=1, text="Safe in children.", verdict="not_supported")
    first = Claim.objects.create(summary=summary, index=0, text="Lowered blood pressure.", verdict="supported")
    assert [(u.id, u.number, u.recorded) for u in claim_units(summary)] == [
        (str(first.uuid), 1, True),
        (str(second.uuid), 2, True),
    ]


def claims_assignment(rater, *, text=SUMMARY, summary=None):
    if summary is None:
        study = StudyFactory(rubric=load_builtin_rubric(key="claims"))
        summary = SummaryFactory(study=study, source=SourceFactory(study=study), text=text)
    return AssignmentFactory(summary=summary, rater=rater, position=0)


def complete(ids, labels=None):
    labels = labels or ["supported"] * len(ids)
    return (
        {"claims_supported": dict(zip(ids, labels, strict=True)), "overall": 3},
        {"claims_supported": {i: f"Reason for {i}." for i in ids}},
    )


@pytest.mark.django_db
def test_answers_are_stored_on_one_rating_and_read_back_claim_by_claim(rater_a):
    assignment = claims_assignment(rater_a)
    ids = ["sentence-1", "sentence-2", "sentence-3"]
    # A draft with a rationale typed before its answer keeps both.
    save_draft(
        assignment=assignment,
        rater=rater_a,
        answers={"claims_supported": {"sentence-1": "supported"}},
        rationales={"claims_supported": {"sentence-1": "In the results.", "sentence-3": "Not said."}},
        version=1,
    )
    draft = revision_history(assignment)[0]
    assert revision_answers(draft) == (
        {"claims_supported": {"sentence-1": "supported"}},
        {"claims_supported": {"sentence-1": "In the results.", "sentence-3": "Not said."}},
    )
    answers, rationales = complete(ids, ["supported", "not_supported", "cannot_tell"])
    submit_rating(assignment=assignment, rater=rater_a, answers=answers, rationales=rationales, version=2)
    submitted = revision_history(assignment)[-1]
    assert submitted.status == Revision.Status.SUBMITTED
    rows = Rating.objects.filter(revision=submitted, question="claims_supported")
    assert rows.count() == 1
    assert rows.get().value["sentence-2"] == {"answer": "not_supported", "rationale": "Reason for sentence-2."}
    assert revision_answers(submitted) == (answers, rationales)


@pytest.mark.django_db
def test_the_api_refuses_a_claim_the_summary_does_not_have_and_changes_nothing(rater_a):
    assignment = claims_assignment(rater_a)
    answers, rationales = complete(["sentence-1", "sentence-2", "sentence-3"])
    answers["claims_supported"]["sentence-4"] = "supported"
    response = api_client_for(rater_a).post(
        f"/api/assignments/{assignment.uuid}/submit/",
        {"version": 1, "answers": answers, "rationales": rationales},
        format="json",
    )
    assert response.status_code == 400
    assert response.json()["error"]["fields"]["claims_supported"] == "unknown claim(s): sentence-4"
    assert not Revision.objects.exists()
    del answers["claims_supported"]["sentence-4"]
    response = api_client_for(rater_a).post(
        f"/api/assignments/{assignment.uuid}/submit/",
        {"version": 1, "answers": answers, "rationales": rationales},
        format="json",
    )
    assert response.status_code == 200, response.json()


@pytest.mark.django_db
def test_the_page_shows_each_claim_escaped_and_never_the_pipelines_verdict(client, rater_a):
    study = StudyFactory(rubric=load_builtin_rubric(key="claims"))
    summary = SummaryFactory(study=study, source=SourceFactory(study=study), text="<b>Bold</b> claim. Second.")
    Claim.objects.create(
        summary=summary,
        index=0,
        text="<script>alert(1)</script> claim",
        verdict="not_supported",
        explanation="PIPELINE-EXPLANATION",
        probability=0.12,
    )
    assignment = claims_assignment(rater_a, summary=summary)
    client.force_login(rater_a)
    html = client.get(f"/rate/{assignment.uuid}/").content.decode()
    assert "&lt;script&gt;alert(1)&lt;/script&gt; claim" in html
    assert "<script>alert(1)" not in html
    assert "PIPELINE-EXPLANATION" not in html and "0.12" not in html
    claim = summary.claims.get()
    # The form posts answers claim by claim (annotate/forms.py field names).
    response = client.post(
        f"/rate/{assignment.uuid}/",
        {
            "action": "submit",
            "version": "1",
            f"claims_supported__{claim.uuid}": "not_supported",
            f"claims_supported__{claim.uuid}__rationale": "The source says the opposite.",
            "overall": "2",
        },
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    answers, rationales = revision_answers(revision_history(assignment)[-1])
    assert answers["claims_supported"] == {str(claim.uuid): "not_supported"}
    assert rationales["claims_supported"] == {str(claim.uuid): "The source says the opposite."}


@pytest.mark.django_db
def test_disagreements_count_the_claims_raters_answered_differently(rater_a, rater_b):
    from annotate.models import Batch

    study = StudyFactory(rubric=load_builtin_rubric(key="claims"))
    summary = SummaryFactory(study=study, source=SourceFactory(study=study), text=SUMMARY)
    batch = Batch.objects.create(study=study, name="b", seed=1, raters_per_item=2)
    ids = ["sentence-1", "sentence-2", "sentence-3"]
    for rater, labels in ((rater_a, ["supported"] * 3), (rater_b, ["supported", "not_supported", "cannot_tell"])):
        assignment = AssignmentFactory(summary=summary, rater=rater, position=0, batch=batch)
        answers, rationales = complete(ids, labels)
        submit_rating(assignment=assignment, rater=rater, answers=answers, rationales=rationales, version=1)
    rows = batch_disagreements(batch, question="claims_supported")
    assert len(rows) == 1 and rows[0].spread == 2.0
    assert {
        "sentence-1": "supported",
        "sentence-2": "not_supported",
        "sentence-3": "cannot_tell",
    } in list(rows[0].values.values())
    # The study admin's disagreements page lists them claim by claim.
    from annotate.models import StudyMembership
    from annotate.services.members import add_study_member
    from tests.factories import UserFactory

    admin = UserFactory(username="claims-admin")
    add_study_member(study=study, user=admin, role=StudyMembership.Role.ADMIN)
    client = Client()
    client.force_login(admin)
    page = client.get(f"/studies/{study.slug}/batches/{batch.uuid}/disagreements/?question=claims_supported")
    assert page.status_code == 200
    assert "sentence-2: not_supported; sentence-3: cannot_tell" in page.content.decode()


@pytest.mark.django_db
def test_the_study_report_compares_people_with_the_pipelines_calls_and_drafts_with_revisions(rater_a, rater_b):
    from analysis.services import compute_study_report

    study = StudyFactory(rubric=load_builtin_rubric(key="claims"))
    source = SourceFactory(study=study)
    draft = SummaryFactory(study=study, source=source, key="draft", text="One. Two.")
    revised = SummaryFactory(study=study, source=source, key="revised", text="One.", parent=draft)
    calls = {"draft": ["not_supported", "not_supported"], "revised": ["supported"]}
    for summary in (draft, revised):
        for index, verdict in enumerate(calls[summary.key]):
            Claim.objects.create(summary=summary, index=index, text=f"claim {index}", verdict=verdict)
    # People: the draft's first call is right, its second is not; the revision's claim is supported.
    labels = {"draft": ["not_supported", "supported"], "revised": ["supported"]}
    for rater in (rater_a, rater_b):
        for summary in (draft, revised):
            assignment = AssignmentFactory(summary=summary, rater=rater, position=0)
            ids = [u.id for u in claim_units(summary)]
            answers, rationales = complete(ids, labels[summary.key])
            submit_rating(assignment=assignment, rater=rater, answers=answers, rationales=rationales, version=1)

    report = compute_study_report(study=study, n_resamples=50)
    (section,) = report["claim_judgements"]
    assert section["question"] == "claims_supported" and section["n_judgements"] == 6
    assert section["agreement"]["n_claims"] == 3 and section["agreement"]["percent_agreement"] == 1.0
    detector = section["detector"]
    assert detector["confusion"] == {"tp": 1, "fp": 1, "fn": 0, "tn": 1}
    assert detector["precision"]["value"] == 0.5
    assert [(r["rater"], r["precision"]["value"]) for r in detector["per_rater"]] == [
        ("rater_a", 0.5),
        ("rater_b", 0.5),
    ]
    assert section["before_after_revision"] == {
        "n_pairs": 1,
        "draft_mean": 1.0,
        "revision_mean": 0.0,
        "mean_change": -1.0,
        "fewer": 1,
        "more": 0,
    }


@pytest.mark.django_db
def test_the_example_claims_study_imports_with_its_recorded_claims():
    from pathlib import Path

    from django.core.management import call_command

    from annotate.models import Study

    call_command("import_jsonl", str(Path(__file__).resolve().parents[2] / "fixtures" / "claims-example.jsonl"))
    study = Study.objects.get(slug="claims-example")
    assert study.rubric.key == "claims"
    summary = study.summaries.get(key="asthma-1")
    units = claim_units(summary)
    assert [u.recorded for u in units] == [True, True, True]
    assert all(summary.text[u.start : u.end] == u.text for u in units)
    assert list(summary.claims.order_by("index").values_list("verdict", flat=True)) == [
        "supported",
        "not_supported",
        "supported",
    ]


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("answer", "rationale", "message"),
    [
        (["supported"], None, "must be an object mapping claim ids to answers"),
        ({"sentence-1": ["supported"]}, None, "Claim 1: must be one of supported, not_supported, cannot_tell"),
        ({"sentence-1": "supported"}, {"sentence-1": 7}, "Claim 1: the rationale must be text"),
    ],
)
def test_malformed_per_claim_answers_get_a_400_naming_the_question_and_change_nothing(
    rater_a, answer, rationale, message
):
    assignment = claims_assignment(rater_a)
    response = api_client_for(rater_a).put(
        f"/api/assignments/{assignment.uuid}/rating/",
        {"version": 1, "answers": {"claims_supported": answer}, "rationales": {"claims_supported": rationale}},
        format="json",
    )
    assert response.status_code == 400, response.content
    assert response.json()["error"]["fields"]["claims_supported"] == message
    assert not Revision.objects.exists()
