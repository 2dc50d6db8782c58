"""Inputs that used to answer 500 get a 4xx naming the field, through the API and the
pages, and change nothing: JSON nested hundreds of levels deep, a question longer than
the column, seed=10**30, an unknown stratify_by without n, an assignment id that is not a
uuid. (NUL bytes and surrogates: test_invalid_text.py; random posts: test_form_fuzz.py.)"""

import pytest

from annotate.models import Batch, DiscussionNote, Revision
from annotate.services.batches import create_batch
from core.exceptions import ApplicationError
from tests.annotate.factpico import make_factpico_assignment
from tests.conftest import api_client_for
from tests.factories import SummaryFactory


def deep(levels: int) -> str:
    return "[" * levels + "]" * levels


@pytest.fixture
def batch(study, rater_a, rater_b):
    for _ in range(3):
        SummaryFactory(source__study=study)
    return create_batch(study=study, name="main", raters=[rater_a, rater_b], design="k_raters", k=2, seed=1)


def error_of(response, status: int = 400) -> dict:
    assert response.status_code == status, response.content
    return response.json()["error"]


# --- JSON nested hundreds of levels deep ---------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize("levels", [200, 900, 50_000])
def test_deeply_nested_json_to_the_api_is_a_400_naming_the_field(assignment_a, rater_a, levels):
    body = '{"version": 1, "answers": {"feedback": ' + deep(levels) + "}}"
    response = api_client_for(rater_a).put(
        f"/api/assignments/{assignment_a.uuid}/rating/", body, content_type="application/json"
    )
    error = error_of(response)
    assert error["fields"] == {"answers": "is nested more than 64 levels deep"}
    assert not Revision.objects.exists()


@pytest.mark.django_db
def test_deeply_nested_json_to_a_study_admin_endpoint_is_a_400(admin_user, study, batch):
    summary = batch.assignments.first().summary
    client = api_client_for(admin_user)
    body = f'{{"summary": "{summary.uuid}", "question": "feedback", "value": {deep(5000)}}}'
    error = error_of(
        client.post(f"/api/studies/{study.slug}/batches/{batch.uuid}/consensus/", body, content_type="application/json")
    )
    assert "value" in error["fields"]
    error = error_of(client.post(f"/api/studies/{study.slug}/batches/", deep(5000), content_type="application/json"))
    assert error["fields"] == {"body": "is nested more than 64 levels deep"}


@pytest.mark.django_db
def test_deeply_nested_highlights_on_the_rating_page_are_a_400_on_the_question(client, rater_a):
    assignment, _ = make_factpico_assignment(rater_a)
    client.force_login(rater_a)
    response = client.post(
        f"/rate/{assignment.uuid}/", {"action": "save", "version": 1, "added_info__json": deep(5000)}
    )
    assert response.status_code == 400
    assert "is nested more than 64 levels deep" in response.content.decode().split('id="q-added_info-error"')[1]
    assert not Revision.objects.exists()


# --- a question longer than the column (100 characters) ------------------------------------


@pytest.mark.django_db
def test_a_note_about_an_overlong_or_unknown_question_is_refused(client, admin_user, study, batch):
    summary = batch.assignments.first().summary
    client.force_login(admin_user)
    page = client.post(
        f"/studies/{study.slug}/batches/{batch.uuid}/items/{summary.uuid}/",
        {"action": "note", "text": "Look again.", "question": "q" * 150},
    )
    assert page.status_code == 400 and "question: is not a question of the study" in page.content.decode()
    api = api_client_for(admin_user)
    url = f"/api/studies/{study.slug}/batches/{batch.uuid}/notes/"
    for question in ("q" * 150, "nope"):
        error = error_of(
            api.post(url, {"summary": str(summary.uuid), "text": "x", "question": question}, format="json")
        )
        assert "question" in error["fields"]
    assert not DiscussionNote.objects.exists()
    # A note on a real question, or on the whole item, is still fine.
    for question in ("overall", ""):
        ok = api.post(url, {"summary": str(summary.uuid), "text": "x", "question": question}, format="json")
        assert ok.status_code == 201, ok.json()


@pytest.mark.django_db
def test_a_consensus_on_an_overlong_question_is_refused(admin_user, study, batch):
    summary = batch.assignments.first().summary
    response = api_client_for(admin_user).post(
        f"/api/studies/{study.slug}/batches/{batch.uuid}/consensus/",
        {"summary": str(summary.uuid), "question": "q" * 150, "value": 3},
        format="json",
    )
    assert "question" in error_of(response)["fields"]


# --- seed=10**30 and an unknown stratify_by without n ----------------------------------------


BATCH_FORM = {"name": "second", "kind": "main", "design": "k_raters", "k": "1", "share": "0.2", "m": "1", "seed": "0"}


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"seed": str(10**30)}, "seed"),
        ({"seed": str(-(10**30))}, "seed"),
        ({"stratify_by": "bogus"}, "stratify_by"),
        ({"stratify_by": "generator, source."}, "stratify_by"),
        ({"attention_every": str(10**6)}, "attention_every"),
        ({"k": str(10**30)}, "k"),
        # A user id no column can hold: SQLite could not even bind it (found by test_form_fuzz).
        ({"raters": [str(10**30)]}, "raters"),
    ],
)
def test_the_batch_form_refuses_out_of_range_options_naming_the_field(
    client, admin_user, study, batch, rater_a, change, field
):
    client.force_login(admin_user)
    response = client.post(f"/studies/{study.slug}/batches/new/", {**BATCH_FORM, "raters": [rater_a.pk], **change})
    assert response.status_code == 400
    fields_with_errors = [
        block.split("</div>")[0] for block in response.content.decode().split('<div class="field has-error"')[1:]
    ]
    assert [block for block in fields_with_errors if f'id="id_{field}' in block], fields_with_errors
    assert Batch.objects.filter(study=study).count() == 1


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"seed": 10**30}, "seed"),
        ({"stratify_by": ["bogus"]}, "stratify_by"),
        ({"stratify_by": ["bogus"], "n": 1}, "stratify_by"),
    ],
)
def test_the_batch_api_refuses_out_of_range_options_naming_the_field(admin_user, study, batch, change, field):
    response = api_client_for(admin_user).post(
        f"/api/studies/{study.slug}/batches/",
        {"name": "second", "raters": ["rater_a"], "k": 1, **change},
        format="json",
    )
    assert field in error_of(response)["fields"]
    assert Batch.objects.filter(study=study).count() == 1


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"seed": 10**30}, "seed"),
        ({"stratify_by": ["bogus"]}, "stratify_by"),
        ({"attention_every": 40_000}, "attention_every"),
    ],
)
def test_create_batch_names_the_bad_option_for_every_caller(study, batch, rater_a, change, field):
    options = {"study": study, "name": "second", "raters": [rater_a], "design": "k_raters", "k": 1, "seed": 0}
    with pytest.raises(ApplicationError) as error:
        create_batch(**{**options, **change})
    assert set(error.value.extra["fields"]) == {field}
    assert Batch.objects.filter(study=study).count() == 1


# --- an assignment id that is not a uuid --------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize("value", ["", "not-a-uuid", "1"])
def test_a_batch_page_action_on_a_malformed_assignment_id_is_refused(client, admin_user, study, batch, value):
    client.force_login(admin_user)
    response = client.post(
        f"/studies/{study.slug}/batches/{batch.uuid}/", {"action": "withdraw", "assignment": value}, follow=True
    )
    assert response.status_code == 200
    assert "No such assignment in this batch." in response.content.decode()
    assert not batch.assignments.filter(state="withdrawn").exists()
