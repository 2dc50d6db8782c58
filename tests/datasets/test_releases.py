"""Releases of a dataset and their Zenodo deposit, against a local server speaking Zenodo's
deposit API (tests/datasets/zenodo_server.py) with its error answers and a dropped upload."""

from __future__ import annotations

import hashlib

import pytest

from annotate.models import Study
from core import storage
from datasets import export_runs
from datasets.export_runs import archive_name
from datasets.models import Release, RemoteCall
from datasets.releases import create_release, deposit_on_zenodo
from datasets.zenodo import ZenodoClient, ZenodoError
from tests.analysis.reports import rated_study
from tests.datasets.zenodo_server import TOKEN, ZenodoServer

pytestmark = pytest.mark.django_db
CREATORS = [{"name": "Curie, Marie", "affiliation": "Lab of Summaries"}]


def finished_export(study: Study, formats=("jsonl", "csv"), **options):
    admin = study.memberships.filter(role="admin").first().user
    status = export_runs.start_export(
        study=study, requested_by=admin, formats=list(formats), enqueue=lambda **kw: None, **options
    )
    export_runs.run_export(study_slug=status.study, export_id=status.id)
    from datasets.models import ExportRun

    return ExportRun.objects.get(uuid=status.id)


def client_for(server, token=TOKEN):
    def make(*, record):
        return ZenodoClient(
            base_url=server.url, token=token, backoff_base=0.01, backoff_max=0.05, max_retries=3, record=record
        )

    return make


@pytest.fixture
def released():
    study, admin = rated_study(n_summaries=4, raters=("ra", "rb"))
    export = finished_export(study)
    return create_release(study=study, export=export, version="1.0", changelog="First release.", by="admin")


def test_a_release_keeps_the_exports_checksums_and_refuses_what_is_wrong(released):
    study, export = released.study, released.export
    stored = storage.exports_storage()
    with stored.open(f"{study.slug}/{export.uuid}/dataset/SHA256SUMS", "rb") as f:
        assert released.sha256sums == f.read().decode()
    assert released.changes == {}
    for version, changelog, message in [
        ("1.0", "again", "greater than"),
        ("0.9", "older", "greater than"),
        ("v2", "bad", "version number"),
        ("2.0", " ", "changelog"),
    ]:
        with pytest.raises(Exception, match=message):
            create_release(study=study, export=export, version=version, changelog=changelog, by="admin")
    restricted = finished_export(study, include_restricted=True)
    with pytest.raises(Exception, match="licence"):
        create_release(study=study, export=restricted, version="2.0", changelog="All texts.", by="admin")
    assert Release.objects.filter(study=study).count() == 1


def test_a_second_release_says_what_changed(released):
    from annotate.services.ratings import submit_rating
    from tests.factories import AssignmentFactory, SummaryFactory

    study = released.study
    rater = study.assignments.first().rater
    assignment = AssignmentFactory(summary=SummaryFactory(source__study=study), rater=rater)
    answers = {"overall": 2, "failure_modes": [], "feedback": "New."}
    submit_rating(assignment=assignment, rater=rater, answers=answers, version=assignment.version)
    second = create_release(
        study=study, export=finished_export(study), version="1.1", changelog="One more summary.", by="admin"
    )
    tables = second.changes["tables"]
    assert tables["summaries"] == [4, 5] and tables["sources"] == [4, 5]
    assert tables["ratings"][1] > tables["ratings"][0] and "rubric" not in second.changes


def test_deposit_publishes_with_a_doi_and_records_every_call(released):
    with ZenodoServer() as server:
        deposit_on_zenodo(release=released, creators=CREATORS, keywords=["summaries"], client=client_for(server))
        released.refresh_from_db()
        assert released.zenodo_state == "published" and released.doi.startswith("10.5072/zenodo.")
        deposition = server.depositions[released.zenodo_deposition]
        assert deposition["metadata"]["creators"] == CREATORS and deposition["metadata"]["license"] == "cc-by-4.0"
        (uploaded,) = deposition["files"]
        archive = archive_name(study_slug=released.study.slug, export_id=released.export.uuid)
        with storage.exports_storage().open(archive, "rb") as f:
            assert uploaded["checksum"] == hashlib.md5(f.read(), usedforsecurity=False).hexdigest()
        assert all(auth == f"Bearer {TOKEN}" for _, path, auth in server.requests if TOKEN not in path)
    calls = list(RemoteCall.objects.filter(release=released).values_list("method", "status", "outcome"))
    assert [c[:2] for c in calls] == [("POST", 201), ("PUT", 201), ("PUT", 200), ("POST", 202)]
    assert all(outcome == "ok" for _, _, outcome in calls)
    assert all(TOKEN not in path for path in RemoteCall.objects.values_list("path", flat=True))


