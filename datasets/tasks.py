"""Celery tasks of the datasets app: thin wrappers around its services."""

from concurrent.futures import Future

from celery import shared_task
from celery.signals import task_failure

from core.background import run_in_background, worker_lost
from datasets import export_runs, import_runs, publish_runs
from datasets.export_runs import run_export
from datasets.import_runs import run_import
from datasets.retention import remove_expired_files


@shared_task
def run_api_export_task(*, study_slug: str, export_id: str) -> str:
    """Run an export started through the API or the admin (datasets.export_runs).
    Safe to deliver twice: run_export claims the run and restarts one whose worker died."""
    return run_export(study_slug=study_slug, export_id=export_id).status


@shared_task
def run_api_import_task(*, study_slug: str, import_id: str) -> str:
    """Run an import uploaded through the API or the study pages (datasets.import_runs)."""
    return run_import(study_slug=study_slug, import_id=import_id).status


# Without a broker, pushes and deposits run on this process's "publish" thread, never in the
# request that started them (core.background).
PUBLISH_POOL = "publish"


@shared_task(acks_late=True)
def run_publish_task(run_id: str) -> str:
    """Push a release to the Hub or deposit it on Zenodo (datasets.publish_runs); safe to
    deliver twice: the run is claimed, and a push or deposit carries on where it stopped."""
    return publish_runs.run_publish(run_id=run_id).status


def enqueue_publish(*, run_id: str) -> Future | None:
    return run_in_background(run_publish_task, run_id, pool=PUBLISH_POOL)


@shared_task
def sweep_dataset_runs_task() -> int:
    """Periodic (Celery beat): queue again the runs whose worker died (another worker takes
    them over) and, once, the runs no worker claimed within RUN_CLAIM_TIMEOUT; fail them
    when that was tried already (datasets.run_state)."""
    changed = export_runs.sweep_exports(enqueue=run_api_export_task.delay)
    changed += import_runs.sweep_imports(enqueue=run_api_import_task.delay)
    return len(changed) + publish_runs.sweep_publishes(enqueue=enqueue_publish)


@shared_task
def remove_expired_files_task() -> int:
    """Periodic (Celery beat, daily): remove uploads and export archives past FILE_RETENTION_DAYS."""
    removed = remove_expired_files()
    return removed.exports + removed.imports


@task_failure.connect
def _dataset_worker_lost(sender=None, exception=None, kwargs=None, **_) -> None:
    """The pool process running an export or import died (WorkerLostError): the worker's
    main process queues it again at once for another worker to take over (or records it as
    "stopped: the worker died" after run_state.MAX_TRIES claims)."""
    if not worker_lost(exception) or not kwargs:
        return
    name = getattr(sender, "name", None)
    if name == run_api_export_task.name:
        export_runs.fail_lost_export(
            study_slug=kwargs["study_slug"], export_id=kwargs["export_id"], enqueue=run_api_export_task.delay
        )
    elif name == run_api_import_task.name:
        import_runs.fail_lost_import(
            study_slug=kwargs["study_slug"], import_id=kwargs["import_id"], enqueue=run_api_import_task.delay
        )
