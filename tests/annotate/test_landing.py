"""Where a login lands: study admins and viewers on Studies, raters on their queue, and
each page explains itself when there is nothing in it."""

import pytest

from annotate.models import StudyMembership
from annotate.services.members import add_study_member
from tests.factories import UserFactory


def login(client, user):
    user.set_password("pw-for-landing-test")
    user.save()
    return client.post("/accounts/login/", {"username": user.username, "password": "pw-for-landing-test"})


@pytest.mark.django_db
def test_a_study_admin_lands_on_studies_and_a_rater_on_the_queue(client, study):
    admin, rater = UserFactory(username="boss"), UserFactory(username="reader")
    add_study_member(study=study, user=admin, role=StudyMembership.Role.ADMIN)
    add_study_member(study=study, user=rater, role=StudyMembership.Role.RATER)
    assert login(client, admin)["Location"] == "/"
    assert client.get("/")["Location"] == "/studies/"
    assert study.title in client.get("/studies/").content.decode()
    client.logout()
    login(client, rater)
    assert client.get("/")["Location"] == "/rate/"
    assert "You have no items to rate yet." in client.get("/rate/").content.decode()


@pytest.mark.django_db
def test_a_user_without_studies_sees_a_clear_empty_state(client):
    nobody = UserFactory(username="nobody")
    client.force_login(nobody)
    assert client.get("/")["Location"] == "/rate/"
    page = client.get("/studies/").content.decode()
    assert "You administer or view no studies yet." in page and 'href="/rate/"' in page
