"""A rubric key belongs to the account that uploaded its first version (docs/rubric-format.md,
"Keys and owners"): only its owner or a superuser publishes new versions of it; a key
nobody owns (stored before keys had owners, or by `manage.py load_rubric`) takes new
versions from superusers only. Before, anyone who could create rubrics published a new
version of anyone's key."""

from pathlib import Path

import pytest
import yaml
from django.conf import settings as django_settings
from django.contrib.auth.models import Permission
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.db.models import ProtectedError
from django.test import Client

from annotate.models import Rubric
from annotate.services.rubrics import RubricOwnershipError, upload_rubric
from tests.factories import UserFactory

LITSUMM = Path(django_settings.BASE_DIR) / "fixtures" / "rubrics" / "litsumm.yaml"


def creator(username):
    user = UserFactory(username=username)
    user.user_permissions.add(Permission.objects.get(codename="add_study", content_type__app_label="annotate"))
    return user


def rubric_yaml(title="Lab clarity") -> str:
    definition = yaml.safe_load(LITSUMM.read_text())
    definition.update(key="labclarity", title=title)
    return yaml.safe_dump(definition)


def post(user, title="Lab clarity"):
    client = Client()
    client.force_login(user)
    data = rubric_yaml(title).encode()
    return client.post("/studies/rubrics/", {"file": SimpleUploadedFile("r.yaml", data)})


def versions() -> list[tuple[int, str | None]]:
    return [
        (r.version, r.owner.username if r.owner else None)
        for r in Rubric.objects.filter(key="labclarity").select_related("owner").order_by("version")
    ]


@pytest.mark.django_db
def test_the_first_upload_of_a_key_makes_the_uploader_its_owner():
    assert post(creator("alice")).status_code == 302
    assert versions() == [(1, "alice")]


@pytest.mark.django_db
def test_another_account_cannot_publish_a_version_of_someone_elses_key():
    alice, bob = creator("alice"), creator("bob")
    post(alice)
    response = post(bob, title="Bob's wording")
    page = response.content.decode()
    assert response.status_code == 403
    assert "belongs to alice" in page and "only alice or a superuser" in page
    # Re-sending the owner's own text is refused too: bob may not act on alice's key.
    assert post(bob).status_code == 403
    assert versions() == [(1, "alice")]


@pytest.mark.django_db
def test_the_owner_and_a_superuser_publish_new_versions_and_the_owner_stays(admin_user):
    alice = creator("alice")
    post(alice)
    assert post(alice, title="Second wording").status_code == 302
    assert post(admin_user, title="Third wording").status_code == 302
    assert versions() == [(1, "alice"), (2, "alice"), (3, "alice")]


@pytest.mark.django_db
def test_a_key_without_an_owner_takes_new_versions_from_superusers_only(tmp_path, admin_user):
    path = tmp_path / "labclarity.yaml"
    path.write_text(rubric_yaml())
    call_command("load_rubric", str(path))
    response = post(creator("alice"), title="Alice's wording")
    assert response.status_code == 403
    assert "only a superuser" in response.content.decode()
    assert post(admin_user, title="Admin's wording").status_code == 302
    assert versions() == [(1, None), (2, None)]


@pytest.mark.django_db
def test_the_service_refuses_with_a_403_error():
    alice, bob = creator("alice"), creator("bob")
    upload_rubric(text=rubric_yaml(), user=alice)
    with pytest.raises(RubricOwnershipError) as caught:
        upload_rubric(text=rubric_yaml("Bob's"), user=bob)
    assert caught.value.http_status == 403
    assert "only alice or a superuser" in caught.value.message


@pytest.mark.django_db
def test_an_owner_account_is_never_deleted_from_under_its_rubrics():
    alice = creator("alice")
    post(alice)
    with pytest.raises(ProtectedError):
        alice.delete()
    assert versions() == [(1, "alice")]


@pytest.mark.django_db
def test_the_rubric_page_shows_each_keys_owner():
    alice = creator("alice")
    post(alice)
    client = Client()
    client.force_login(alice)
    page = client.get("/studies/rubrics/").content.decode()
    assert "<td>alice</td>" in page
