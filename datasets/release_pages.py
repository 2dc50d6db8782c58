"""The releases page of a study (study admins): its releases newest first, each with its
checksums, what changed, where it was pushed or deposited, the runs started from the page
and every remote call with its outcome. One query per kind of row, whatever the number of
releases (tests/datasets/test_releases_page.py pins it)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.db.models import Prefetch

from annotate.models import Study
from datasets import run_state
from datasets.models import PublishRun, Release, RemoteCall
from datasets.publish_runs import WORKER_DIED_ERROR

RUNS_SHOWN = 5


@dataclass(frozen=True)
class CallRow:
    service: str
    method: str
    path: str
    status: int | None
    outcome: str
    attempts: int
    at: datetime
    ok: bool


@dataclass(frozen=True)
class RunRow:
    target: str
    status: str
    requested_by: str
    created_at: datetime
    error: str


@dataclass(frozen=True)
class ReleaseRow:
    uuid: str
    version: str
    changelog: str
    created_by: str
    created_at: datetime
    export_id: str
    checksums: tuple[str, ...]
    changes: tuple[str, ...]
    creators: str
    hub_repo: str
    hub_state: str
    hub_label: str
    hub_url: str
    hub_tag_url: str
    hub_commit: str
    hub_private: bool
    hub_error: str
    zenodo_state: str
    zenodo_label: str
    doi: str
    doi_url: str
    zenodo_error: str
    runs: tuple[RunRow, ...]
    calls: tuple[CallRow, ...]


@dataclass(frozen=True)
class ReleasesPage:
    study: Study
    releases: tuple[ReleaseRow, ...]
    waiting: bool  # a run still waiting or running: the page refreshes itself


def _changes(changes: dict) -> tuple[str, ...]:
    lines = [f"{table}: {before} → {after} rows" for table, (before, after) in changes.get("tables", {}).items()]
    if "rubric" in changes:
        old, new = changes["rubric"]
        lines.append(f"rubric: {old} → {new}")
    return tuple(lines)


def _run_row(run: PublishRun) -> RunRow:
    if run.status in (PublishRun.Status.PENDING, PublishRun.Status.RUNNING):
        run = run_state.status_now(run, error=WORKER_DIED_ERROR)
    return RunRow(run.get_target_display(), run.status, run.requested_by, run.created_at, run.error)


def _row(release: Release) -> ReleaseRow:
    calls = tuple(
        CallRow(c.service, c.method, c.path, c.status, c.outcome, c.attempts, c.at, c.outcome == "ok")
        for c in release.calls.all()
    )
    tag_url = f"{release.hub_url}/tree/{release.version}" if release.hub_state == Release.Hub.TAGGED else ""
    return ReleaseRow(
        uuid=str(release.uuid),
        version=release.version,
        changelog=release.changelog,
        created_by=release.created_by,
        created_at=release.created_at,
        export_id=str(release.export.uuid),
        checksums=tuple(release.sha256sums.splitlines()),
        changes=_changes(release.changes),
        creators="\n".join(
            c["name"] + (f"; {c['affiliation']}" if c.get("affiliation") else "") for c in release.creators
        ),
        hub_repo=release.hub_repo,
        hub_state=release.hub_state,
        hub_label=release.get_hub_state_display(),
        hub_url=release.hub_url,
        hub_tag_url=tag_url,
        hub_commit=release.hub_commit,
        hub_private=release.hub_private,
        hub_error=release.hub_error,
        zenodo_state=release.zenodo_state,
        zenodo_label=release.get_zenodo_state_display(),
        doi=release.doi,
        doi_url=f"https://doi.org/{release.doi}" if release.doi else "",
        zenodo_error=release.zenodo_error,
        runs=tuple(_run_row(run) for run in release.runs.all()[:RUNS_SHOWN]),
        calls=calls,
    )


def releases_page(*, study: Study) -> ReleasesPage:
    releases = (
        Release.objects.filter(study=study)
        .select_related("export")
        .prefetch_related(
            Prefetch("calls", queryset=RemoteCall.objects.order_by("at", "pk")),
            Prefetch("runs", queryset=PublishRun.objects.order_by("-created_at", "-id")),
        )
        .order_by("-created_at", "-pk")
    )
    rows = tuple(_row(release) for release in releases)
    waiting = any(run.status in ("pending", "running") for row in rows for run in row.runs)
    return ReleasesPage(study=study, releases=rows, waiting=waiting)
