"""Pushes of a release to the Hugging Face Hub and deposits on Zenodo started from the
releases page, as background runs like exports (datasets.export_runs): one PublishRun row
per run, its state kept by datasets.run_state (claimed by one worker, a lease renewed by a
heartbeat, queued again by the sweep when its worker died), and the remote calls made by
the worker, never by the web request.

A run may be delivered twice or taken over: push_to_hub and deposit_on_zenodo carry on
where an earlier try stopped, so running one again does no harm.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.utils import timezone

from core.background import enqueue_or_fail, heartbeat
from core.exceptions import ApplicationError, InvalidStateError
from datasets import run_state
from datasets.models import PublishRun, Release
from datasets.releases import check_hub_repo, clean_creators, deposit_on_zenodo, push_to_hub
from datasets.run_state import NOT_QUEUED_ERROR, Status, worker_died_error

WORKER_DIED_ERROR = worker_died_error("push", "Start it again: it carries on where it stopped.")


def _options(target: str, release: Release, options: dict[str, Any]) -> dict[str, Any]:
    """The run's options, checked now so that bad input changes nothing."""
    if target == PublishRun.Target.HUB:
        return {"repo": check_hub_repo(options.get("repo", "")), "private": bool(options.get("private"))}
    if target == PublishRun.Target.ZENODO:
        return {
            "creators": clean_creators(options.get("creators") or release.creators),
            "keywords": [k.strip() for k in options.get("keywords", []) if k.strip()][:20],
            "related": [u.strip() for u in options.get("related", []) if u.strip()][:20],
        }
    raise ApplicationError(f"target: one of {', '.join(PublishRun.Target.values)}")


def start_publish(
    *, release: Release, target: str, options: dict[str, Any], requested_by, enqueue: Callable[..., Any]
) -> PublishRun:
    """Record a push (target "hub") or deposit ("zenodo") of the release and hand it to
    `enqueue(run_id=...)`. A run of the same kind still waiting or running is a 409."""
    options = _options(target, release, options)
    waiting = PublishRun.objects.filter(release=release, target=target, status__in=(Status.PENDING, Status.RUNNING))
    if waiting.exists():
        raise InvalidStateError(f"A {target} run of release {release.version} is waiting or running already.")
    row = PublishRun.objects.create(
        study=release.study,
        release=release,
        target=target,
        options=options,
        requested_by=requested_by.get_username(),
        queued_at=timezone.now(),
    )
    enqueue_or_fail(
        enqueue,
        run_id=str(row.uuid),
        fail=lambda message: run_state.fail_run(PublishRun, row.pk, NOT_QUEUED_ERROR, only=(Status.PENDING,)),
    )
    return run_state.reread(row)


def run_publish(*, run_id: str) -> PublishRun:
    """Push or deposit, recording the outcome on the run (the release records each call)."""
    row = run_state.claim(PublishRun, run_id)
    if row is None:
        return PublishRun.objects.select_related("study").get(uuid=run_id)
    me = row.worker
    release = Release.objects.select_related("study", "export").get(pk=row.release_id)
    with heartbeat(lambda: run_state.renew(PublishRun, row.pk, worker=me)):
        try:
            if row.target == PublishRun.Target.HUB:
                push_to_hub(release=release, repo=row.options["repo"], private=row.options["private"])
            else:
                deposit_on_zenodo(
                    release=release,
                    creators=row.options["creators"],
                    keywords=row.options["keywords"],
                    related=[{"identifier": url, "relation": "isSupplementTo"} for url in row.options["related"]],
                )
        except ApplicationError as exc:
            run_state.finish(PublishRun, row.pk, worker=me, status=Status.FAILED, error=exc.message)
        except Exception:
            # Recorded so the page does not wait forever, then raised: a bug must be seen.
            run_state.finish(PublishRun, row.pk, worker=me, status=Status.FAILED, error="The run failed unexpectedly.")
            raise
        else:
            run_state.finish(PublishRun, row.pk, worker=me, status=Status.DONE)
    return run_state.reread(row)


def sweep_publishes(*, enqueue: Callable[..., Any]) -> int:
    """Queue again the runs whose worker died or that no worker took (datasets.run_state)."""
    changed = 0
    for row in run_state.unfinished(PublishRun):
        changed += run_state.recover(
            row, error=WORKER_DIED_ERROR, enqueue_run=lambda row=row: enqueue(run_id=str(row.uuid))
        )
    return changed
