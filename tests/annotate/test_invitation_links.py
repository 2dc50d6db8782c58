"""A set-password link works only while its account would still get a new one from the
study admin who made it (annotate.services.members.set_password_link_refusal, checked when the link
is made and at every use): an account that became more than a newcomer to that study since
keeps its password, and the link's page says why and what to do."""

import re

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group, Permission
from django.test import Client
from django.utils import timezone

from annotate.models import StudyMembership
from annotate.services.members import add_study_member
from tests.factories import StudyFactory, UserFactory

User = get_user_model()
LINK = re.compile(r"(?:http://testserver)?(/accounts/invite/[^/\s\"]+/[^/\s\"]+/)")
NEW_PASSWORD = "a-long-new-password-42"

pytestmark = pytest.mark.django_db


def admin_of(study, username):
    """An ordinary account (not staff, not superuser) that administers `study`, signed in."""
    admin = UserFactory(username=username, email=f"{username}@lab.example")
    add_study_member(study=study, user=admin, role=StudyMembership.Role.ADMIN)
    client = Client()
    client.force_login(admin)
    return admin, client


@pytest.fixture
def invited(settings):
    """Study A's admin invites ana; the link is shown (no mail is sent)."""
    settings.EMAIL_BACKEND = "django.core.mail.backends.console.EmailBackend"
    study_a = StudyFactory(title="Study A")
    pi_a, client_a = admin_of(study_a, "pi-a")
    body = client_a.post(
        f"/studies/{study_a.slug}/members/", {"action": "invite", "email": "ana@lab.example", "role": "rater"}
    ).content.decode()
    link = LINK.search(body).group(1)
    return study_a, pi_a, client_a, User.objects.get(username="ana"), link


def assert_refused(response, reason: str, ana) -> None:
    body = response.content.decode()
    assert response.status_code == 403
    assert "This link no longer works" in body and reason in body
    assert '<header class="site">' in body  # the site's page, not a bare 403
    assert 'name="new_password1"' not in body
    ana.refresh_from_db()
    assert not ana.has_usable_password()


def test_a_link_dies_once_its_account_becomes_admin_of_another_study(invited):
    """The probe's finding: study A's admin keeps ana's link; ana is added to study B as an
    existing account and made its admin; A's admin must not set ana's password with it."""
    study_a, pi_a, client_a, ana, link = invited
    study_b = StudyFactory(title="Study B")
    _, client_b = admin_of(study_b, "pi-b")
    added = client_b.post(f"/studies/{study_b.slug}/members/", {"action": "add", "account": "ana", "role": "admin"})
    assert added.status_code == 302
    assert StudyMembership.objects.filter(study=study_b, user=ana, role="admin").exists()

    # The old link is refused, as a new one is in this state.
    response = Client().get(link, follow=True)
    assert_refused(response, "the account has a role in another study", ana)
    assert "administrator of the instance" in response.content.decode()
    refused = client_a.post(f"/studies/{study_a.slug}/members/", {"action": "link", "user": ana.pk})
    assert refused.status_code == 400 and "has a role in another study" in refused.content.decode()


def test_a_link_opened_before_the_change_cannot_post_a_password_after_it(invited):
    """The form was shown while the link was good; the POST comes after ana became study
    B's admin: refused, password unchanged."""
    study_a, pi_a, client_a, ana, link = invited
    holder = Client()
    form_page = holder.get(link, follow=True)
    assert 'name="new_password1"' in form_page.content.decode()
    add_study_member(study=StudyFactory(), user=ana, role=StudyMembership.Role.ADMIN)
    response = holder.post(
        form_page.redirect_chain[-1][0], {"new_password1": NEW_PASSWORD, "new_password2": NEW_PASSWORD}
    )
    assert_refused(response, "the account has a role in another study", ana)


def _make_staff(ana, study_a, pi_a):
    ana.is_staff = True
    ana.save()


