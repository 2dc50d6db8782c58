import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command
from django.db.models import Count

from annotate.models import Assignment, Source, SourceSentence, Study, StudyMembership, Summary

TABLES = (Study, Source, SourceSentence, Summary, Assignment, StudyMembership)


def snapshot():
    return {
        "counts": {m.__name__: m.objects.count() for m in TABLES},
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
    assert snapshot() == first


@pytest.mark.django_db
def test_demo_raters_have_overlapping_queues_in_different_orders():
    call_command("load_demo")
    study = Study.objects.get(slug="demo-litsumm")
    assert study.rubric.key == "litsumm"
    queues = {
        name: list(
            Assignment.objects.filter(rater__username=name, study=study)
            .order_by("position")
            .values_list("summary__key", flat=True)
        )
        for name in ("rater1", "rater2")
    }
    shared = set(queues["rater1"]) & set(queues["rater2"])
    assert len(queues["rater1"]) == len(queues["rater2"]) == 20
    assert len(shared) == 10
    assert set(queues["rater1"]) | set(queues["rater2"]) == set(study.summaries.values_list("key", flat=True))
    assert [k for k in queues["rater1"] if k in shared] != [k for k in queues["rater2"] if k in shared]
    doubly = Summary.objects.filter(study=study).annotate(n=Count("assignments")).filter(n=2).count()
    assert doubly == 10


@pytest.mark.django_db
def test_demo_includes_a_factpico_study_with_findings():
    call_command("load_demo")
    study = Study.objects.get(slug="demo-factpico")
    assert study.rubric.key == "factpico"
    assert study.summaries.count() == 20
    assert Assignment.objects.filter(study=study, rater__username="rater1").count() == 15
    for summary in study.summaries.select_related("source"):
        findings = list(summary.source.findings.all())
        assert len(findings) >= 2
        assert all(summary.source.text[f.start : f.end] == f.evidence for f in findings)


@pytest.mark.django_db
def test_demo_content_has_provenance():
    call_command("load_demo")
    assert Summary.objects.filter(study__slug="demo-litsumm").count() == 30
    assert set(Summary.objects.values_list("generator", flat=True)) == {"demo-handwritten"}
    for source in Source.objects.all():
        assert source.licence.startswith("CC BY") or source.licence == "Public Domain", source.key
        assert source.attribution and source.external_ids.get("pmcid") == source.key
        for sentence in source.sentences.all():
            assert source.text[sentence.start : sentence.end] == sentence.text
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
