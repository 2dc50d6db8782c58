"""Releases of a study's dataset (docs/publishing.md): a numbered, changelogged release of a
finished export, kept with the study with the export's checksums and what changed since
the release before; its deposit on Zenodo, where it gets a DOI (a later release is a
new version of the same Zenodo concept record); and its push to a Hugging Face Hub dataset
repository, one commit per release tagged with the release's version.

A deposit can be interrupted anywhere (a refused token, the service down, a dropped
connection) and started again: the deposition's id and bucket are stored as soon as Zenodo
gives them, a file already uploaded with the same MD5 is not sent again, and the release
is published only once its file is there. A push is carried on the same way: files the Hub
holds already are not sent again, a commit whose answer was lost is found as main's head,
and the tag is made only once the commit's files are listed at that commit and equal the
release's, so no tag ever names a partial upload. Every call is kept (RemoteCall) with its
outcome.
"""

from __future__ import annotations

import hashlib
import json
import re
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from django.db import transaction

from annotate.models import Study
from core import storage
from core.exceptions import ApplicationError
from datasets.export_runs import archive_name
from datasets.exporting.card import cite_doi
from datasets.hub import HUB_OWN_FILES, HubClient, HubError, HubFile, git_blob_id
from datasets.models import ExportRun, Release, RemoteCall
from datasets.zenodo import Call, ZenodoClient, ZenodoError, md5_of

VERSION_RE = re.compile(r"^\d{1,4}(\.\d{1,4}){0,2}$")
# The Hub's repository names: owner/name, letters, digits, "-", "_" and ".", 96 at most each.
HUB_REPO_RE = re.compile(r"^[A-Za-z0-9][\w.-]{0,95}/[A-Za-z0-9][\w.-]{0,95}$")


def _invalid(field: str, message: str) -> ApplicationError:
    return ApplicationError(f"{field}: {message}", extra={"fields": {field: message}})


def _version_key(version: str) -> tuple[int, ...]:
    parts = [int(p) for p in version.split(".")]
    return tuple(parts + [0] * (3 - len(parts)))


def _stored(export: ExportRun, name: str) -> str:
    files = storage.exports_storage()
    with files.open(f"{export.study.slug}/{export.uuid}/dataset/{name}", "rb") as f:
        return f.read().decode("utf-8")


def _changes(previous: Release | None, export: ExportRun, manifest: dict) -> dict[str, Any]:
    """What changed since the release before: each table's row count, and the rubric."""
    if previous is None:
        return {}
    before = previous.export.counts or {}
    after = export.counts or {}
    tables = {t: [before.get(t, 0), after.get(t, 0)] for t in sorted(set(before) | set(after))}
    changed = {t: v for t, v in tables.items() if v[0] != v[1]}
    old = json.loads(_stored(previous.export, "study.json")).get("study", {}).get("rubric")
    new = manifest.get("study", {}).get("rubric")
    return {"tables": changed} | ({"rubric": [old, new]} if old != new else {})


@transaction.atomic
def create_release(
    *, study: Study, export: ExportRun, version: str, changelog: str, by: str, creators: Sequence[dict] = ()
) -> Release:
    """Release a finished export of the study as `version` (1, 1.1 or 1.1.0; greater than
    the study's releases before), with the creators a deposit names (optional here)."""
    version, changelog = (version or "").strip(), (changelog or "").strip()
    if not VERSION_RE.match(version):
        raise _invalid("version", "a version number such as 1, 1.1 or 1.1.0")
    if not changelog:
        raise _invalid("changelog", "say in a line what this release is")
    creators = clean_creators(creators) if creators else []
    if export.study_id != study.pk or export.status != ExportRun.Status.DONE:
        raise _invalid("export", "a finished export of this study")
    if export.include_restricted:
        # The licence gate: a release is public, so it holds only what the export may give away.
        raise _invalid("export", "this export includes sources whose licence forbids redistribution")
    Study.objects.select_for_update().filter(pk=study.pk).first()
    previous = Release.objects.filter(study=study).order_by("-created_at").first()
    if previous is not None and _version_key(version) <= _version_key(previous.version):
        raise _invalid("version", f"must be greater than the last release's {previous.version}")
    manifest = json.loads(_stored(export, "study.json"))
    return Release.objects.create(
        study=study,
        export=export,
        version=version,
        changelog=changelog,
        sha256sums=_stored(export, "SHA256SUMS"),
        changes=_changes(previous, export, manifest),
        created_by=by,
        creators=creators,
    )


