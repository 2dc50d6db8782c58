"""A study admin who is not a superuser manages the study's people on its Members page:
invites by e-mail with a one-time set-password link (shown when no mail is
sent), existing accounts added, roles set, members removed with their work kept; and
nobody else reaches the page."""

import re

import pytest
from django.contrib.auth import SESSION_KEY, get_user_model
from django.core import mail
from django.test import Client

from annotate.models import Assignment, Rating, Revision, StudyMembership
from annotate.services.batches import create_batch
from annotate.services.members import add_study_member
from annotate.services.ratings import submit_rating
from tests.factories import PASSWORD, StudyFactory, SummaryFactory, UserFactory

User = get_user_model()
LINK = re.compile(r"(?:http://testserver)?(/accounts/invite/[^/\s\"]+/[^/\s\"]+/)")


@pytest.fixture
def lab(study):
    """A study whose admin is an ordinary account (not staff, not superuser)."""
    pi = UserFactory(username="pi", email="pi@lab.example")
    add_study_member(study=study, user=pi, role=StudyMembership.Role.ADMIN)
    client = Client()
    client.force_login(pi)
    return study, pi, client


def members_url(study) -> str:
    return f"/studies/{study.slug}/members/"


def invite(client, study, email, role="rater", username=""):
    return client.post(members_url(study), {"action": "invite", "email": email, "role": role, "username": username})


def set_password_from(link: str, password: str = "a-long-new-password-42") -> Client:
    person = Client()
    page = person.get(link, follow=True)
    assert page.status_code == 200 and "Set your password" in page.content.decode()
    done = person.post(page.redirect_chain[-1][0], {"new_password1": password, "new_password2": password})
    assert done.status_code == 302 and done["Location"] == "/accounts/login/"
    return person


@pytest.mark.django_db
def test_without_mail_the_invite_link_is_shown_and_sets_the_password_once(lab, settings):
    settings.EMAIL_BACKEND = "django.core.mail.backends.console.EmailBackend"
    study, pi, client = lab
    page = invite(client, study, "ana@lab.example")
    body = page.content.decode()
    assert page.status_code == 200 and "This site sends no e-mail" in body
    link = LINK.search(body).group(1)
    ana = User.objects.get(email="ana@lab.example")
    assert ana.username == "ana" and not ana.has_usable_password()
    assert StudyMembership.objects.filter(study=study, user=ana, role="rater").exists()
    set_password_from(link)
    fresh = Client()
    fresh.post("/accounts/login/", {"username": "ana", "password": "a-long-new-password-42"})
    assert SESSION_KEY in fresh.session
    # One time: once the password is set, the same link is refused.
    again = Client().get(link, follow=True)
    assert "This link is not valid" in again.content.decode()


@pytest.mark.django_db
def test_with_mail_the_link_is_mailed_and_not_shown(lab, settings):
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    study, pi, client = lab
    body = invite(client, study, "ben@lab.example", username="ben_r").content.decode()
    assert "was e-mailed to ben@lab.example" in body and not LINK.search(body)
    (message,) = mail.outbox
    assert message.to == ["ben@lab.example"] and study.title in message.subject
    assert "ben_r" in message.body
    set_password_from(LINK.search(message.body).group(1))
    assert User.objects.get(username="ben_r").has_usable_password()


@pytest.mark.django_db
def test_a_mail_server_that_refuses_leaves_the_link_on_the_page(lab, settings):
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT, settings.EMAIL_TIMEOUT = "127.0.0.1", 9, 5  # discard port: refused
    study, pi, client = lab
    body = invite(client, study, "cy@lab.example").content.decode()
    assert "could not be sent" in body and LINK.search(body)
    assert User.objects.filter(email="cy@lab.example").exists()


@pytest.mark.django_db
def test_a_new_link_for_someone_who_has_not_set_a_password(lab, settings):
    settings.EMAIL_BACKEND = "django.core.mail.backends.console.EmailBackend"
    study, pi, client = lab
    invite(client, study, "dee@lab.example")
    dee = User.objects.get(email="dee@lab.example")
    body = client.post(members_url(study), {"action": "link", "user": dee.pk}).content.decode()
    set_password_from(LINK.search(body).group(1))
    refused = client.post(members_url(study), {"action": "link", "user": dee.pk})
    assert refused.status_code == 400 and "has set a password already" in refused.content.decode()


