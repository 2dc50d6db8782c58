"""Every text a rater or study admin writes has a stated limit (docs/security.md, "Limits"),
enforced with a 400 naming the field and the limit, through the API and the pages alike,
and nothing is stored (a skip reason used to be cut to 5,000 characters
without a word, a note had no limit at all). Scale answers are numbers (F8)."""

import pytest

from annotate.models import Assignment, ConsensusAnswer, DiscussionNote, ExpectedAnswer, Revision
from annotate.services.batches import create_batch
from tests.conftest import GOOD_ANSWERS, api_client_for
from tests.factories import SummaryFactory


@pytest.fixture
def batch(study, rater_a, rater_b):
    for _ in range(2):
        SummaryFactory(source__study=study)
    return create_batch(study=study, name="main", raters=[rater_a, rater_b], design="k_raters", k=2, seed=1)


def refused(response, field: str, limit: str) -> str:
    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert limit in error["fields"][field], error
    return error["fields"][field]


# --- skip reasons: 5,000 characters ----------------------------------------------------------------


@pytest.mark.django_db
def test_a_skip_reason_over_5000_characters_is_refused_not_cut(assignment_a, rater_a):
    client = api_client_for(rater_a)
    url = f"/api/assignments/{assignment_a.uuid}/skip/"
    response = client.post(url, {"version": 1, "reason": "x" * 1_000_000}, format="json")
    assert refused(response, "reason", "at most 5,000") == "is 1,000,000 characters long; at most 5,000 are allowed"
    assignment_a.refresh_from_db()
    assert assignment_a.state == Assignment.State.PENDING and assignment_a.skip_reason == ""
    ok = client.post(url, {"version": 1, "reason": "y" * 5000}, format="json")
    assert ok.status_code == 200
    assignment_a.refresh_from_db()
    assert assignment_a.skip_reason == "y" * 5000  # whole, as written


@pytest.mark.django_db
def test_a_skip_reason_over_the_limit_on_the_rating_page_says_so(client, assignment_a, rater_a):
    client.force_login(rater_a)
    response = client.post(f"/rate/{assignment_a.uuid}/", {"action": "skip", "version": 1, "skip_reason": "x" * 5001})
    assert response.status_code == 400
    assert "at most 5,000" in response.content.decode()
    assignment_a.refresh_from_db()
    assert assignment_a.state == Assignment.State.PENDING


# --- rationales and text answers: 20,000 ------------------------------------------------------------


@pytest.mark.django_db
def test_a_rationale_over_20000_characters_is_a_400_naming_the_question(assignment_a, rater_a):
    response = api_client_for(rater_a).put(
        f"/api/assignments/{assignment_a.uuid}/rating/",
        {"version": 1, "answers": {"overall": 4}, "rationales": {"overall": "r" * 20_001}},
        format="json",
    )
    assert response.status_code == 400
    assert "20000" in response.json()["error"]["fields"]["overall"].replace(",", "")
    assert not Revision.objects.exists()


# --- notes, consensus rationales, expected answers' explanations: 20,000 ----------------------------


@pytest.mark.django_db
def test_a_note_over_20000_characters_is_refused_by_the_api_and_the_page(client, admin_user, study, batch):
    summary = batch.assignments.first().summary
    url = f"/api/studies/{study.slug}/batches/{batch.uuid}/notes/"
    response = api_client_for(admin_user).post(
        url, {"summary": str(summary.uuid), "text": "n" * 1_000_000}, format="json"
    )
    refused(response, "text", "at most 20,000")
    client.force_login(admin_user)
    page = client.post(
        f"/studies/{study.slug}/batches/{batch.uuid}/items/{summary.uuid}/", {"action": "note", "text": "n" * 20_001}
    )
    assert page.status_code == 400 and "at most 20,000" in page.content.decode()
    assert not DiscussionNote.objects.exists()
    ok = api_client_for(admin_user).post(url, {"summary": str(summary.uuid), "text": "n" * 20_000}, format="json")
    assert ok.status_code == 201 and len(DiscussionNote.objects.get().text) == 20_000


