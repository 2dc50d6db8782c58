import re

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command
from django.db.models import Count

from annotate.models import Assignment, Source, Study, StudyMembership, Summary
from tests.factories import sentence_count

TABLES = (Study, Source, Summary, Assignment, StudyMembership)


def snapshot():
    return {
        "counts": {m.__name__: m.objects.count() for m in TABLES} | {"sentences": sentence_count()},
        "users": sorted(get_user_model().objects.values_list("username", "password")),
        "queues": sorted(Assignment.objects.values_list("rater__username", "summary__key", "position")),
        "updated": sorted(str(t) for t in Summary.objects.values_list("updated_at", flat=True)),
    }


@pytest.mark.django_db
def test_demo_loads_and_loading_twice_changes_nothing(settings, capsys):
    settings.DEBUG, settings.DEMO_PASSWORD = True, ""  # `make run`: the public default password
    call_command("load_demo")
    out = capsys.readouterr().out
    assert "Demo accounts created: admin, rater1, rater2 (password 'rate-summaries-2026')" in out
    first = snapshot()
    call_command("load_demo")
    assert "Demo already loaded" in capsys.readouterr().out  # `make run`'s every start: two queries
    assert snapshot() == first
    call_command("load_demo", "--reload")  # the whole loader again: idempotent
    assert "Demo loaded: " in capsys.readouterr().out
    assert snapshot() == first


@pytest.mark.django_db
def test_a_demo_missing_a_part_is_loaded_again(settings, capsys):
    """The cheap check is not fooled by a demo study without its raters."""
    settings.DEBUG, settings.DEMO_PASSWORD = True, ""
    call_command("load_demo")
    StudyMembership.objects.filter(study__slug="demo-factpico", user__username="rater2").delete()
    capsys.readouterr()
    call_command("load_demo")
    assert "Demo loaded: " in capsys.readouterr().out
    assert StudyMembership.objects.filter(study__slug="demo-factpico", user__username="rater2").exists()


@pytest.mark.django_db
def test_demo_raters_share_a_calibration_and_a_main_batch_in_different_orders():
    call_command("load_demo")
    study = Study.objects.get(slug="demo-litsumm")
    assert study.rubric.key == "litsumm"
    batches = {b.name: b for b in study.batches.all()}
    assert {name: b.kind for name, b in batches.items()} == {"calibration": "calibration", "main": "main"}
    queues = {
        name: list(
            Assignment.objects.filter(rater__username=name, study=study)
            .order_by("position")
            .values_list("summary__key", "batch__name")
        )
        for name in ("rater1", "rater2")
    }
    # Both raters have every item of both batches (double annotation): 4 + 12 each.
    assert len(queues["rater1"]) == len(queues["rater2"]) == 16
    assert set(queues["rater1"]) == set(queues["rater2"])
    assert sum(1 for _, b in queues["rater1"] if b == "calibration") == 4
    assert [k for k, _ in queues["rater1"]] != [k for k, _ in queues["rater2"]]  # each rater's own order
    # No summary is in both batches, and 14 of the 30 are left for the admin's own batches.
    assert Summary.objects.filter(study=study).annotate(n=Count("assignments")).filter(n=2).count() == 16
    assert Summary.objects.filter(study=study, assignments__isnull=True).count() == 14
    assert not Assignment.objects.filter(batch__isnull=True).exists()


@pytest.mark.django_db
def test_demo_includes_a_factpico_study_with_findings():
    call_command("load_demo")
    study = Study.objects.get(slug="demo-factpico")
    assert study.rubric.key == "factpico"
    assert study.summaries.count() == 20
    assert Assignment.objects.filter(study=study, rater__username="rater1").count() == 10  # 2 + 8
    for summary in study.summaries.select_related("source"):
        findings = list(summary.source.findings.all())
        assert len(findings) >= 2
        assert all(summary.source.text[f.start : f.end] == f.evidence for f in findings)


@pytest.mark.django_db
def test_demo_with_answers_leaves_three_main_items_per_queue_and_fills_the_rest(capsys):
    call_command("load_demo", "--with-answers")
    # 40 in the LitSumm and FactPICO studies, 42 in demo-pairwise (48 less 3 per rater).
    assert "82 answers submitted" in capsys.readouterr().out
    for slug in ("demo-litsumm", "demo-factpico"):
        for name in ("rater1", "rater2"):
            mine = Assignment.objects.filter(study__slug=slug, rater__username=name)
            assert set(mine.filter(state="pending").values_list("batch__name", flat=True)) == {"main"}
            assert mine.filter(state="pending").count() == 3
            assert not mine.filter(batch__name="calibration").exclude(state="submitted").exists()
    # Loading again submits nothing more (a person may be rating those three).
    call_command("load_demo", "--with-answers", "--reload")
    assert "0 answers submitted" in capsys.readouterr().out
    assert Assignment.objects.filter(state="pending").exclude(study__slug="demo-pairwise").count() == 12
    assert Assignment.objects.filter(state="pending", study__slug="demo-pairwise").count() == 6