def _make_superuser(ana, study_a, pi_a):
    ana.is_superuser = True
    ana.save()


def _deactivate(ana, study_a, pi_a):
    ana.is_active = False
    ana.save()


def _give_permission(ana, study_a, pi_a):
    ana.user_permissions.add(Permission.objects.get(codename="add_study", content_type__app_label="annotate"))


def _add_to_group(ana, study_a, pi_a):
    ana.groups.add(Group.objects.create(name="lab"))


def _rater_elsewhere(ana, study_a, pi_a):
    add_study_member(study=StudyFactory(), user=ana, role=StudyMembership.Role.RATER)


def _remove_from_study(ana, study_a, pi_a):
    StudyMembership.objects.filter(study=study_a, user=ana).delete()


def _issuer_loses_admin_role(ana, study_a, pi_a):
    StudyMembership.objects.filter(study=study_a, user=pi_a).delete()


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (_make_staff, "staff or a superuser"),
        (_make_superuser, "staff or a superuser"),
        (_deactivate, "switched off"),
        (_give_permission, "permissions on the instance"),
        (_add_to_group, "permissions on the instance"),
        (_rater_elsewhere, "a role in another study"),
        (_remove_from_study, "not a member of the study “Study A”"),
        (_issuer_loses_admin_role, "no longer administers the study “Study A”"),
    ],
)
def test_a_link_is_refused_on_use_when_the_account_would_get_no_new_one(invited, change, reason):
    study_a, pi_a, client_a, ana, link = invited
    change(ana, study_a, pi_a)
    assert_refused(Client().get(link, follow=True), reason, ana)


@pytest.mark.parametrize("change", ["logged-in", "password-set"])
def test_a_link_is_refused_once_the_account_logged_in_or_has_a_password(invited, change):
    """Both are in the token's hash as well, so the link is simply no longer valid."""
    study_a, pi_a, client_a, ana, link = invited
    if change == "logged-in":
        ana.last_login = timezone.now()
    else:
        ana.set_password("set-by-someone-else-42")
    ana.save()
    body = Client().get(link, follow=True).content.decode()
    assert "This link is not valid" in body and 'name="new_password1"' not in body
    ana.refresh_from_db()
    assert ana.has_usable_password() is (change == "password-set")
    if change == "password-set":
        assert ana.check_password("set-by-someone-else-42")


def test_a_good_link_still_sets_the_password(invited):
    study_a, pi_a, client_a, ana, link = invited
    holder = Client()
    page = holder.get(link, follow=True)
    done = holder.post(page.redirect_chain[-1][0], {"new_password1": NEW_PASSWORD, "new_password2": NEW_PASSWORD})
    assert done.status_code == 302 and done["Location"] == "/accounts/login/"
    ana.refresh_from_db()
    assert ana.check_password(NEW_PASSWORD)


def test_the_study_named_in_a_link_cannot_be_changed(invited):
    """The link names the study it was made for; naming another study breaks it."""
    study_a, pi_a, client_a, ana, link = invited
    forged = _with_study(link, StudyFactory().pk)
    assert forged != link
    body = Client().get(forged, follow=True).content.decode()
    assert "This link is not valid" in body and 'name="new_password1"' not in body


def _with_study(link: str, study_pk: int) -> str:
    from django.utils.http import int_to_base36

    head, token = link.rstrip("/").rsplit("/", 1)
    _, rest = token.split(".", 1)
    return f"{head}/{int_to_base36(study_pk)}.{rest}/"


def test_an_invitation_is_not_a_password_reset_link(invited):
    """Django's own reset page (/accounts/reset/…) does not take an invitation's token."""
    study_a, pi_a, client_a, ana, link = invited
    page = Client().get(link.replace("/accounts/invite/", "/accounts/reset/"), follow=True)
    assert "This link is not valid" in page.content.decode()
    assert 'name="new_password1"' not in page.content.decode()