def latest_doi(*, study_slug: str) -> tuple[str, str] | None:
    """(DOI, version) of the study's newest release with a DOI (published on Zenodo), or None."""
    return (
        Release.objects.filter(study__slug=study_slug)
        .exclude(doi="")
        .order_by("-created_at", "-pk")
        .values_list("doi", "version")
        .first()
    )


def zenodo_metadata(release: Release, *, creators: Sequence[dict], keywords: Sequence[str], related: Sequence[dict]):
    study = release.study
    description = (study.description or study.title) + f"\n\nRelease {release.version}: {release.changelog}"
    return {
        "upload_type": "dataset",
        "title": f"{study.title} (release {release.version})",
        "creators": [{k: v for k, v in c.items() if k in ("name", "affiliation", "orcid") and v} for c in creators],
        "description": description,
        "access_right": "open",
        "license": "cc-by-4.0",
        "version": release.version,
        "keywords": list(keywords),
        "related_identifiers": list(related),
    }


def _recorder(release: Release, service: str) -> Callable[[Call], None]:
    def record(call: Call) -> None:
        RemoteCall.objects.create(
            release=release,
            service=service,
            method=call.method,
            path=call.path,
            status=call.status,
            outcome=call.outcome,
            attempts=call.attempts,
        )

    return record


def clean_creators(creators: Sequence[dict]) -> list[dict]:
    """The creators as Zenodo takes them ({name: 'Family, Given', affiliation}), checked."""
    if not creators:
        raise _invalid("creators", "at least one creator, as 'Family, Given'")
    cleaned = []
    for creator in creators:
        name = str(creator.get("name", "")).strip()
        if "," not in name or len(name) > 200:
            raise _invalid("creators", f"{name!r}: write a creator as 'Family, Given'")
        affiliation = str(creator.get("affiliation", "") or "").strip()[:200]
        cleaned.append({"name": name} | ({"affiliation": affiliation} if affiliation else {}))
    return cleaned


def parse_creators(text: str) -> list[dict]:
    """Creators written one a line (or ';'-separated lines) as 'Family, Given; Affiliation'."""
    creators = []
    for line in (text or "").splitlines():
        if line.strip():
            name, _, affiliation = line.partition(";")
            creators.append({"name": name.strip(), "affiliation": affiliation.strip()})
    return creators


def deposit_on_zenodo(
    *,
    release: Release,
    creators: Sequence[dict] = (),
    keywords: Sequence[str] = (),
    related: Sequence[dict] = (),
    client: Callable[..., ZenodoClient] = ZenodoClient.from_environment,
) -> Release:
    """Deposit the release on Zenodo and publish it (or carry on an interrupted deposit);
    returns the release with its DOI. `creators` default to those of the release. A refusal
    is a ZenodoError, recorded on the release."""
    creators = clean_creators(creators or release.creators)
    if release.zenodo_state == Release.Zenodo.PUBLISHED:
        return release

    try:
        with client(record=_recorder(release, "zenodo")) as zenodo:
            _deposit(zenodo, release, zenodo_metadata(release, creators=creators, keywords=keywords, related=related))
    except ZenodoError as error:
        Release.objects.filter(pk=release.pk).update(zenodo_error=error.message)
        release.zenodo_error = error.message
        raise
    return release