@pytest.mark.django_db
def test_a_consensus_rationale_over_20000_characters_is_refused(client, admin_user, study, batch):
    summary = batch.assignments.first().summary
    response = api_client_for(admin_user).post(
        f"/api/studies/{study.slug}/batches/{batch.uuid}/consensus/",
        {"summary": str(summary.uuid), "question": "overall", "value": 4, "rationale": "c" * 20_001},
        format="json",
    )
    refused(response, "rationale", "at most 20,000")
    client.force_login(admin_user)
    page = client.post(
        f"/studies/{study.slug}/batches/{batch.uuid}/items/{summary.uuid}/",
        {"action": "consensus", "question": "overall", "value": "4", "rationale": "c" * 20_001},
    )
    assert page.status_code == 400 and "at most 20,000" in page.content.decode()
    assert not ConsensusAnswer.objects.exists()
    # The page's form posts the number as text, and that is read as the number.
    ok = client.post(
        f"/studies/{study.slug}/batches/{batch.uuid}/items/{summary.uuid}/",
        {"action": "consensus", "question": "overall", "value": "4", "rationale": "Agreed."},
    )
    assert ok.status_code == 302 and ConsensusAnswer.objects.get().value == 4


@pytest.mark.django_db
def test_an_expected_answers_explanation_over_20000_characters_is_refused(client, admin_user, study, batch):
    summary = batch.assignments.first().summary
    client.force_login(admin_user)
    page = client.post(
        f"/studies/{study.slug}/gold/{summary.uuid}/",
        {"overall": "4", "purpose": "gold", "explanation": "e" * 20_001},
    )
    assert page.status_code == 400 and "at most 20,000" in page.content.decode()
    assert not ExpectedAnswer.objects.exists()


@pytest.mark.django_db
def test_a_batch_name_over_200_characters_is_refused(admin_user, study, rater_a):
    SummaryFactory(source__study=study)
    response = api_client_for(admin_user).post(
        f"/api/studies/{study.slug}/batches/",
        {"name": "b" * 201, "raters": ["rater_a"], "design": "k_raters", "k": 1},
        format="json",
    )
    assert response.status_code == 400 and "200" in str(response.json()["error"]["fields"]["name"])


# --- scale answers are numbers (F8) --------------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize("endpoint", ["rating", "submit"])
def test_a_scale_answer_given_as_text_is_a_400_naming_the_question(assignment_a, rater_a, endpoint):
    client = api_client_for(rater_a)
    body = {"version": 1, "answers": {**GOOD_ANSWERS, "overall": "3"}}
    url = f"/api/assignments/{assignment_a.uuid}/{endpoint}/"
    response = client.put(url, body, format="json") if endpoint == "rating" else client.post(url, body, format="json")
    assert response.status_code == 400
    message = response.json()["error"]["fields"]["overall"]
    assert "must be a number" in message and "'3'" in message
    assert not Revision.objects.exists()


@pytest.mark.django_db
def test_the_rating_page_still_takes_the_number_its_form_posts_as_text(client, assignment_a, rater_a):
    client.force_login(rater_a)
    response = client.post(
        f"/rate/{assignment_a.uuid}/",
        {"action": "save", "version": 1, "overall": "3", "failure_modes": ["misattribution"]},
    )
    assert response.status_code in (200, 302), response.content[:500]
    assert Revision.objects.get().ratings.get(question="overall").score == 3


@pytest.mark.django_db
def test_the_admins_free_text_has_its_limit_too(client, admin_user, study):
    before = study.guidelines
    client.force_login(admin_user)
    url = f"/admin/annotate/study/{study.pk}/change/"
    form = client.get(url)
    assert 'maxlength="50000"' in form.content.decode()
    response = client.post(
        url,
        {
            "slug": study.slug,
            "title": study.title,
            "rubric": study.rubric_id,
            "guidelines": "g" * 50_001,
            "memberships-TOTAL_FORMS": "0",
            "memberships-INITIAL_FORMS": "0",
        },
    )
    assert response.status_code == 200  # the form again, with the error at the field
    assert "at most 50000 characters" in response.content.decode()
    study.refresh_from_db()
    assert study.guidelines == before
