"""A recruitment link's participant account belongs to its study: no form or API of another
study lists it, assigns it work or adds it to Members, even for a superuser who may enrol
any account (docs/recruitment.md)."""

import pytest

from annotate.models import Assignment, StudyMembership
from annotate.services.batches import create_batch
from annotate.services.members import add_study_member
from core.exceptions import ApplicationError
from recruit.services import participation
from tests.conftest import api_client_for
from tests.factories import StudyFactory, SummaryFactory
from tests.recruit.helpers import make_link

pytestmark = pytest.mark.django_db


@pytest.fixture
def crowd(study):
    """A participant of `study`, and another study with summaries and a batch."""
    link = make_link(study, items=1)
    participant, _ = participation.arrive(link=link, panel="prolific", external_id="ELSEWHERE1")
    other = StudyFactory(slug="other-study")
    for _ in range(3):
        SummaryFactory(source__study=other)
    return {"user": participant.user, "other": other}


def _nothing_given(crowd):
    user, other = crowd["user"], crowd["other"]
    assert not StudyMembership.objects.filter(study=other, user=user).exists()
    assert not Assignment.objects.filter(study=other, rater=user).exists()


def test_the_new_batch_form_never_lists_or_takes_another_studys_participant(client, admin_user, rater_a, crowd):
    other = crowd["other"]
    client.force_login(admin_user)
    url = f"/studies/{other.slug}/batches/new/"
    page = client.get(url).content.decode()
    assert crowd["user"].username not in page
    assert rater_a.username in page  # the superuser may enrol any other account
    response = client.post(
        url, {"name": "b", "kind": "main", "raters": [crowd["user"].pk], "design": "k_raters", "k": 1, "seed": 1}
    )
    assert response.status_code == 400
    _nothing_given(crowd)


def test_members_add_existing_account_refuses_another_studys_participant(client, admin_user, crowd):
    other = crowd["other"]
    client.force_login(admin_user)
    response = client.post(
        f"/studies/{other.slug}/members/", {"action": "add", "account": crowd["user"].username, "role": "rater"}
    )
    assert "No single active account" in response.content.decode()
    _nothing_given(crowd)


def test_the_batch_api_refuses_another_studys_participant(admin_user, crowd):
    other = crowd["other"]
    api = api_client_for(admin_user)
    response = api.post(
        f"/api/studies/{other.slug}/batches/",
        {"name": "b", "kind": "main", "raters": [crowd["user"].username], "design": "k_raters", "k": 1, "seed": 1},
        format="json",
    )
    assert response.status_code == 400
    assert crowd["user"].username in str(response.json()["error"]["fields"]["raters"])
    _nothing_given(crowd)


def test_moving_an_item_to_another_studys_participant_is_refused(admin_user, rater_a, crowd):
    other = crowd["other"]
    add_study_member(study=other, user=rater_a, role=StudyMembership.Role.RATER)
    batch = create_batch(study=other, name="b", raters=[rater_a], design="k_raters", seed=1, k=1)
    item = batch.assignments.first()
    response = api_client_for(admin_user).post(
        f"/api/studies/{other.slug}/batches/{batch.uuid}/assignments/{item.uuid}/move/",
        {"to": crowd["user"].username},
        format="json",
    )
    assert response.status_code == 400
    _nothing_given(crowd)


def test_services_refuse_another_studys_participant_whatever_calls_them(crowd, study):
    """`manage.py create_batch --raters` and any other caller reach the same services."""
    other = crowd["other"]
    with pytest.raises(ApplicationError):
        create_batch(study=other, name="b", raters=[crowd["user"]], design="k_raters", seed=1, k=1)
    with pytest.raises(ApplicationError):
        add_study_member(study=other, user=crowd["user"], role=StudyMembership.Role.RATER)
    _nothing_given(crowd)
    # In its own study the account is a member as before.
    assert add_study_member(study=study, user=crowd["user"], role=StudyMembership.Role.RATER).study == study
