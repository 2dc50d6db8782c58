"""gunicorn's settings for `make run` and for deployments (docs/deployment.md).

Everything comes from the environment, like the rest of the settings:
- WEB_BIND (default 127.0.0.1:8000; `make run` passes PORT),
- WEB_CONCURRENCY worker processes (default 2: one per core of a small machine),
- WEB_THREADS threads per worker (default 8: a request mostly waits on the database),
- WEB_TIMEOUT seconds before a stuck worker is restarted (default 60),
- WEB_MAX_REQUESTS requests after which a worker is replaced by a fresh one (default 0:
  never), with up to WEB_MAX_REQUESTS_JITTER more. Off by default: when a gthread worker
  is replaced, gunicorn drops the connections it has accepted and not yet read (gunicorn
  issue 3038, open), and clients meet a reset or an empty answer: a rater's submit fails.

The database is prepared before gunicorn starts (`manage.py prepare` in `make run`, the
release step in a deployment); gunicorn only serves. The app is loaded before the workers
fork (`preload_app`), so they share the imported code's memory pages. Reports and exports
never run in a web request (they are Celery tasks, or a background process without a
broker), so the timeout stays short.
"""

import gc

import gunicorn.http.wsgi

from core.env import env_int, env_str

# gunicorn sends "Server: gunicorn" on every response and has no setting to change it; its
# Response reads the module's SERVER when it is made, so this name is what clients see: no
# software name or version to look up known flaws of.
SERVER_HEADER = "web"
gunicorn.http.wsgi.SERVER = SERVER_HEADER

bind = env_str("WEB_BIND", "127.0.0.1:8000")
workers = env_int("WEB_CONCURRENCY", 2, minimum=1)
worker_class = "gthread"
threads = env_int("WEB_THREADS", 8, minimum=1)
timeout = env_int("WEB_TIMEOUT", 60, minimum=1)
graceful_timeout = 20
max_requests = env_int("WEB_MAX_REQUESTS", 0, minimum=0)
max_requests_jitter = env_int("WEB_MAX_REQUESTS_JITTER", 100, minimum=0)
preload_app = True
errorlog = "-"
accesslog = "-"
# The path without its query string (%(U)s, not the request line %(r)s) and no Referer: a
# recruitment link carries the panel's participant ids in its query (PROLIFIC_PID=...), and
# the page after it would carry them in its Referer. Panel ids never reach a log.
access_log_format = '%(h)s %(l)s %(u)s %(t)s "%(m)s %(U)s %(H)s" %(s)s %(B)s %(M)sms "%(a)s"'
forwarded_allow_ips = env_str("WEB_FORWARDED_ALLOW_IPS", "127.0.0.1")


def on_starting(server):
    # Just before the workers fork: the app's objects move to the collector's permanent
    # generation, so a worker's collections never write into their headers and the pages
    # they sit on stay shared with the master instead of being copied into every worker
    # (the memory it saves is measured in docs/performance.md, "Design choices").
    gc.freeze()