def test_a_refused_token_changes_nothing_and_a_later_deposit_carries_on(released):
    with ZenodoServer() as server:
        with pytest.raises(ZenodoError, match="401"):
            deposit_on_zenodo(release=released, creators=CREATORS, client=client_for(server, token="wrong"))
        released.refresh_from_db()
        assert released.zenodo_state == "" and "401" in released.zenodo_error and not server.depositions
        # Refused at publishing (403): the deposition and its file stay, and the next try
        # publishes them without uploading again.
        server.faults.append(("POST", r"/api/deposit/depositions/\d+/actions/publish", "403"))
        with pytest.raises(ZenodoError, match="403"):
            deposit_on_zenodo(release=released, creators=CREATORS, client=client_for(server))
        released.refresh_from_db()
        assert released.zenodo_state == "draft" and server.uploads == 1
        deposit_on_zenodo(release=released, creators=CREATORS, client=client_for(server))
        released.refresh_from_db()
        assert released.zenodo_state == "published" and server.uploads == 1 and len(server.depositions) == 1


def test_busy_answers_and_a_dropped_upload_are_tried_again(released):
    with ZenodoServer() as server:
        server.faults += [
            ("POST", r"/api/deposit/depositions", "429"),
            ("PUT", r"/api/files/.+", "drop"),
            ("PUT", r"/api/files/.+", "503"),
        ]
        deposit_on_zenodo(release=released, creators=CREATORS, client=client_for(server))
        released.refresh_from_db()
        assert released.zenodo_state == "published" and server.uploads == 1
    attempts = dict(RemoteCall.objects.filter(release=released, status__in=[201]).values_list("method", "attempts"))
    assert attempts["POST"] == 2 and attempts["PUT"] == 3


def test_conflicts_and_exhausted_retries_are_clear_errors(released):
    with ZenodoServer() as server:
        server.faults += [("POST", r"/api/deposit/depositions", "409")]
        with pytest.raises(ZenodoError, match="409"):
            deposit_on_zenodo(release=released, creators=CREATORS, client=client_for(server))
        server.faults += [("POST", r"/api/deposit/depositions", "500")] * 4
        with pytest.raises(ZenodoError, match="did not answer"):
            deposit_on_zenodo(release=released, creators=CREATORS, client=client_for(server))
        with pytest.raises(Exception, match="Family, Given"):
            deposit_on_zenodo(release=released, creators=[{"name": "Marie Curie"}], client=client_for(server))


def test_a_second_release_is_a_new_version_of_the_same_record(released):
    study = released.study
    with ZenodoServer() as server:
        deposit_on_zenodo(release=released, creators=CREATORS, client=client_for(server))
        released.refresh_from_db()
        second = create_release(
            study=study, export=finished_export(study), version="2.0", changelog="Second wave.", by="admin"
        )
        deposit_on_zenodo(release=second, creators=CREATORS, client=client_for(server))
        second.refresh_from_db()
        assert second.doi != released.doi and second.zenodo_concept == released.zenodo_concept
        files = server.depositions[second.zenodo_deposition]["files"]
        assert [f["filename"] for f in files] == [f"{study.slug}-2.0.zip"]


def test_the_command_releases_and_deposits(released, monkeypatch):
    from io import StringIO

    from django.core.management import CommandError, call_command

    study = released.study
    finished_export(study)
    out = StringIO()
    call_command("release_dataset", "--study", study.slug, "--release", "1.5", "--changelog", "Again.", stdout=out)
    assert "Release 1.5" in out.getvalue()
    with pytest.raises(CommandError, match="changelog"):
        call_command("release_dataset", "--study", study.slug, "--release", "1.6", stdout=StringIO())
    with ZenodoServer() as server:
        monkeypatch.setenv("ZENODO_URL", server.url)
        monkeypatch.setenv("ZENODO_TOKEN", TOKEN)
        out = StringIO()
        call_command(
            "release_dataset", "--study", study.slug, "--release", "1.5", "--zenodo",
            "--creator", "Curie, Marie; Lab", "--related", "https://huggingface.co/datasets/lab/x", stdout=out,
        )  # fmt: skip
        assert "DOI 10.5072/zenodo." in out.getvalue()
        (deposition,) = server.depositions.values()
        assert deposition["metadata"]["related_identifiers"][0]["relation"] == "isSupplementTo"
        monkeypatch.setenv("ZENODO_TOKEN", "")
        with pytest.raises(CommandError, match="ZENODO_TOKEN"):
            call_command("release_dataset", "--study", study.slug, "--release", "1.0", "--zenodo", "--creator", "A, B")


def test_a_released_export_outlives_the_file_retention(released):
    from datetime import timedelta

    from datasets.models import ExportRun
    from datasets.retention import remove_expired_files

    study = released.study
    unreleased = finished_export(study)
    removed = remove_expired_files(older_than=timedelta(seconds=-1))
    assert removed.exports == 1 and not ExportRun.objects.filter(pk=unreleased.pk).exists()
    assert ExportRun.objects.filter(pk=released.export_id).exists()
    archive = archive_name(study_slug=study.slug, export_id=released.export.uuid)
    assert storage.exports_storage().exists(archive)