@pytest.mark.django_db
def test_the_demo_answers_have_active_times_and_the_monitor_a_median(client):
    """The loader submits every seeded answer within a second, so the service credits none of
    the reported time: the demo records a seeded one, as a rater's page would have reported
    it, and the batch monitor's median is no longer 0.0 s."""
    call_command("load_demo", "--with-answers")
    submitted = Assignment.objects.filter(state="submitted")
    seconds = list(submitted.values_list("active_seconds", flat=True))
    assert len(seconds) == 82
    assert min(seconds) >= 60 and max(seconds) < 210
    assert len(set(seconds)) > 20  # not one constant
    assert not Assignment.objects.filter(state="pending", active_seconds__gt=0).exists()
    client.login(username="admin", password="rate-summaries-2026")
    batch = Assignment.objects.filter(study__slug="demo-litsumm", batch__name="main").first().batch
    page = client.get(f"/studies/demo-litsumm/batches/{batch.uuid}/monitor/")
    assert page.status_code == 200, page.status_code
    median = re.search(r"batch median active time ([0-9.]+) s", page.content.decode())
    assert median is not None and 60 <= float(median.group(1)) < 210


@pytest.mark.django_db
def test_demo_content_has_provenance():
    call_command("load_demo")
    assert Summary.objects.filter(study__slug="demo-litsumm").count() == 30
    two = Summary.objects.filter(study__slug__in=["demo-litsumm", "demo-factpico"])
    assert set(two.values_list("generator", flat=True)) == {"demo-handwritten"}
    # The pairwise demo labels the same hand-written summaries and a template as its systems.
    pairwise = Summary.objects.filter(study__slug="demo-pairwise").values_list("generator", flat=True)
    assert set(pairwise) == {"handwritten-a", "handwritten-b", "template-lead3", "(comparison)"}
    for source in Source.objects.all():
        assert source.licence.startswith("CC BY") or source.licence == "Public Domain", source.key
        assert source.attribution and source.external_ids.get("pmcid") == source.key
        assert source.sentences, source.key
    admin = get_user_model().objects.get(username="admin")
    assert admin.is_staff and admin.is_superuser
    assert not get_user_model().objects.get(username="rater1").is_staff


@pytest.mark.django_db
def test_demo_password_comes_from_the_environment(settings, capsys):
    settings.DEMO_PASSWORD = "from-the-env-123"
    call_command("load_demo")
    assert "password from DEMO_PASSWORD" in capsys.readouterr().out
    assert get_user_model().objects.get(username="rater1").check_password("from-the-env-123")


@pytest.mark.django_db
def test_with_debug_off_the_demo_refuses_the_public_default_password(settings):
    settings.DEBUG, settings.DEMO_PASSWORD = False, ""
    with pytest.raises(CommandError, match="DEMO_PASSWORD is not set"):
        call_command("load_demo")
    assert not get_user_model().objects.exists()
    assert not Study.objects.exists()


def test_load_demo_exits_non_zero_in_production_without_demo_password(tmp_path):
    """Through the real command line, with a production environment (DEBUG off)."""
    import os
    import subprocess
    import sys

    from django.conf import settings as django_settings

    env = {key: value for key, value in os.environ.items() if key not in ("DEMO_PASSWORD", "DEBUG")}
    env |= {
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "DEBUG": "0",
        "SECRET_KEY": "x" * 60,
        "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
    }
    manage = [sys.executable, str(django_settings.BASE_DIR / "manage.py")]
    # The refusal comes before any database access: no migration needed.
    refused = subprocess.run([*manage, "load_demo"], env=env, capture_output=True, text=True, timeout=600)
    assert refused.returncode != 0 and "DEMO_PASSWORD is not set" in refused.stderr
    assert not (tmp_path / "db.sqlite3").exists() or (tmp_path / "db.sqlite3").stat().st_size == 0


@pytest.mark.django_db
def test_the_adjudication_page_shows_the_demo_raters_notes_in_words(client, settings):
    """The seeded feedback read "Feedback 724 ✓" and the FactPICO rationales
    "Pop.", "Int.", "Finding 0." on the adjudication page."""
    from annotate.models import Batch, Rating, Rationale

    settings.DEBUG = True
    call_command("load_demo", "--with-answers")
    client.force_login(get_user_model().objects.get(username="admin"))
    placeholder = re.compile(r"Feedback \d+|✓|\b(Pop|Int|Comp|Out)\.|Finding \d+\.|Added wording")
    for slug in ("demo-litsumm", "demo-factpico"):
        batch = Batch.objects.get(study__slug=slug, name="main")
        summary = Summary.objects.filter(assignments__batch=batch, assignments__state="submitted").first()
        page = client.get(f"/studies/{slug}/batches/{batch.uuid}/items/{summary.uuid}/").content.decode()
        assert not placeholder.search(page), placeholder.search(page)
    feedback = list(Rating.objects.filter(question="feedback").values_list("value", flat=True))
    rationales = list(Rationale.objects.values_list("text", flat=True))
    for text in feedback + rationales:
        assert not placeholder.search(text) and len(text.split()) >= 4, text
    assert len(set(feedback)) >= 5  # not one sentence repeated