def _draft(zenodo: ZenodoClient, release: Release) -> dict[str, Any]:
    """The release's deposition: the one started before, or a new one (a new version of
    the study's last published release, whose files it then drops)."""
    if release.zenodo_deposition:
        return zenodo.get(release.zenodo_deposition)
    earlier = (
        Release.objects.filter(study=release.study, zenodo_state=Release.Zenodo.PUBLISHED)
        .exclude(pk=release.pk)
        .order_by("-created_at")
        .first()
    )
    draft = zenodo.new_version(earlier.zenodo_deposition) if earlier else zenodo.create()
    release.zenodo_deposition = draft["id"]
    release.zenodo_bucket = draft["links"]["bucket"]
    release.zenodo_concept = str(draft.get("conceptrecid", ""))
    release.zenodo_state = Release.Zenodo.DRAFT
    release.save(update_fields=["zenodo_deposition", "zenodo_bucket", "zenodo_concept", "zenodo_state", "updated_at"])
    return draft


def _deposit(zenodo: ZenodoClient, release: Release, metadata: dict[str, Any]) -> None:
    draft = _draft(zenodo, release)
    if draft.get("submitted"):  # published before this side heard the answer
        _published(release, draft)
        return
    filename = f"{release.study.slug}-{release.version}.zip"
    archive = archive_name(study_slug=release.study.slug, export_id=release.export.uuid)
    with storage.local_copy(storage.exports_storage(), archive) as path:
        checksum = md5_of(path)
        present = {f.get("filename"): f for f in draft.get("files", [])}
        for name, found in present.items():
            if name != filename:  # a new version starts with the files of the one before
                zenodo.delete_file(release.zenodo_deposition, found["id"])
        if present.get(filename, {}).get("checksum") != checksum:
            zenodo.upload(release.zenodo_bucket, filename, path)
    zenodo.set_metadata(release.zenodo_deposition, metadata)
    _published(release, zenodo.publish(release.zenodo_deposition))


def _published(release: Release, published: dict[str, Any]) -> None:
    release.doi = published.get("doi", "")
    release.zenodo_concept = str(published.get("conceptrecid", release.zenodo_concept))
    release.zenodo_state = Release.Zenodo.PUBLISHED
    release.zenodo_error = ""
    release.save(update_fields=["doi", "zenodo_concept", "zenodo_state", "zenodo_error", "updated_at"])


# --- the Hugging Face Hub ------------------------------------------------------------------------


def check_hub_repo(repo: str) -> str:
    repo = (repo or "").strip()
    if not HUB_REPO_RE.match(repo) or ".." in repo or repo.endswith((".git", ".")):
        raise _invalid("repo", f"{repo!r}: a Hub repository as owner/name (letters, digits, -, _ and .)")
    return repo