@pytest.mark.django_db
@pytest.mark.parametrize("kind", ["superuser", "staff", "other-study-admin", "has-logged-in"])
def test_no_link_for_an_account_that_is_more_than_a_newcomer_to_this_study(lab, kind):
    """An account with password login switched off may be a superuser's or another study's
    admin: a study admin must not be able to set its password."""
    study, pi, client = lab
    target = UserFactory(username=f"t-{kind}", is_superuser=kind == "superuser", is_staff=kind == "staff")
    target.set_unusable_password()
    if kind == "has-logged-in":
        from django.utils import timezone

        target.last_login = timezone.now()
    target.save()
    if kind == "other-study-admin":
        add_study_member(study=StudyFactory(), user=target, role="admin")
    add_study_member(study=study, user=target, role="rater")
    refused = client.post(members_url(study), {"action": "link", "user": target.pk})
    assert refused.status_code == 400 and "administrator of the instance" in refused.content.decode()
    assert not LINK.search(refused.content.decode())


@pytest.mark.django_db
@pytest.mark.parametrize(
    "email,username,message",
    [
        ("not-an-address", "", "Enter a valid e-mail address."),
        ("pi@lab.example", "", "exists already"),
        ("new@lab.example", "pi", "This username is taken."),
        ("new@lab.example", "has space", "at most 150 letters"),
    ],
)
def test_a_bad_invite_is_refused_and_creates_nothing(lab, email, username, message):
    study, pi, client = lab
    before = User.objects.count()
    response = invite(client, study, email, username=username)
    assert response.status_code == 400 and message in response.content.decode()
    assert User.objects.count() == before


@pytest.mark.django_db
def test_existing_accounts_are_added_by_exact_username_or_email_only(lab):
    study, pi, client = lab
    UserFactory(username="eve", email="eve@lab.example")
    UserFactory(username="evelyn")
    assert (
        client.post(members_url(study), {"action": "add", "account": "EVE@lab.example", "role": "viewer"}).status_code
        == 302
    )
    assert StudyMembership.objects.filter(study=study, user__username="eve", role="viewer").exists()
    refused = client.post(members_url(study), {"action": "add", "account": "ev", "role": "rater"})
    assert refused.status_code == 400 and "No single active account" in refused.content.decode()


@pytest.mark.django_db
def test_roles_are_set_and_a_study_admin_keeps_their_own(lab):
    study, pi, client = lab
    fay = UserFactory(username="fay")
    add_study_member(study=study, user=fay, role="rater")
    client.post(members_url(study), {"action": "roles", "user": fay.pk, "roles": ["viewer", "admin"]})
    assert set(StudyMembership.objects.filter(study=study, user=fay).values_list("role", flat=True)) == {
        "viewer",
        "admin",
    }
    refused = client.post(members_url(study), {"action": "roles", "user": pi.pk, "roles": ["rater"]})
    assert refused.status_code == 400 and "your own study admin role" in refused.content.decode()
    assert client.post(members_url(study), {"action": "roles", "user": fay.pk}).status_code == 400  # no role at all


@pytest.mark.django_db
def test_removing_a_member_keeps_their_answers_and_withdraws_open_items(lab):
    study, pi, client = lab
    gus = UserFactory(username="gus")
    add_study_member(study=study, user=gus, role="rater")
    for _ in range(2):
        SummaryFactory(source__study=study)
    batch = create_batch(study=study, name="b", raters=[gus], design="k_raters", k=1, seed=3)
    done, open_one = batch.assignments.order_by("pk")
    submit_rating(assignment=done, rater=gus, answers={"overall": 4}, version=done.version)
    ratings = Rating.objects.filter(revision__assignment=done).count()
    response = client.post(members_url(study), {"action": "remove", "user": gus.pk}, follow=True)
    assert "their answers are kept, 1 unfinished assignment withdrawn" in response.content.decode()
    assert not StudyMembership.objects.filter(study=study, user=gus).exists()
    assert Rating.objects.filter(revision__assignment=done).count() == ratings > 0
    assert Revision.objects.filter(assignment=done, status="submitted").exists()
    done.refresh_from_db(), open_one.refresh_from_db()
    assert done.state == Assignment.State.SUBMITTED and open_one.state == Assignment.State.WITHDRAWN
    # The study's items leave gus's queue.
    gus_client = Client()
    gus_client.force_login(gus)
    assert str(open_one.uuid) not in gus_client.get("/rate/").content.decode()
    assert client.post(members_url(study), {"action": "remove", "user": pi.pk}).status_code == 400


@pytest.mark.django_db
def test_an_invited_rater_is_offered_in_the_batch_form(lab, settings):
    settings.EMAIL_BACKEND = "django.core.mail.backends.console.EmailBackend"
    study, pi, client = lab
    before = client.get(f"/studies/{study.slug}/batches/new/").context["form"].fields["raters"].queryset
    assert "hal" not in {u.username for u in before}
    invite(client, study, "hal@lab.example")
    after = client.get(f"/studies/{study.slug}/batches/new/").context["form"].fields["raters"].queryset
    assert {u.username for u in after} == {"pi", "hal"}


