"""Text that is not valid Unicode (a lone UTF-16 surrogate, which a browser sends when an
emoji is cut in half) or holds a NUL (which PostgreSQL refuses) is refused with a 400
naming the field at every entry point, and nothing is stored. One such answer used to be
stored on SQLite behind a 500, after which the rater's page, the admin's pages and every
export of the study failed; on PostgreSQL it was a 500.

The bodies are written as raw JSON: `\\ud83d` is how a client sends a lone surrogate."""

import pytest

from annotate.models import Assignment, ConsensusAnswer, DiscussionNote, ExpectedAnswer, Revision
from annotate.rubrics import AnswerValidationError
from annotate.services.batches import create_batch
from annotate.services.ratings import save_draft
from tests.annotate.factpico import make_factpico_assignment
from tests.conftest import api_client_for
from tests.factories import SummaryFactory

# (what, the JSON members after "version", the field the error names)
BAD_BODIES = [
    ("a free-text answer", '"answers": {"feedback": "Cite it \\ud83d"}', "answers.feedback"),
    ("an answer key", '"answers": {"feedback\\ud83d": "x"}', "answers"),
    ("a ticked option", '"answers": {"failure_modes": ["misattribution", "\\udc00"]}', "answers.failure_modes[1]"),
    ("a rationale key", '"rationales": {"\\ud83d": "x"}', "rationales"),
    ("a rationale", '"rationales": {"overall": "Fine \\ud83d"}', "rationales.overall"),
    ("a NUL in an answer", '"answers": {"feedback": "a\\u0000b"}', "answers.feedback"),
]


def nothing_stored(assignment) -> bool:
    version = assignment.version
    assignment.refresh_from_db()
    return assignment.version == version and not Revision.objects.filter(assignment=assignment).exists()


@pytest.mark.django_db
@pytest.mark.parametrize("endpoint", ["rating", "submit"])
@pytest.mark.parametrize(("what", "members", "field"), BAD_BODIES, ids=[b[0] for b in BAD_BODIES])
def test_the_api_refuses_bad_text_naming_the_field(client, assignment_a, rater_a, endpoint, what, members, field):
    api = api_client_for(rater_a)
    url = f"/api/assignments/{assignment_a.uuid}/{endpoint}/"
    body = '{"version": 1, ' + members + "}"
    response = (api.put if endpoint == "rating" else api.post)(url, body, content_type="application/json")
    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert error["code"] == "invalid" and field in error["fields"], error
    assert "lone surrogate" in error["fields"][field] or "NUL" in error["fields"][field]
    assert nothing_stored(assignment_a)
    # The study is not broken: the rater's page and the API still answer.
    client.force_login(rater_a)
    assert client.get(f"/rate/{assignment_a.uuid}/").status_code == 200
    assert api.get(f"/api/assignments/{assignment_a.uuid}/rating/").status_code == 200


@pytest.mark.django_db
def test_the_service_refuses_bad_text_for_every_caller(assignment_a, rater_a):
    with pytest.raises(AnswerValidationError) as error:
        save_draft(assignment=assignment_a, rater=rater_a, answers={"feedback": "x\ud83d"}, version=1)
    assert set(error.value.errors) == {"feedback"}
    with pytest.raises(AnswerValidationError) as error:
        save_draft(assignment=assignment_a, rater=rater_a, answers={"x\ud83d": 1}, version=1)
    assert set(error.value.errors) == {"answers"}
    assert nothing_stored(assignment_a)


@pytest.mark.django_db
def test_the_rating_page_refuses_a_nul_next_to_its_question(client, assignment_a, rater_a):
    client.force_login(rater_a)
    client.get(f"/rate/{assignment_a.uuid}/")
    response = client.post(
        f"/rate/{assignment_a.uuid}/", {"action": "submit", "version": 1, "overall": "3", "feedback": "Cite\x00 it"}
    )
    assert response.status_code == 400
    html = response.content.decode()
    error = html.split('id="q-feedback-error"')[1].split("</p>")[0]
    assert "NUL" in error
    assert nothing_stored(assignment_a)


@pytest.mark.django_db
def test_the_rating_page_refuses_a_surrogate_inside_a_highlight(client, rater_a):
    assignment, _ = make_factpico_assignment(rater_a)
    text = assignment.summary.text
    start = text.index("a dummy pill")
    spans = (
        f'[{{"start": {start}, "end": {start + 12}, "text": "a dummy pill", '
        '"answers": {"factual": "yes"}, "rationale": "Plain \\ud83d"}]'
    )
    client.force_login(rater_a)
    response = client.post(f"/rate/{assignment.uuid}/", {"action": "save", "version": 1, "added_info__json": spans})
    assert response.status_code == 400
    error = response.content.decode().split('id="q-added_info-error"')[1].split("</p>")[0]
    assert "lone surrogate" in error
    assert nothing_stored(assignment)


