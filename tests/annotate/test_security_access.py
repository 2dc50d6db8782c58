"""Study access for staff accounts: one rule for pages, API, analysis,
dataset exports and the Django admin. Staff alone gives nothing; annotate.view_study and
annotate.change_study make a staff user a viewer or an admin of every study, as the
Django admin site's own checks do (docs/security.md)."""

import io
import zipfile

import pytest
from django.contrib.auth.models import Permission

from annotate.models import Batch, StudyMembership
from annotate.services.members import add_study_member
from annotate.services.ratings import submit_rating
from datasets import export_runs
from tests.conftest import GOOD_ANSWERS, api_client_for
from tests.factories import AssignmentFactory, SourceFactory, SummaryFactory, UserFactory

RESTRICTED_TEXT = "RESTRICTED-NC-SOURCE-TEXT lowered blood pressure."


def staff_user(username: str, *codenames: str):
    user = UserFactory(username=username, is_staff=True)
    for codename in codenames:
        user.user_permissions.add(Permission.objects.get(codename=codename, content_type__app_label="annotate"))
    return user


@pytest.fixture
def restricted_study(study, rater_a, settings, tmp_path):
    """A study with one rated summary of a source whose licence forbids a CC BY release."""
    settings.EXPORTS_DIR = tmp_path / "exports"
    source = SourceFactory(study=study, licence="CC BY-NC 4.0", text=RESTRICTED_TEXT)
    assignment = AssignmentFactory(summary=SummaryFactory(source=source), rater=rater_a)
    submit_rating(assignment=assignment, rater=rater_a, answers=GOOD_ANSWERS, version=assignment.version)
    return study


@pytest.mark.django_db
def test_staff_without_permissions_cannot_export_restricted_source_text(restricted_study):
    staff = staff_user("staff")
    url = f"/api/studies/{restricted_study.slug}/exports/"
    response = api_client_for(staff).post(url, {"formats": ["jsonl"], "include_restricted": True}, format="json")
    assert response.status_code == 404, response.content
    assert response.json()["error"]["code"] == "not_found"
    assert export_runs.list_exports(study=restricted_study) == []


@pytest.mark.django_db
def test_staff_viewer_cannot_export_but_staff_with_change_study_can(restricted_study):
    viewer = staff_user("staff_viewer", "view_study")
    url = f"/api/studies/{restricted_study.slug}/exports/"
    body = {"formats": ["jsonl"], "include_restricted": True}
    assert api_client_for(viewer).post(url, body, format="json").status_code == 404
    assert export_runs.list_exports(study=restricted_study) == []

    editor = api_client_for(staff_user("staff_admin", "change_study"))
    started = editor.post(url, body, format="json")
    assert started.status_code == 202, started.content
    download = editor.get(editor.get(started["Location"]).json()["download"])
    archive = zipfile.ZipFile(io.BytesIO(b"".join(download.streaming_content)))
    assert any(RESTRICTED_TEXT in archive.read(name).decode() for name in archive.namelist() if name.endswith(".jsonl"))


@pytest.mark.django_db
def test_staff_without_permissions_see_no_study_anywhere(client, study):
    staff = staff_user("staff")
    assert api_client_for(staff).get("/api/studies/").json()["results"] == []
    client.force_login(staff)
    for url in ("/studies/", "/analysis/"):
        assert study.title not in client.get(url).content.decode(), url
    assert client.get(f"/analysis/{study.slug}/").status_code == 404


@pytest.mark.django_db
def test_staff_with_view_study_read_every_study_as_viewers(client, study):
    viewer = staff_user("staff_viewer", "view_study")
    (row,) = api_client_for(viewer).get("/api/studies/").json()["results"]
    assert row["slug"] == study.slug and row["access"] == "viewer" and row["roles"] == []
    client.force_login(viewer)
    assert study.title in client.get("/studies/").content.decode()
    assert client.get(f"/analysis/{study.slug}/").status_code == 200
    assert client.get(f"/studies/{study.slug}/batches/new/").status_code == 404


@pytest.mark.django_db
def test_a_staff_members_role_comes_from_their_membership(study, rater_a):
    """Staff with a viewer membership and no permissions are a viewer of that study only."""
    staff = staff_user("staff")
    add_study_member(study=study, user=staff, role=StudyMembership.Role.VIEWER)
    client = api_client_for(staff)
    (row,) = client.get("/api/studies/").json()["results"]
    assert row["access"] == "viewer"
    assert client.get(f"/api/studies/{study.slug}/").status_code == 200
    body = {"name": "b", "raters": ["rater_a"], "design": "k_raters", "k": 1}
    assert client.post(f"/api/studies/{study.slug}/batches/", body, format="json").status_code == 404
    assert not Batch.objects.exists()


@pytest.mark.django_db
@pytest.mark.parametrize("model", ["revision", "rationale", "study", "assignment", "source", "batch"])
def test_the_admin_site_shows_staff_without_permissions_nothing(client, assignment_a, rater_a, model):
    submit_rating(assignment=assignment_a, rater=rater_a, answers=GOOD_ANSWERS, version=assignment_a.version)
    client.force_login(staff_user("staff"))
    assert client.get(f"/admin/annotate/{model}/").status_code == 403
    assert "/admin/annotate/" not in client.get("/admin/").content.decode()


@pytest.mark.django_db
def test_the_admin_site_shows_revisions_with_their_view_permission(client, assignment_a, rater_a):
    submit_rating(assignment=assignment_a, rater=rater_a, answers=GOOD_ANSWERS, version=assignment_a.version)
    reader = UserFactory(username="reader", is_staff=True)
    reader.user_permissions.add(Permission.objects.get(codename="view_revision"))
    client.force_login(reader)
    assert client.get("/admin/annotate/revision/").status_code == 200
    assert client.get("/admin/annotate/rationale/").status_code == 403


@pytest.mark.django_db
def test_staff_with_change_study_enrol_a_person_in_the_admin(client, study, outsider):
    editor = staff_user("staff_admin", "view_study", "change_study")
    client.force_login(editor)
    url = f"/admin/annotate/study/{study.pk}/change/"
    page = client.get(url)
    assert page.status_code == 200 and 'name="memberships-TOTAL_FORMS"' in page.content.decode()
    form = {
        "slug": study.slug,
        "title": study.title,
        "description": "",
        "guidelines": study.guidelines,
        "licence": study.licence,
        "rubric": study.rubric_id,
        "memberships-TOTAL_FORMS": "1",
        "memberships-INITIAL_FORMS": "0",
        "memberships-MIN_NUM_FORMS": "0",
        "memberships-MAX_NUM_FORMS": "1000",
        "memberships-0-user": outsider.pk,
        "memberships-0-role": "rater",
        "memberships-0-order_seed": "7",
        "memberships-0-study": study.pk,
    }
    response = client.post(url, form)
    assert response.status_code == 302, response.context["errors"] if response.context else response
    assert StudyMembership.objects.filter(study=study, user=outsider, role="rater").exists()


@pytest.mark.django_db
def test_staff_who_may_only_view_studies_cannot_enrol_in_the_admin(client, study, outsider):
    client.force_login(staff_user("staff_viewer", "view_study"))
    url = f"/admin/annotate/study/{study.pk}/change/"
    assert client.get(url).status_code == 200
    response = client.post(
        url,
        {
            "memberships-TOTAL_FORMS": "1",
            "memberships-INITIAL_FORMS": "0",
            "memberships-0-user": outsider.pk,
            "memberships-0-role": "admin",
            "memberships-0-order_seed": "7",
        },
    )
    assert response.status_code == 403
    assert not StudyMembership.objects.filter(user=outsider).exists()
