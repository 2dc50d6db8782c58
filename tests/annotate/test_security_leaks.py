"""Small leaks: raters never receive a study's description (the study
team's note), and a study admin names raters among the study's own members only, on the
batch form, the batch page's "move" and the API. Enrolling someone new goes through a
superuser or staff with annotate.change_study (docs/security.md)."""

import pytest
from django.contrib.auth.models import Permission

from annotate.models import Assignment, Batch, StudyMembership
from annotate.services.batches import create_batch
from annotate.services.members import add_study_member
from tests.conftest import api_client_for
from tests.factories import SummaryFactory, UserFactory

DESCRIPTION = "ADMIN-ONLY-NOTE: the hypothesis is that model B hallucinates more."


@pytest.fixture
def team(study, rater_a, rater_b, outsider):
    """A study with a description, two raters in one batch, a study admin and a viewer;
    `outsider` has an account but no role in the study."""
    study.description = DESCRIPTION
    study.save()
    for _ in range(2):
        SummaryFactory(source__study=study)
    batch = create_batch(study=study, name="first", raters=[rater_a, rater_b], design="k_raters", k=1, seed=1)
    study_admin = UserFactory(username="study_admin")
    add_study_member(study=study, user=study_admin, role=StudyMembership.Role.ADMIN)
    viewer = UserFactory(username="viewer")
    add_study_member(study=study, user=viewer, role=StudyMembership.Role.VIEWER)
    return {"study": study, "batch": batch, "study_admin": study_admin, "viewer": viewer}


@pytest.mark.django_db
def test_raters_never_receive_the_study_description(client, team, rater_a):
    assignment = Assignment.objects.filter(rater=rater_a).first()
    api = api_client_for(rater_a)
    (row,) = api.get("/api/studies/").json()["results"]
    assert row["access"] == "rater" and row["description"] is None
    client.force_login(rater_a)
    for url in ("/api/studies/", "/api/studies/?role=rater", f"/api/assignments/{assignment.uuid}/"):
        assert DESCRIPTION not in api.get(url).content.decode(), url
    for url in ("/rate/", f"/rate/{assignment.uuid}/"):
        assert DESCRIPTION not in client.get(url).content.decode(), url


@pytest.mark.django_db
@pytest.mark.parametrize("who", ["study_admin", "viewer"])
def test_admins_and_viewers_read_the_description(team, who):
    api = api_client_for(team[who])
    (row,) = api.get("/api/studies/").json()["results"]
    assert row["description"] == DESCRIPTION
    assert api.get(f"/api/studies/{team['study'].slug}/").json()["description"] == DESCRIPTION


@pytest.mark.django_db
def test_the_batch_form_offers_only_the_studys_members(client, team, rater_a, outsider):
    client.force_login(team["study_admin"])
    url = f"/studies/{team['study'].slug}/batches/new/"
    form = client.get(url).content.decode()
    assert "rater_a" in form and "outsider" not in form
    response = client.post(
        url, {"name": "sneaky", "kind": "main", "raters": [outsider.pk], "design": "k_raters", "k": 1, "seed": 0}
    )
    assert response.status_code == 400
    assert "raters" in response.context["form"].errors
    assert not Batch.objects.filter(name="sneaky").exists()
    assert not StudyMembership.objects.filter(user=outsider).exists()


@pytest.mark.django_db
def test_the_api_refuses_an_outsider_as_rater_without_saying_whether_the_account_exists(team, outsider):
    client = api_client_for(team["study_admin"])
    url = f"/api/studies/{team['study'].slug}/batches/"
    body = {"name": "sneaky", "design": "k_raters", "k": 1}
    known = client.post(url, {**body, "raters": ["outsider"]}, format="json")
    unknown = client.post(url, {**body, "raters": ["nobody-at-all"]}, format="json")
    assert known.status_code == unknown.status_code == 400
    assert set(known.json()["error"]["fields"]) == {"raters"}
    assert known.json()["error"]["fields"]["raters"].replace("outsider", "X") == unknown.json()["error"]["fields"][
        "raters"
    ].replace("nobody-at-all", "X")
    assert not Batch.objects.filter(name="sneaky").exists()
    assert not StudyMembership.objects.filter(user=outsider).exists()


@pytest.mark.django_db
def test_a_study_admin_cannot_move_an_item_to_an_outsider(client, team, rater_a, outsider):
    assignment = team["batch"].assignments.filter(rater=rater_a).first()
    api = api_client_for(team["study_admin"])
    url = f"/api/studies/{team['study'].slug}/batches/{team['batch'].uuid}/assignments/{assignment.uuid}/move/"
    response = api.post(url, {"to": "outsider"}, format="json")
    assert response.status_code == 400 and set(response.json()["error"]["fields"]) == {"to"}
    client.force_login(team["study_admin"])
    page = f"/studies/{team['study'].slug}/batches/{team['batch'].uuid}/"
    followed = client.post(page, {"action": "move", "assignment": assignment.uuid, "to": "outsider"}, follow=True)
    assert "No such user among the study" in followed.content.decode()
    assignment.refresh_from_db()
    assert assignment.state != "withdrawn" and assignment.moved_to is None
    assert not Assignment.objects.filter(rater=outsider).exists()
    assert not StudyMembership.objects.filter(user=outsider).exists()


@pytest.mark.django_db
def test_a_study_admin_moves_an_item_to_a_member_without_items(team, rater_a):
    newcomer = UserFactory(username="newcomer")
    add_study_member(study=team["study"], user=newcomer, role=StudyMembership.Role.RATER)
    moved = team["batch"].assignments.filter(rater=rater_a).first()
    url = f"/api/studies/{team['study'].slug}/batches/{team['batch'].uuid}/assignments/{moved.uuid}/move/"
    response = api_client_for(team["study_admin"]).post(url, {"to": "newcomer"}, format="json")
    assert response.status_code == 201 and response.json()["rater"] == "newcomer"


@pytest.mark.django_db
def test_staff_with_change_study_enrol_anyone(team, outsider):
    staff = UserFactory(username="staff_admin", is_staff=True)
    staff.user_permissions.add(Permission.objects.get(codename="change_study", content_type__app_label="annotate"))
    url = f"/api/studies/{team['study'].slug}/batches/"
    body = {"name": "with-outsider", "raters": ["outsider"], "design": "k_raters", "k": 1}
    response = api_client_for(staff).post(url, body, format="json")
    assert response.status_code == 201, response.content
    assert StudyMembership.objects.filter(user=outsider, study=team["study"], role="rater").exists()