@pytest.mark.django_db
def test_skip_reasons_with_bad_text_are_refused(client, assignment_a, rater_a):
    api = api_client_for(rater_a)
    response = api.post(
        f"/api/assignments/{assignment_a.uuid}/skip/",
        '{"version": 1, "reason": "no \\ud83d"}',
        content_type="application/json",
    )
    assert response.status_code == 400 and "reason" in response.json()["error"]["fields"]
    client.force_login(rater_a)
    page = client.post(f"/rate/{assignment_a.uuid}/", {"action": "skip", "version": 1, "skip_reason": "no\x00"})
    assert page.status_code == 400
    assignment_a.refresh_from_db()
    assert assignment_a.state != Assignment.State.SKIPPED and assignment_a.skip_reason == ""


@pytest.fixture
def batch(study, rater_a, rater_b):
    for _ in range(2):
        SummaryFactory(source__study=study)
    return create_batch(study=study, name="main", raters=[rater_a, rater_b], design="k_raters", k=2, seed=1)


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("post", "named"),
    [
        ({"action": "note", "text": "Discuss\x00 this"}, "text"),
        ({"action": "note", "text": "Fine", "question": "overall\x00"}, "question"),
        (
            {"action": "consensus", "question": "failure_modes", "value": "hallucination", "rationale": "x\x00"},
            "rationale",
        ),
        ({"action": "consensus", "question": "feedback", "value": "Agreed\x00"}, "feedback"),
    ],
)
def test_the_item_page_refuses_bad_text_naming_the_field(client, admin_user, study, batch, post, named):
    summary = batch.assignments.first().summary
    client.force_login(admin_user)
    response = client.post(f"/studies/{study.slug}/batches/{batch.uuid}/items/{summary.uuid}/", post)
    assert response.status_code == 400
    error = response.content.decode().split('class="error form-error" role="alert">')[1].split("</p>")[0]
    assert error.startswith(f"{named}: ") and ("NUL" in error or "lone surrogate" in error), error
    assert not DiscussionNote.objects.exists()
    assert not ExpectedAnswer.objects.exists() and not ConsensusAnswer.objects.exists()


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("batches/", '{"name": "b\\ud83d", "raters": ["rater_a"], "k": 1}', "name"),
        ("batches/", '{"name": "b", "raters": ["rater_a\\ud83d"], "k": 1}', "raters[0]"),
        ("batches/{batch}/notes/", '{"summary": "{summary}", "text": "x\\ud83d"}', "text"),
        ("batches/{batch}/consensus/", '{"summary": "{summary}", "question": "feedback", "value": "\\ud83d"}', "value"),
        (
            "batches/{batch}/consensus/",
            '{"summary": "{summary}", "question": "overall", "value": 3, "rationale": "\\udfff"}',
            "rationale",
        ),
    ],
)
def test_study_admin_endpoints_refuse_bad_text_naming_the_field(admin_user, study, batch, path, body, field):
    summary = batch.assignments.first().summary
    url = f"/api/studies/{study.slug}/" + path.replace("{batch}", str(batch.uuid))
    response = api_client_for(admin_user).post(
        url, body.replace("{summary}", str(summary.uuid)), content_type="application/json"
    )
    assert response.status_code == 400, response.content
    assert field in response.json()["error"]["fields"], response.json()
    assert study.batches.count() == 1
    assert not DiscussionNote.objects.exists() and not ConsensusAnswer.objects.exists()


@pytest.mark.django_db
def test_the_batch_page_move_refuses_a_nul_username(client, admin_user, study, batch):
    assignment = batch.assignments.first()
    client.force_login(admin_user)
    response = client.post(
        f"/studies/{study.slug}/batches/{batch.uuid}/",
        {"action": "move", "assignment": str(assignment.uuid), "to": "rater_b\x00"},
        follow=True,
    )
    assert response.status_code == 200
    assert "to: contains a NUL character" in response.content.decode()
    assignment.refresh_from_db()
    assert assignment.state != Assignment.State.WITHDRAWN


@pytest.mark.django_db
@pytest.mark.parametrize(("refs", "problem"), [('["PMC1", "\\ud83d"]', "lone surrogate"), ('["a\\u0000"]', "NUL")])
def test_the_admin_refuses_bad_text_inside_a_json_field(client, admin_user, summary, refs, problem):
    client.force_login(admin_user)
    response = client.post(
        "/admin/annotate/claim/add/",
        {"summary": summary.pk, "index": 0, "text": "A claim.", "refs": refs, "verdict": "unverified"},
    )
    assert response.status_code == 200
    assert problem in response.content.decode()
    assert not summary.claims.exists()


@pytest.mark.django_db
def test_the_admin_still_saves_good_json(client, admin_user, summary):
    client.force_login(admin_user)
    response = client.post(
        "/admin/annotate/claim/add/",
        {"summary": summary.pk, "index": 0, "text": "A claim.", "refs": '["PMC1", "🫁"]', "verdict": "unverified"},
    )
    assert response.status_code == 302
    assert summary.claims.get().refs == ["PMC1", "🫁"]
