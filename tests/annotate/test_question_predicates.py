"""What a rubric question is, asked of the question: one answer per predicate for each
kind, and the page and the API agree on which questions take a consensus answer."""

import pytest
from rest_framework.test import APIClient

from annotate.models import ConsensusAnswer, StudyMembership
from annotate.rubrics import RubricDefinition
from annotate.selectors.contents import rubric_definition
from annotate.services.adjudication import record_consensus
from annotate.services.batches import create_batch
from annotate.services.members import add_study_member
from core.exceptions import ApplicationError
from tests.annotate.factpico import make_factpico_assignment
from tests.factories import UserFactory

# Expected answers written from docs/rubric-format.md, not from the predicates.
EXPECTED = {
    #  kind:        (adjudicable, comparable, per_finding, highlights, several_options, free_text, plain_scale)
    "scale": (True, True, False, False, False, False, True),
    "choice": (True, True, False, False, False, False, False),
    "checkboxes": (True, True, False, False, True, False, False),
    "text": (True, False, False, False, False, True, False),
    "per_finding": (False, True, True, False, False, False, False),
    "span": (False, True, False, True, False, False, False),
}
PREDICATES = ("adjudicable", "comparable", "per_finding", "highlights", "several_options", "free_text", "plain_scale")


def _definition() -> RubricDefinition:
    scale = [{"value": v, "label": str(v)} for v in (1, 2, 3)]
    AB = [{"value": "a", "label": "A"}, {"value": "b", "label": "B"}]
    return RubricDefinition.from_dict(
        {
            "key": "kinds",
            "title": "Every kind",
            "questions": [
                {"key": "scale", "kind": "scale", "prompt": "S", "options": scale},
                {"key": "choice", "kind": "choice", "prompt": "C", "options": AB},
                {"key": "checkboxes", "kind": "checkboxes", "prompt": "B", "options": AB},
                {"key": "text", "kind": "text", "prompt": "T"},
                {"key": "per_finding", "kind": "per_finding", "prompt": "F", "options": scale},
                {
                    "key": "span",
                    "kind": "span",
                    "prompt": "H",
                    "target": "summary",
                    "span_questions": [
                        {
                            "key": "factual",
                            "kind": "choice",
                            "prompt": "?",
                            "options": [{"value": "yes", "label": "Y"}, {"value": "no", "label": "N"}],
                        }
                    ],
                },
            ],
        }
    )


@pytest.mark.parametrize("kind", sorted(EXPECTED))
def test_each_kind_answers_every_predicate(kind):
    question = _definition().question(kind)
    assert tuple(getattr(question, p) for p in PREDICATES) == EXPECTED[kind]
    assert question.template == f"annotate/questions/{kind}.html"
    assert question.has_sub_questions == (kind == "span")


@pytest.fixture
def factpico_batch(db):
    rater = UserFactory(username="fp-rater")
    assignment, _ = make_factpico_assignment(rater)
    study = assignment.study
    admin = UserFactory(username="fp-admin")
    add_study_member(study=study, user=admin, role=StudyMembership.Role.ADMIN)
    batch = create_batch(
        study=study, name="main", raters=[UserFactory(username="fp-batch-rater")], design="k_raters", k=1, seed=1
    )
    return batch, admin


def test_consensus_is_refused_for_questions_an_admin_cannot_adjudicate(factpico_batch):
    batch, admin = factpico_batch
    summary = batch.assignments.first().summary
    definition = rubric_definition(batch.study.rubric)
    for question in (q for q in definition.questions if not q.adjudicable):
        with pytest.raises(ApplicationError, match="takes no consensus answer"):
            record_consensus(
                batch=batch, summary=summary, question=question.key, value={}, rationale="", decided_by=admin
            )
    assert ConsensusAnswer.objects.count() == 0


def test_page_and_api_offer_the_same_questions_for_consensus(factpico_batch):
    batch, admin = factpico_batch
    study, summary = batch.study, batch.assignments.first().summary
    definition = rubric_definition(study.rubric)
    client = APIClient()
    client.force_authenticate(admin)
    accepted_by_api = set()
    for q in definition.questions:
        response = client.post(
            f"/api/studies/{study.slug}/batches/{batch.uuid}/consensus/",
            {"summary": str(summary.uuid), "question": q.key, "value": None},
            format="json",
        )
        assert response.status_code == 400  # no value: refused either way, never a 500
        if "takes no consensus answer" not in response.json()["error"]["message"]:
            accepted_by_api.add(q.key)
    client.force_login(admin)
    page = client.get(f"/studies/{study.slug}/batches/{batch.uuid}/items/{summary.uuid}/")
    offered_by_page = {q.key for q in page.context["consensus_questions"]}
    assert offered_by_page == accepted_by_api == {q.key for q in definition.questions if q.adjudicable}
