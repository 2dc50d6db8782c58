"""Pushing a release to the Hugging Face Hub: the real huggingface_hub client against a local
server that speaks the Hub's API as that client calls it (tests/datasets/hub_server.py),
with its error answers, dropped connections, a lost answer and a resumed push."""

from __future__ import annotations

import hashlib
from io import StringIO

import pytest
import yaml
from django.core.management import CommandError, call_command

from datasets.hub import HubClient, HubError
from datasets.models import Release, RemoteCall
from datasets.releases import create_release, push_to_hub
from tests.analysis.reports import rated_study
from tests.datasets.hub_server import READ_TOKEN, TOKEN, HubServer
from tests.datasets.test_releases import finished_export

pytestmark = pytest.mark.django_db
REPO = "lab/summaries-ratings"


@pytest.fixture(autouse=True)
def hub_environment(monkeypatch):
    """The settings huggingface_hub read when first imported (tests/conftest.py sets them for
    the run); no token from the environment: each client is given its own."""
    monkeypatch.delenv("HF_TOKEN", raising=False)
    from huggingface_hub import constants

    assert constants.HF_HUB_DISABLE_XET, "huggingface_hub was imported before HF_HUB_DISABLE_XET was set"
    assert not constants.HF_HUB_OFFLINE, "huggingface_hub was imported with HF_HUB_OFFLINE set"


@pytest.fixture
def server():
    with HubServer(lfs_threshold=4096) as hub:
        yield hub


def client_for(server, token=TOKEN, max_retries=3):
    def make(*, record):
        return HubClient(
            endpoint=server.url,
            token=token,
            backoff_base=0.01,
            backoff_max=0.05,
            max_retries=max_retries,
            record=record,
        )

    return make


@pytest.fixture
def released():
    study, admin = rated_study(n_summaries=4, raters=("ra", "rb"))
    export = finished_export(study, formats=["jsonl", "csv", "parquet"])
    return create_release(study=study, export=export, version="1.0", changelog="First release.", by="admin")


def sums_of(files: dict[str, bytes]) -> dict[str, str]:
    return {name: hashlib.sha256(data).hexdigest() for name, data in files.items()}


def test_a_push_is_one_tagged_commit_holding_the_release(released, server):
    push_to_hub(release=released, repo=REPO, private=True, client=client_for(server))
    released.refresh_from_db()
    repo = server.repos[REPO]
    assert released.hub_state == "tagged" and released.hub_error == "" and repo.private
    assert repo.tags == {"1.0": released.hub_commit} == {"1.0": repo.branches["main"]}
    assert repo.commits[released.hub_commit]["summary"] == "Release 1.0"
    files = server.files_at(REPO, "1.0")
    listed = dict(reversed(line.split("  ", 1)) for line in files["SHA256SUMS"].decode().splitlines())
    assert listed == {k: v for k, v in sums_of(files).items() if k not in ("SHA256SUMS", ".gitattributes")}
    assert released.sha256sums == files["SHA256SUMS"].decode()  # no DOI yet: the export's own files
    assert any(entry["sha256"] for entry in repo.commits[released.hub_commit]["files"].values())  # LFS was used
    assert server.lfs_uploads >= 1
    # The card's configs name files of the commit: load_dataset(repo, config) finds each table.
    header = yaml.safe_load(files["README.md"].decode().split("---\n")[1])
    for config in header["configs"]:
        for data_file in config["data_files"]:
            assert data_file["path"] in files, config
    assert {c["config_name"] for c in header["configs"]} >= {"ratings", "summaries", "sources"}
    calls = list(RemoteCall.objects.filter(release=released, service="hub").values_list("method", "path", "outcome"))
    assert [c[:2] for c in calls] == [
        ("POST", "/api/repos/create"),
        ("GET", f"/api/datasets/{REPO}"),
        ("GET", f"/api/datasets/{REPO}/tree/main"),
        ("POST", f"/api/datasets/{REPO}/commit/main"),
        ("GET", f"/api/datasets/{REPO}/tree/{released.hub_commit}"),
        ("GET", f"/api/datasets/{REPO}/refs"),
        ("POST", f"/api/datasets/{REPO}/tag/{released.hub_commit}"),
    ]
    assert all(outcome.startswith("ok") for *_, outcome in calls)
    assert all(auth == f"Bearer {TOKEN}" for m, path, auth in server.requests if not path.startswith("/lfs-"))
    # Pushing a tagged release again changes nothing.
    before = len(server.requests)
    push_to_hub(release=released, repo=REPO, private=True, client=client_for(server))
    assert len(server.requests) == before


