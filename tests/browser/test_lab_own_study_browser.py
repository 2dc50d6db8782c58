"""A lab's own study from an empty install, in a real Chromium: no demo; the
first admin comes from the environment; the lab's principal investigator, who is not a
superuser and not staff (the admin gave them the "Can add study" permission), creates a
study on the page, invites two raters who set their passwords from the links the page
shows (no mail server), uploads a rubric of the lab's own and creates a second study with
it, uploads the lab's data (a file with its study line, as written for import_jsonl),
checks the batch preview per system and rater pair, and builds the batch the raters then
find in their queues."""

import json
import re
from pathlib import Path

import pytest
import yaml
from django.conf import settings as django_settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.core.management import call_command
from playwright.sync_api import expect

from annotate.models import Assignment, Rubric, Study, StudyMembership
from tests.browser.conftest import log_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

LITSUMM = Path(django_settings.BASE_DIR) / "fixtures" / "rubrics" / "litsumm.yaml"
PI_PASSWORD = "pi-password-for-the-lab-2026"


def lab_file() -> bytes:
    """Ten abstracts, each summarised by three systems, with the study's own line first."""
    lines = [{"type": "study", "slug": "lab", "title": "Lab study", "rubric": "litsumm", "licence": "CC-BY-4.0"}]
    for i in range(10):
        lines.append(
            {
                "type": "source",
                "study": "lab",
                "key": f"abs{i}",
                "text": f"Trial {i} randomised 100 adults. Drug {i} lowered blood pressure by {i + 2} mmHg.",
                "licence": "CC BY 4.0",
            }
        )
        for system in ("sysA", "sysB", "sysC"):
            lines.append(
                {
                    "type": "summary",
                    "study": "lab",
                    "source": f"abs{i}",
                    "key": f"abs{i}-{system}",
                    "text": f"{system}: drug {i} lowered blood pressure.",
                    "generator": system,
                }
            )
    return "\n".join(json.dumps(line) for line in lines).encode()


