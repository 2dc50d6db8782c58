"""The project's Celery app as the kill tests' worker processes load it
(`celery -A tests.broker.worker_app worker`): the same tasks, settings and signal handlers;
with TEST_SLOW_REPORTS set, a study report takes long enough (a million bootstrap
resamples in small chunks) to be killed while it computes.

The change is made once in the worker's main process, before it forks its pool processes,
which inherit it: a pool process that imported pandas when it starts would miss Celery's
deadline for saying it is up (worker_proc_alive_timeout) on a loaded machine."""

import os

from celery.signals import worker_init

from config.celery import app

__all__ = ["app"]

# A test's own queue (TEST_TASK_QUEUE), for the tasks this worker sends itself: a run queued
# again by the worker's main process when a pool process is lost (datasets.tasks).
if os.environ.get("TEST_TASK_QUEUE"):
    app.conf.task_default_queue = os.environ["TEST_TASK_QUEUE"]


@worker_init.connect
def _slow_reports(**kwargs) -> None:
    if os.environ.get("TEST_SLOW_REPORTS"):
        import django

        django.setup()
        from analysis import services
        from stats import agreement_bootstrap

        services.BOOTSTRAP_RESAMPLES = 1_000_000
        agreement_bootstrap.CHUNK = 10