def test_a_second_release_is_a_second_commit_and_tag_and_unchanged_files_are_not_sent_again(released, server):
    push_to_hub(release=released, repo=REPO, private=False, client=client_for(server))
    uploads = server.lfs_uploads
    study = released.study
    second = create_release(
        study=study, export=finished_export(study, formats=["jsonl", "csv"]), version="1.1", changelog="No parquet.",
        by="admin",
    )  # fmt: skip
    push_to_hub(release=second, repo=REPO, private=False, client=client_for(server))
    second.refresh_from_db()
    repo = server.repos[REPO]
    assert set(repo.tags) == {"1.0", "1.1"} and repo.tags["1.1"] == second.hub_commit != repo.tags["1.0"]
    assert repo.commits[second.hub_commit]["parent"] == repo.tags["1.0"]
    # The files of 1.0 that 1.1 does not have are deleted in 1.1's commit.
    assert not any(p.startswith("parquet/") for p in server.files_at(REPO, "1.1"))
    assert any(p.startswith("parquet/") for p in server.files_at(REPO, "1.0"))
    # Of 1.1's LFS files, only those whose content 1.0 did not have went over LFS again.
    lfs_of = {t: {e["sha256"] for e in repo.commits[repo.tags[t]]["files"].values() if e["sha256"]} for t in repo.tags}
    assert server.lfs_uploads - uploads == len(lfs_of["1.1"] - lfs_of["1.0"]) < len(lfs_of["1.1"])


def test_refusals_are_clear_errors_and_leave_no_tag(released, server):
    with pytest.raises(HubError, match="401.*HF_TOKEN"):
        push_to_hub(release=released, repo=REPO, private=False, client=client_for(server, token="hf_wrong"))
    released.refresh_from_db()
    assert released.hub_state == "" and "401" in released.hub_error and not server.repos
    with pytest.raises(HubError, match="403"):
        push_to_hub(release=released, repo=REPO, private=False, client=client_for(server, token=READ_TOKEN))
    assert not server.repos
    # The commit refused: the files stay unreferenced, main and the tags unchanged.
    server.faults.append(("POST", rf"/api/datasets/{REPO}/commit/main", "403"))
    with pytest.raises(HubError, match="refused the commit: HTTP 403"):
        push_to_hub(release=released, repo=REPO, private=False, client=client_for(server))
    released.refresh_from_db()
    assert released.hub_state == "" and released.hub_commit == "" and server.repos[REPO].tags == {}
    assert list(server.files_at(REPO)) == [".gitattributes"]
    outcomes = RemoteCall.objects.filter(release=released, service="hub", status=403).values_list("outcome", flat=True)
    assert any(o.startswith("refused:") for o in outcomes)
    with pytest.raises(Exception, match="owner/name"):
        push_to_hub(release=released, repo="no-owner", private=False, client=client_for(server))
    with pytest.raises(HubError, match="HF_TOKEN is not set"):
        push_to_hub(release=released, repo=REPO, private=False, client=client_for(server, token=""))


