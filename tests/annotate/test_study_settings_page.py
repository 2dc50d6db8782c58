"""A study admin edits the study's settings on its settings page (linked from the study
page); every change is recorded (who, when, field, before, after), listed on the page and
exported with the dataset. Other people cannot reach the page."""

import json

import pytest
from django.contrib.auth import get_user_model

from annotate.models import StudyMembership, StudySettingChange
from annotate.services.members import add_study_member
from datasets.exporting import export_dataset
from tests.factories import StudyFactory, UserFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def study_admin():
    study = StudyFactory(slug="settings-study", title="Old title", guidelines="Some guidelines.", licence="CC-BY-4.0")
    admin = UserFactory(username="settings-admin")
    add_study_member(study=study, user=admin, role=StudyMembership.Role.ADMIN)
    return study, admin


def form(**changes) -> dict:
    values = {
        "title": "Old title",
        "guidelines": "Some guidelines.",
        "licence": "CC-BY-4.0",
        "description": "",
        "min_seconds_per_item": "5",
    }
    return {**values, **changes}


def test_an_admin_edits_the_guidelines_and_the_change_is_recorded_and_exported(client, study_admin, tmp_path):
    study, admin = study_admin
    client.force_login(admin)
    dashboard = client.get(f"/studies/{study.slug}/").content.decode()
    assert f'href="/studies/{study.slug}/settings/"' in dashboard
    page = client.get(f"/studies/{study.slug}/settings/")
    assert page.status_code == 200 and "Some guidelines." in page.content.decode()

    response = client.post(
        f"/studies/{study.slug}/settings/",
        form(guidelines="Judge against the abstract only.", licence="CC0-1.0", min_seconds_per_item="8"),
        follow=True,
    )
    assert response.status_code == 200
    assert "Saved: guidelines, licence, min_seconds_per_item." in response.content.decode()
    study.refresh_from_db()
    assert (study.guidelines, study.licence, study.min_seconds_per_item) == (
        "Judge against the abstract only.",
        "CC0-1.0",
        8,
    )
    changes = list(StudySettingChange.objects.filter(study=study).order_by("pk"))
    assert [(c.field, c.before, c.after, c.changed_by, c.via) for c in changes] == [
        ("guidelines", "Some guidelines.", "Judge against the abstract only.", admin, "page"),
        ("licence", "CC-BY-4.0", "CC0-1.0", admin, "page"),
        ("min_seconds_per_item", "5", "8", admin, "page"),
    ]
    assert all(c.created_at is not None for c in changes)
    history = response.content.decode()
    assert "settings-admin (settings page)" in history and "Judge against the abstract only." in history

    export_dataset(study=study, out_dir=tmp_path / "out")
    rows = [json.loads(line) for line in (tmp_path / "out" / "jsonl" / "settings_changes.jsonl").open()]
    assert [(r["field"], r["before"], r["after"], r["via"]) for r in rows] == [
        ("guidelines", "Some guidelines.", "Judge against the abstract only.", "page"),
        ("licence", "CC-BY-4.0", "CC0-1.0", "page"),
        ("min_seconds_per_item", "5", "8", "page"),
    ]
    assert {r["changed_by"] for r in rows} == {"study-admin"}  # a pseudonym, never the username


def test_an_unchanged_form_records_nothing_and_a_blank_title_is_refused(client, study_admin):
    study, admin = study_admin
    client.force_login(admin)
    assert "Nothing changed." in client.post(f"/studies/{study.slug}/settings/", form(), follow=True).content.decode()
    refused = client.post(f"/studies/{study.slug}/settings/", form(title="   "))
    assert refused.status_code == 400
    assert not StudySettingChange.objects.exists()
    study.refresh_from_db()
    assert study.title == "Old title"


def test_the_record_outlives_the_account_that_made_it(client, study_admin):
    study, admin = study_admin
    client.force_login(admin)
    client.post(f"/studies/{study.slug}/settings/", form(title="New title"))
    StudyMembership.objects.filter(user=admin).delete()
    get_user_model().objects.filter(pk=admin.pk).delete()
    change = StudySettingChange.objects.get(study=study)
    assert (change.field, change.after, change.changed_by) == ("title", "New title", None)


@pytest.mark.parametrize("role", ["rater", "viewer", None])
def test_only_study_admins_reach_the_settings_page(client, study_admin, role):
    study, _admin = study_admin
    someone = UserFactory(username="someone")
    if role:
        add_study_member(study=study, user=someone, role=role)
    client.force_login(someone)
    assert client.get(f"/studies/{study.slug}/settings/").status_code == 404
    assert client.post(f"/studies/{study.slug}/settings/", form(title="Hijacked")).status_code == 404
    study.refresh_from_db()
    assert study.title == "Old title"


def test_a_setting_changed_in_the_django_admin_is_recorded_too(client, study_admin):
    study, _admin = study_admin
    root = UserFactory(username="root", is_superuser=True, is_staff=True)
    client.force_login(root)
    form = {
        "slug": study.slug,
        "title": study.title,
        "description": "",
        "guidelines": "Changed in the admin.",
        "licence": study.licence,
        "rubric": study.rubric_id,
        "memberships-TOTAL_FORMS": "0",
        "memberships-INITIAL_FORMS": "0",
        "memberships-MIN_NUM_FORMS": "0",
        "memberships-MAX_NUM_FORMS": "1000",
    }
    response = client.post(f"/admin/annotate/study/{study.pk}/change/", form)
    assert response.status_code == 302, response.context["errors"] if response.context else response
    change = StudySettingChange.objects.get(study=study)
    assert (change.field, change.before, change.after, change.changed_by, change.via) == (
        "guidelines",
        "Some guidelines.",
        "Changed in the admin.",
        root,
        "admin",
    )


def test_onboarding_texts_are_recorded_listed_and_exported_beside_the_settings(client, study_admin, tmp_path):
    from recruit.services import onboarding

    study, admin = study_admin
    onboarding.save_onboarding(study=study, consent_text="I agree.", instructions="Read the abstract first.", by=admin)
    onboarding.save_onboarding(study=study, consent_text="I agree.", instructions="Read it twice.", by=admin)
    onboarding.save_onboarding(study=study, consent_text="I agree.", instructions="Read it twice.", by=admin)
    changes = [
        (c.field, c.before, c.after, c.via) for c in StudySettingChange.objects.filter(study=study).order_by("pk")
    ]
    assert changes == [
        ("instructions", "", "Read the abstract first.", "onboarding"),
        ("consent_text", "", "I agree.", "onboarding"),
        ("instructions", "Read the abstract first.", "Read it twice.", "onboarding"),
    ]
    client.force_login(admin)
    page = client.get(f"/studies/{study.slug}/settings/").content.decode()
    assert 'id="onboarding-texts"' in page and f"/studies/{study.slug}/onboarding/" in page
    assert "Read it twice." in page and "(onboarding page)" in page
    export_dataset(study=study, out_dir=tmp_path / "out")
    rows = [json.loads(line) for line in (tmp_path / "out" / "jsonl" / "settings_changes.jsonl").open()]
    assert [(r["field"], r["after"]) for r in rows][-1] == ("instructions", "Read it twice.")