def push_to_hub(
    *,
    release: Release,
    repo: str,
    private: bool,
    client: Callable[..., HubClient] = HubClient.from_environment,
) -> Release:
    """Push the release's dataset folder to the Hub dataset repository `repo` (made if
    needed, private or public as chosen) as one commit on main, verified and then tagged
    with the release's version; or carry on an interrupted push. A refusal is a HubError,
    recorded on the release."""
    repo = check_hub_repo(repo)
    if release.hub_state and release.hub_repo != repo:
        raise _invalid("repo", f"release {release.version} was pushed to {release.hub_repo}: push it there again")
    if release.hub_state == Release.Hub.TAGGED:
        return release
    release.hub_repo, release.hub_private = repo, private
    release.save(update_fields=["hub_repo", "hub_private", "updated_at"])
    try:
        with client(record=_recorder(release, "hub")) as hub, tempfile.TemporaryDirectory(prefix="release-") as scratch:
            release.hub_url = hub.repo_url(repo)
            _push(hub, release, _release_folder(release, Path(scratch)))
    except HubError as error:
        Release.objects.filter(pk=release.pk).update(hub_error=error.message)
        release.hub_error = error.message
        raise
    return release


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _release_folder(release: Release, folder: Path) -> list[tuple[str, Path]]:
    """The release's files as the Hub gets them, copied into `folder`: the export's files,
    each checked against the release's SHA256SUMS; README.md citing the release's DOI when
    it has one, and SHA256SUMS with README.md's checksum to match."""
    files = storage.exports_storage()
    sums = dict(reversed(line.split("  ", 1)) for line in release.sha256sums.splitlines() if line.strip())
    prefix = f"{release.study.slug}/{release.export.uuid}/dataset"
    for name, expected in sums.items():
        target = folder / name
        target.parent.mkdir(parents=True, exist_ok=True)
        with files.open(f"{prefix}/{name}", "rb") as source, target.open("wb") as out:
            for block in iter(lambda: source.read(1 << 20), b""):
                out.write(block)
        if _sha256(target) != expected:
            raise ApplicationError(f"{name}: the export's file changed since release {release.version} was made")
    if release.doi and "README.md" in sums:
        card = (folder / "README.md").read_text(encoding="utf-8")
        (folder / "README.md").write_text(cite_doi(card, doi=release.doi, version=release.version), encoding="utf-8")
        sums["README.md"] = _sha256(folder / "README.md")
    (folder / "SHA256SUMS").write_text("".join(f"{sums[n]}  {n}\n" for n in sorted(sums)), encoding="utf-8")
    return [(name, folder / name) for name in sorted([*sums, "SHA256SUMS"])]


def _differences(remote: dict[str, HubFile], files: list[tuple[str, Path]]) -> list[str]:
    """How the repository's files at a commit differ from the release's (empty: equal)."""
    wrong = []
    for name, path in files:
        found = remote.get(name)
        if found is None:
            wrong.append(f"{name} missing")
        elif found.size != path.stat().st_size:
            wrong.append(f"{name} has {found.size} bytes, not {path.stat().st_size}")
        elif found.sha256 is not None and found.sha256 != _sha256(path):
            wrong.append(f"{name} differs")
        elif found.sha256 is None and found.blob_id != git_blob_id(path.read_bytes()):
            wrong.append(f"{name} differs")
    extra = set(remote) - {name for name, _ in files} - HUB_OWN_FILES
    return wrong + [f"{name} is not the release's" for name in sorted(extra)]


def _push(hub: HubClient, release: Release, files: list[tuple[str, Path]]) -> None:
    repo = release.hub_repo
    hub.create_repo(repo, private=release.hub_private)
    if release.hub_state != Release.Hub.COMMITTED:
        present = hub.files(repo, "main")
        stale = sorted(set(present) - {name for name, _ in files} - HUB_OWN_FILES)
        commit = hub.commit(
            repo, files=files, delete=stale, message=f"Release {release.version}", description=release.changelog
        )
        wrong = _differences(hub.files(repo, commit), files)
        if wrong:
            raise HubError(
                f"The commit {commit[:12]} on {repo} does not hold release {release.version} "
                f"({'; '.join(wrong[:5])}); it was not tagged. Push again."
            )
        release.hub_commit, release.hub_state = commit, Release.Hub.COMMITTED
        release.save(update_fields=["hub_commit", "hub_state", "hub_url", "updated_at"])
    tagged = hub.tags(repo).get(release.version)
    if tagged is not None and tagged != release.hub_commit:
        raise HubError(
            f"The tag {release.version} of {repo} names another commit ({tagged[:12]}): "
            "delete that tag on the Hub or make a new release."
        )
    if tagged is None:
        hub.tag(repo, tag=release.version, revision=release.hub_commit, message=f"Release {release.version}")
    release.hub_state, release.hub_error = Release.Hub.TAGGED, ""
    release.save(update_fields=["hub_state", "hub_error", "hub_url", "updated_at"])