def test_busy_answers_and_dropped_connections_are_tried_again(released, server):
    server.faults += [
        ("POST", r"/api/repos/create", "429"),
        ("POST", rf"/api/datasets/{REPO}/preupload/main", "503"),
        ("PUT", r"/lfs-upload/.+", "drop"),
        ("POST", rf"/api/datasets/{REPO}/commit/main", "drop"),
        ("POST", rf"/api/datasets/{REPO}/commit/main", "500"),
    ]
    push_to_hub(release=released, repo=REPO, private=False, client=client_for(server))
    released.refresh_from_db()
    assert released.hub_state == "tagged" and not server.faults
    ok = RemoteCall.objects.filter(release=released, outcome__startswith="ok")
    attempts = dict(ok.values_list("path", "attempts"))
    assert attempts["/api/repos/create"] == 2
    assert attempts[f"/api/datasets/{REPO}/commit/main"] >= 3
    assert len(server.repos[REPO].commits) == 2  # the initial commit and the release's


def test_an_interrupted_push_is_resumed_without_sending_again_and_tagged_once_whole(released, server):
    # The commit's connection drops every time: the push gives up after its retries; the
    # LFS files were uploaded, nothing was committed, and there is no tag.
    server.faults += [("POST", rf"/api/datasets/{REPO}/commit/main", "drop")] * 3
    with pytest.raises(HubError, match="did not answer the commit"):
        push_to_hub(release=released, repo=REPO, private=False, client=client_for(server, max_retries=2))
    released.refresh_from_db()
    assert released.hub_state == "" and "did not answer" in released.hub_error
    assert server.repos[REPO].tags == {} and list(server.files_at(REPO)) == [".gitattributes"]
    uploaded = server.lfs_uploads
    assert uploaded >= 1
    gave_up = RemoteCall.objects.get(release=released, outcome__startswith="gave up")
    assert gave_up.attempts == 3 and gave_up.status is None
    # Run again: the LFS files are on the Hub already and are not sent again.
    push_to_hub(release=released, repo=REPO, private=False, client=client_for(server))
    released.refresh_from_db()
    assert released.hub_state == "tagged" and released.hub_error == ""
    assert server.lfs_uploads == uploaded and server.repos[REPO].tags == {"1.0": released.hub_commit}


def test_a_commit_whose_answer_was_lost_is_found_and_not_made_twice(released, server):
    server.faults.append(("POST", rf"/api/datasets/{REPO}/commit/main", "lost"))
    push_to_hub(release=released, repo=REPO, private=False, client=client_for(server))
    released.refresh_from_db()
    repo = server.repos[REPO]
    assert released.hub_state == "tagged" and len(repo.commits) == 2
    assert repo.tags["1.0"] == repo.branches["main"] == released.hub_commit


def test_the_tag_waits_for_a_verified_commit(released, server):
    # The tag refused once: the release keeps its verified commit, and the next push tags
    # that commit without committing again.
    server.faults.append(("POST", rf"/api/datasets/{REPO}/tag/[0-9a-f]+", "403"))
    with pytest.raises(HubError, match="the tag 1.0"):
        push_to_hub(release=released, repo=REPO, private=False, client=client_for(server))
    released.refresh_from_db()
    assert released.hub_state == "committed" and server.repos[REPO].tags == {}
    commits = len(server.repos[REPO].commits)
    push_to_hub(release=released, repo=REPO, private=False, client=client_for(server))
    released.refresh_from_db()
    assert released.hub_state == "tagged" and len(server.repos[REPO].commits) == commits
    with pytest.raises(Exception, match="pushed to lab/summaries-ratings"):
        push_to_hub(release=released, repo="lab/other", private=False, client=client_for(server))


