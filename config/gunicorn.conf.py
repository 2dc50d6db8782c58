"""gunicorn's settings for `make run` and for deployments (docs/deployment.md).

Everything comes from the environment, like the rest of the settings:
- WEB_BIND (default 127.0.0.1:8000; `make run` passes PORT),
- WEB_CONCURRENCY worker processes (default 2: one per core of a small machine),
- WEB_THREADS threads per worker (default 8: a request mostly waits on the database),
- WEB_TIMEOUT seconds before a stuck worker is restarted (default 60).

The app is loaded before the workers fork (`preload_app`), so the workers share the
imported code's memory pages; the master builds what the workers' first requests would
each build (the ORM's model caches, the template loaders, the Celery app: `warm_up`), hands
its free heap back and freezes its objects for the garbage collector before they fork (so the
workers do not copy those pages), and each worker returns the
memory its requests freed to the system once it is idle (config/memory.py). Reports and
exports never run in a web request (they are Celery tasks, or a background thread without a
broker), so the timeout stays short.
"""

import gc

import gunicorn.http.wsgi

from config.connections import open_for_threads
from config.memory import IdleTrimmer, freeze_heap, warm_up
from core.env import env_int, env_str

# gunicorn sends "Server: gunicorn" on every response and has no setting to change it; its
# Response reads the module's SERVER when it is made, so this name is what clients see: no
# software name or version to look up known flaws of (issue 27, F13).
SERVER_HEADER = "web"
gunicorn.http.wsgi.SERVER = SERVER_HEADER

bind = env_str("WEB_BIND", "127.0.0.1:8000")
workers = env_int("WEB_CONCURRENCY", 2, minimum=1)
worker_class = "gthread"
threads = env_int("WEB_THREADS", 8, minimum=1)
timeout = env_int("WEB_TIMEOUT", 60, minimum=1)
graceful_timeout = 20
preload_app = True
accesslog = "-"
errorlog = "-"
forwarded_allow_ips = env_str("WEB_FORWARDED_ALLOW_IPS", "127.0.0.1")

# WEB_PREPARE=demo (what `make run` sets) or migrate (`DEMO=0 make run`): prepare the
# database after the app is loaded and before the port opens and the workers fork, in a
# child forked from this process (config/startup.py: what it imports and allocates goes
# with it). One interpreter and one Django start-up instead of three (`make demo` then
# `make serve`): `make run` answers about two seconds sooner. `migrate` also creates the
# first admin of an empty install (create_first_admin: from ADMIN_USERNAME/ADMIN_PASSWORD/
# ADMIN_EMAIL, or asked at the terminal). With `demo`, the demo's reports that are not in
# the report cache are then computed by `manage.py compute_reports` in a process of its own,
# which the master starts and does not wait for (config/demo_reports.py; WEB_DEMO_REPORTS=0
# skips it).
PREPARE_STEPS = {
    "": (),
    "migrate": ("migrate", "create_first_admin"),
    "demo": ("migrate", "load_demo", "load_question_demo"),
}


def prepare_database(steps: tuple[str, ...], url: str, reports: bool) -> list[str]:
    """The WEB_PREPARE steps, then the terminal's next step for the database at `url`; the
    demo studies whose report is to be computed (queued), when `reports`."""
    from django.core.management import call_command

    from config.startup import next_step

    if steps:
        call_command("migrate", interactive=False)
    for step in steps[1:]:
        call_command(step, **({"with_answers": True} if step != "create_first_admin" else {}))
    missing = []
    if reports:
        from config.demo_reports import queue_demo_reports

        missing = queue_demo_reports()
    print(next_step(url), flush=True)
    return missing


def on_starting(server):
    prepare = env_str("WEB_PREPARE")
    if prepare not in PREPARE_STEPS:
        raise SystemExit(f"WEB_PREPARE must be one of: migrate, demo (or unset), not {prepare!r}")
    from config.startup import run_in_child

    host, _, port = bind.rpartition(":")
    url = f"http://{host or '127.0.0.1'}:{port}/"
    # With `demo`, the demo's reports not in the report cache are computed once in a process
    # of their own (the master imports none of the statistics), so that the first visit is
    # served from the cache.
    reports = prepare == "demo" and env_str("WEB_DEMO_REPORTS", "1") not in ("0", "no", "false")
    # In a child process, which takes what the steps import and allocate with it when it
    # exits: the master, and every worker forked from it, keeps only the app (config/startup.py).
    missing = run_in_child(lambda: prepare_database(PREPARE_STEPS[prepare], url, reports))
    if missing:
        from config.demo_reports import start_demo_reports

        start_demo_reports(missing)  # the master's child: it ends with the master
    # The workers keep sharing the master's objects after they fork (config/memory.py).
    warm_up()
    freeze_heap()


# Each worker hands the memory its requests freed back to the system once it is idle
# (config/memory.py); None in the master.
_trimmer: IdleTrimmer | None = None


def post_worker_init(worker):
    global _trimmer
    _trimmer = IdleTrimmer(log=worker.log.debug).start()
    # With persistent connections, each request thread's own, opened now rather than by
    # its first request (config/connections.py); gthread's pool of request threads.
    if getattr(worker, "tpool", None) is not None:
        open_for_threads(worker.tpool, worker.cfg.threads)
    worker.log.debug("%d objects inherited frozen from the master", gc.get_freeze_count())


def pre_request(worker, req):
    worker.log.debug("%s %s", req.method, req.path)
    if _trimmer is not None:
        _trimmer.request_started()


def post_request(worker, req, environ, resp):
    if _trimmer is not None:
        _trimmer.request_finished()