@pytest.mark.django_db
@pytest.mark.parametrize("role", ["rater", "viewer", "other-admin", "outsider"])
def test_only_the_studys_admins_reach_the_members_page(lab, role):
    study, pi, _ = lab
    person = UserFactory(username=f"p-{role}")
    if role in ("rater", "viewer"):
        add_study_member(study=study, user=person, role=role)
    elif role == "other-admin":
        add_study_member(study=StudyFactory(), user=person, role="admin")
    client = Client()
    client.force_login(person)
    assert client.get(members_url(study)).status_code == 404
    response = invite(client, study, "x@lab.example")
    assert response.status_code == 404 and not User.objects.filter(email="x@lab.example").exists()


@pytest.mark.django_db
def test_anonymous_visitors_are_sent_to_log_in_and_csrf_is_enforced(lab):
    study, pi, _ = lab
    assert Client().get(members_url(study))["Location"].startswith("/accounts/login/")
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(pi)
    assert invite(strict, study, "z@lab.example").status_code == 403


@pytest.mark.django_db
def test_member_names_are_escaped(lab):
    study, pi, client = lab
    add_study_member(study=study, user=UserFactory(username="x<b>y", email="a@b.example"), role="rater")
    body = client.get(members_url(study)).content.decode()
    assert "x&lt;b&gt;y" in body and "x<b>y" not in body


# --- forgot password: never claims a mail it did not send ------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize("who", ["invited", "no-such-address", "with-password"])
def test_forgot_password_tells_the_same_honest_story_whoever_asks(who, settings):
    """Django mails only active accounts with a usable password. The page after the form
    is the same for an invited account, an unknown address and a real one (no leak), and
    says which accounts get no mail instead of claiming one was sent."""
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    UserFactory(username="withpw", email="with-password@lab.example")
    invited = UserFactory(username="invited", email="invited@lab.example")
    invited.set_unusable_password()
    invited.save()
    client = Client()
    response = client.post("/accounts/password_reset/", {"email": f"{who}@lab.example"}, follow=True)
    body = response.content.decode()
    assert "Accounts that have not set a password yet" in body and "get no link this way" in body
    assert "If an active account with a password has that address" in body
    assert len(mail.outbox) == (1 if who == "with-password" else 0)


@pytest.mark.django_db
def test_forgot_password_without_a_mail_server_says_no_mail_was_sent(settings):
    settings.EMAIL_BACKEND = "django.core.mail.backends.console.EmailBackend"
    UserFactory(username="withpw", email="with-password@lab.example")
    body = Client().post("/accounts/password_reset/", {"email": "with-password@lab.example"}, follow=True)
    text = body.content.decode()
    assert "No e-mail is sent from this site" in text and "Check your e-mail" not in text


@pytest.mark.django_db
def test_the_admins_membership_form_needs_no_order_seed(admin_user, study):
    """Django admin → Study → add a member: user and role are enough; the seed is drawn."""
    client = Client()
    client.force_login(admin_user)
    person = UserFactory(username="ivy")
    page = client.get(f"/admin/annotate/study/{study.pk}/change/").content.decode()
    assert 'name="memberships-0-order_seed"' not in page and 'name="memberships-__prefix__-order_seed"' not in page
    data = {
        "slug": study.slug,
        "title": study.title,
        "rubric": study.rubric.pk,
        "licence": study.licence,
        "guidelines": study.guidelines,
        "description": "",
        "memberships-TOTAL_FORMS": "1",
        "memberships-INITIAL_FORMS": "0",
        "memberships-MIN_NUM_FORMS": "0",
        "memberships-MAX_NUM_FORMS": "1000",
        "memberships-0-user": person.pk,
        "memberships-0-role": "rater",
        "_save": "Save",
    }
    response = client.post(f"/admin/annotate/study/{study.pk}/change/", data)
    assert response.status_code == 302, response.content.decode()[:3000]
    membership = StudyMembership.objects.get(study=study, user=person)
    assert membership.role == "rater" and 0 <= membership.order_seed < 2**31


@pytest.mark.django_db
def test_an_invited_person_logs_in_with_the_password_they_set(lab, settings):
    settings.EMAIL_BACKEND = "django.core.mail.backends.console.EmailBackend"
    study, pi, client = lab
    link = LINK.search(invite(client, study, "jo@lab.example").content.decode()).group(1)
    set_password_from(link, PASSWORD + "-jo")
    person = Client()
    person.post("/accounts/login/", {"username": "jo", "password": PASSWORD + "-jo"})
    assert SESSION_KEY in person.session
