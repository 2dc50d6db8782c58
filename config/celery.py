import os

from celery import Celery
from celery.signals import worker_init

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

app = Celery("ratings")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


# Modules a study report computes with (analysis.report and stats/ over pandas, scipy,
# statsmodels, scikit-learn, krippendorff; matplotlib for its plots). The web app never
# imports them (tests/config/test_imports.py); a Celery worker imports them once, in its
# main process before the pool forks, so no report waits about 2 CPU seconds for them and
# the pool's processes (recycled every --max-tasks-per-child tasks) share those pages.
REPORT_MODULES = (
    "analysis.report",
    "stats.agreement",
    "stats.agreement_bootstrap",
    "stats.metaeval",
    "stats.metaeval_questions",
    "stats.metrics",
    "stats.pairwise",
    "statsmodels.stats.proportion",
    "sklearn.metrics",
    "scipy.stats",
    "matplotlib.pyplot",
)


@worker_init.connect
def preload_report_modules(**kwargs) -> list[str]:
    """Import REPORT_MODULES (matplotlib on the Agg backend first); returns those imported."""
    import importlib

    import matplotlib

    matplotlib.use("Agg")
    return [importlib.import_module(name).__name__ for name in REPORT_MODULES]


def load_task_machinery() -> None:
    """Import the modules a web worker's first enqueue would import, before gunicorn forks.

    Celery and kombu import their task, tracing, routing, result and transport modules on
    the first `delay()`; done here, in the master that `preload_app` forks, they are
    imported once for every worker and no request that enqueues pays for them. Nothing
    connects: the transport class is looked up, not opened.
    """
    import celery.app.trace  # noqa: F401 - eager tasks (no broker) run through it

    app.finalize(auto=True)
    app.amqp  # noqa: B018 - routing and message building
    with app.connection_for_write() as connection:
        connection.transport  # noqa: B018 - the broker's transport class, unopened