def test_a_commit_that_does_not_hold_the_release_is_not_tagged(released, server):
    # The Hub answers the commit but keeps one file fewer than it was sent: the check of
    # the files at that commit finds it, and nothing is tagged. The next push completes it.
    server.faults.append(("POST", rf"/api/datasets/{REPO}/commit/main", "partial"))
    with pytest.raises(HubError, match="missing.*not tagged"):
        push_to_hub(release=released, repo=REPO, private=False, client=client_for(server))
    released.refresh_from_db()
    assert released.hub_state == "" and released.hub_commit == "" and server.repos[REPO].tags == {}
    push_to_hub(release=released, repo=REPO, private=False, client=client_for(server))
    released.refresh_from_db()
    assert released.hub_state == "tagged" and server.repos[REPO].tags == {"1.0": released.hub_commit}
    assert server.files_at(REPO, "1.0")["SHA256SUMS"].decode() == released.sha256sums


def test_an_existing_repository_is_used_and_set_to_the_visibility_chosen(released, server):
    client_for(server)(record=lambda call: None).create_repo(REPO, private=True)
    assert server.repos[REPO].private
    push_to_hub(release=released, repo=REPO, private=False, client=client_for(server))
    assert not server.repos[REPO].private and server.repos[REPO].tags
    create = RemoteCall.objects.get(release=released, path="/api/repos/create")
    assert create.outcome.startswith("ok")  # 409: it exists, which is fine


def test_the_command_pushes_with_the_environments_token_and_endpoint(released, server, monkeypatch):
    study = released.study
    monkeypatch.setenv("HF_ENDPOINT", server.url)
    monkeypatch.setenv("HF_TOKEN", "")
    with pytest.raises(CommandError, match="HF_TOKEN"):
        call_command("release_dataset", "--study", study.slug, "--release", "1.0", "--hub", REPO)
    with pytest.raises(CommandError, match="no release '9.9'"):
        call_command("release_dataset", "--study", study.slug, "--release", "9.9", "--hub", REPO)
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    out = StringIO()
    call_command("release_dataset", "--study", study.slug, "--release", "1.0", "--hub", REPO, "--private", stdout=out)
    assert f"Pushed release 1.0 to {server.url}/datasets/{REPO} (tag 1.0, commit " in out.getvalue()
    assert server.repos[REPO].private and Release.objects.get(pk=released.pk).hub_state == "tagged"


def test_a_release_with_a_doi_is_pushed_with_a_card_that_cites_it(released, server):
    from datasets.releases import deposit_on_zenodo
    from tests.datasets.test_releases import CREATORS
    from tests.datasets.test_releases import client_for as zenodo_client
    from tests.datasets.zenodo_server import ZenodoServer

    with ZenodoServer() as zenodo:
        deposit_on_zenodo(release=released, creators=CREATORS, client=zenodo_client(zenodo))
    released.refresh_from_db()
    assert released.doi
    push_to_hub(release=released, repo=REPO, private=False, client=client_for(server))
    files = server.files_at(REPO, "1.0")
    card = files["README.md"].decode()
    assert f"  doi = {{{released.doi}}}," in card and f"https://doi.org/{released.doi}" in card
    assert f"Cite this release (version 1.0) as [doi:{released.doi}]" in card
    # SHA256SUMS on the Hub matches the files there; every file but the card is the export's.
    listed = dict(reversed(line.split("  ", 1)) for line in files["SHA256SUMS"].decode().splitlines())
    assert listed == {k: v for k, v in sums_of(files).items() if k not in ("SHA256SUMS", ".gitattributes")}
    exported = dict(reversed(line.split("  ", 1)) for line in released.sha256sums.splitlines())
    assert {k for k in listed if listed[k] != exported[k]} == {"README.md"}


def test_cite_doi_adds_a_citation_to_a_card_without_one():
    from datasets.exporting.card import cite_doi

    card = cite_doi("---\nlicense: cc-by-4.0\n---\n\n# A study\n", doi="10.5281/zenodo.7", version="2.0")
    assert card.endswith(
        "## Citation\n\nCite this release (version 2.0) as [doi:10.5281/zenodo.7](https://doi.org/10.5281/zenodo.7).\n"
    )