def test_a_lab_starts_empty_and_runs_its_own_study_from_the_browser(page, browser, live_server, settings, monkeypatch):
    settings.EMAIL_BACKEND = "django.core.mail.backends.console.EmailBackend"
    page.set_default_timeout(60_000)  # a loaded machine
    User = get_user_model()
    # The empty install: no demo, the first admin from the environment (as `DEMO=0 make run`).
    assert not Study.objects.exists() and not User.objects.exists()
    monkeypatch.setenv("ADMIN_USERNAME", "root")
    monkeypatch.setenv("ADMIN_PASSWORD", "root-password-for-the-lab-2026")
    call_command("create_first_admin")
    assert User.objects.get(username="root").is_superuser
    # The admin gives the PI an account that may create studies (Django admin → Users).
    pi = User.objects.create_user(username="pi", email="pi@lab.example", password=PI_PASSWORD)
    pi.user_permissions.add(Permission.objects.get(codename="add_study", content_type__app_label="annotate"))
    assert not (pi.is_staff or pi.is_superuser)

    log_in(page, "pi", PI_PASSWORD)
    page.wait_for_url("**/studies/")
    expect(page.locator("main")).to_contain_text("You administer or view no studies yet")

    # 1. A study from the page.
    page.get_by_role("link", name="New study").first.click()
    page.get_by_label("Title").fill("Lab study")
    page.get_by_label("Slug").fill("lab")
    page.get_by_label("Rubric").select_option("litsumm")
    page.get_by_label("Licence").fill("CC-BY-4.0")
    page.get_by_label("Guidelines").fill("Judge against the abstract only.")
    page.get_by_role("button", name="Create study").click()
    page.wait_for_url("**/studies/lab/")
    expect(page.locator(".messages")).to_contain_text("You are its study admin")

    # 2. Two raters invited; no mail server, so the page shows each link to pass on.
    links = {}
    for name in ("ana", "bob"):
        page.get_by_role("link", name="Members").click()
        page.get_by_label("E-mail address", exact=True).fill(f"{name}@lab.example")
        page.get_by_role("button", name="Invite").click()
        expect(page.locator("#invitation")).to_contain_text("This site sends no e-mail")
        links[name] = page.locator("#invite-link").input_value()
        assert re.search(r"/accounts/invite/[^/]+/[^/]+/$", links[name])
        page.get_by_role("link", name="← Lab study").click()
    expect_rows = page.goto("/studies/lab/members/")
    assert expect_rows.ok
    expect(page.locator("#members")).to_contain_text("not set yet")

    # Each rater sets a password from the link, in a browser of their own, and logs in.
    for name in ("ana", "bob"):
        context = browser.new_context(base_url=live_server.url)
        rater = context.new_page()
        rater.set_default_timeout(60_000)
        rater.goto(links[name])
        expect(rater.get_by_role("heading", name="Set your password")).to_be_visible()
        expect(rater.locator("main")).to_contain_text(f"Your username is {name}")
        rater.get_by_label("Password", exact=True).fill(f"{name}-password-for-the-lab-2026")
        rater.get_by_label("Password again").fill(f"{name}-password-for-the-lab-2026")
        rater.get_by_role("button", name="Set my password").click()
        rater.wait_for_url("**/accounts/login/")
        expect(rater.locator(".messages")).to_contain_text(f"Log in as {name}")
        log_in(rater, name, f"{name}-password-for-the-lab-2026")
        expect(rater.get_by_role("heading", name="My queue")).to_be_visible()
        # The link worked once.
        rater.goto(links[name])
        expect(rater.locator("main")).to_contain_text("This link is not valid")
        context.close()

    # 3. A rubric of the lab's own, uploaded on the page, then a study that uses it.
    definition = yaml.safe_load(LITSUMM.read_text())
    definition.update(key="labclarity", title="Lab clarity")
    page.goto("/studies/")
    page.get_by_role("link", name="Rubrics").click()
    page.get_by_label("Rubric YAML file").set_input_files(
        files=[{"name": "labclarity.yaml", "mimeType": "text/yaml", "buffer": yaml.safe_dump(definition).encode()}]
    )
    # The rating form from the file first, then the rubric stored.
    page.get_by_role("button", name="Preview").click()
    page.get_by_role("button", name="Save rubric labclarity").click()
    expect(page.locator(".messages")).to_contain_text("Rubric labclarity stored as version 1")
    page.get_by_role("link", name="New study").click()
    page.get_by_label("Title").fill("Lab clarity study")
    page.get_by_label("Slug").fill("lab-clarity")
    page.get_by_label("Rubric").select_option("labclarity")
    page.get_by_role("button", name="Create study").click()
    page.wait_for_url("**/studies/lab-clarity/")
    expect(page.locator("main")).to_contain_text("Rubric labclarity v1")
    assert Study.objects.get(slug="lab-clarity").rubric == Rubric.objects.get(key="labclarity", version=1)

    # 4. The lab's data, study line and all, uploaded on the first study's import page.
    page.goto("/studies/lab/")
    page.get_by_role("link", name="Import sources and summaries").click()
    page.get_by_label("JSON Lines file").set_input_files(
        files=[{"name": "lab.jsonl", "mimeType": "application/jsonl", "buffer": lab_file()}]
    )
    page.get_by_role("button", name="Import").click()
    expect(page.locator(".messages")).to_contain_text("Imported lab.jsonl")
    assert Study.objects.get(slug="lab").summaries.count() == 30

    # 5. A batch: every summary to both raters, checked per system and pair before creating.
    page.goto("/studies/lab/batches/new/")
    page.get_by_label("Name").fill("main")
    page.get_by_label("ana", exact=True).check()
    page.get_by_label("bob", exact=True).check()
    page.get_by_label("k (raters per item)").fill("2")
    page.get_by_role("button", name="Preview").click()
    preview = page.locator("#preview")
    expect(preview).to_contain_text("60 assignments on 30 summaries")
    for system in ("sysA", "sysB", "sysC"):
        expect(page.locator("#preview-systems")).to_contain_text(f"{system}1020")  # 10 summaries, 20 assignments
    expect(page.locator("#preview-pairs")).to_contain_text("ana and bob30")
    page.get_by_role("button", name="Create batch").click()
    expect(page.locator(".messages")).to_contain_text("Batch 'main' created with 60 assignments")

    assert StudyMembership.objects.filter(study__slug="lab", user=pi, role="admin").exists()
    for name in ("ana", "bob"):
        assert Assignment.objects.filter(study__slug="lab", rater__username=name).count() == 30
