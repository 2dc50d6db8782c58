"""The web app starts without the statistics and data stack.

A web worker imports the settings, the URLconf and every view it names (config.wsgi
does so before gunicorn forks). None of that may import pandas, numpy, scipy,
statsmodels, scikit-learn, matplotlib, pyarrow, krippendorff or the ML extra: they
cost seconds of start-up and tens of MiB per worker, and only reports, plots and
exports use them (imported inside the functions that compute). Checked in a fresh
interpreter, since this test process has imported them long ago.
"""

import json
import os
import subprocess
import sys

from django.conf import settings

HEAVY = (
    "pandas",
    "numpy",
    "scipy",
    "statsmodels",
    "sklearn",
    "matplotlib",
    "pyarrow",
    "krippendorff",
    "sentence_transformers",
    "torch",
    "tiktoken",
    "openai",
)

# Imported by the first `delay()` of a process unless config.wsgi imported them (no broker:
# the in-memory transport), and the import pipeline the import task runs.
TASK_MACHINERY = ("celery.app.trace", "celery.app.amqp", "kombu.transport.memory", "datasets.importing.writing")

PROBE = """
import json, sys
import config.wsgi  # settings, the app, the URLconf and every view (config.serving.load_urlconf)
from django.urls import get_resolver
print(json.dumps({
    "heavy": sorted(m for m in %r if m in sys.modules),
    "patterns": len(get_resolver().url_patterns),
    "views": sorted(
        m for m in sys.modules
        if m.split(".")[0] in ("annotate", "analysis", "datasets", "generation") and m.endswith(("views", "api"))
    ),
    "task_machinery": sorted(m for m in %r if m in sys.modules),
}))
"""


def probe_env(tmp_path, **extra) -> dict[str, str]:
    """The environment of a probe in a fresh interpreter: a database and secret key of its
    own under `tmp_path`, and nothing of the caller's shell but PATH and HOME."""
    return {
        "PATH": os.environ.get("PATH", ""),
        "HOME": os.environ.get("HOME", "/tmp"),
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
        "LOCAL_SECRET_KEY_FILE": str(tmp_path / "secret_key"),
        **extra,
    }


def run_probe(argv: list[str], env: dict[str, str], timeout: int = 300) -> subprocess.CompletedProcess:
    """`python <argv>` in the project's folder with `env` (a generous limit: a loaded
    2-core machine can take a while), its output captured as text."""
    return subprocess.run(
        [sys.executable, *argv], cwd=settings.BASE_DIR, env=env, capture_output=True, text=True, timeout=timeout
    )


def test_serving_the_app_imports_no_heavy_library(tmp_path):
    env = probe_env(tmp_path, DEBUG="1")  # a served site with DEBUG off needs its own SECRET_KEY
    done = run_probe(["-c", PROBE % (HEAVY, TASK_MACHINERY)], env)
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout.strip().splitlines()[-1])
    # The probe did load the web app: the URLconf and the apps' views and APIs.
    assert found["patterns"] > 5
    assert {"annotate.views", "analysis.views", "analysis.api"} <= set(found["views"])
    assert found["heavy"] == [], f"serving the web app imported {found['heavy']}"
    # What a worker's first enqueue would import is imported before the fork
    # (config.celery.load_task_machinery), the import pipeline with the views.
    assert found["task_machinery"] == sorted(TASK_MACHINERY)


# What `make run`'s gunicorn master does after `manage.py prepare --demo` (a process of its
# own): load the app (preload_app), then its on_starting hook, then the workers fork and
# serve. Here in one fresh interpreter: the app, the hook exactly as gunicorn calls it, then
# the first requests a rater makes (the queue and a rating page, through Django's test
# client: the worker's whole request path).
MASTER_PROBE = """
import importlib.util, json, sys
import config.wsgi
spec = importlib.util.spec_from_file_location("gunicorn_conf", "config/gunicorn.conf.py")
conf = importlib.util.module_from_spec(spec)
spec.loader.exec_module(conf)
conf.on_starting(None)
heavy = %r
after_prepare = sorted(m for m in heavy if m in sys.modules)
from django.test import Client
from annotate.models import Assignment
client = Client(HTTP_HOST="127.0.0.1")
login = client.post("/accounts/login/", {"username": "rater1", "password": "rate-summaries-2026"})
assert login.status_code == 302, login.status_code
queue = client.get("/rate/")
assignment = Assignment.objects.filter(rater__username="rater1", state="pending").order_by("position").first()
page = client.get(f"/rate/{assignment.uuid}/")
print(json.dumps({
    "after_prepare": after_prepare,
    "after_requests": sorted(m for m in heavy if m in sys.modules),
    "status": [queue.status_code, page.status_code],
}))
"""
MASTER_HEAVY = (*HEAVY, "bm25s", "Stemmer")


def test_make_run_master_and_a_raters_first_requests_import_no_heavy_library(tmp_path):
    env = probe_env(tmp_path, DEBUG="1", WEB_DEMO_REPORTS="0", DEMO_PASSWORD="")
    prepared = run_probe(["manage.py", "prepare", "--demo"], env, timeout=600)
    assert prepared.returncode == 0, prepared.stderr
    assert "Question demo loaded: 12 questions" in prepared.stdout
    done = run_probe(["-c", MASTER_PROBE % (MASTER_HEAVY,)], env, timeout=600)
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["status"] == [200, 200]
    assert found["after_prepare"] == [], f"make run's master imported {found['after_prepare']}"
    assert found["after_requests"] == [], f"a rater's first requests imported {found['after_requests']}"


WORKER_PROBE = """
import json, sys
from celery.signals import worker_init
import config.celery as celery_conf
before = sorted(m for m in %r if m in sys.modules)
worker_init.send(sender=None)  # what a Celery worker's main process sends before its pool forks
print(json.dumps({
    "before": before,
    "after": sorted(m for m in %r if m in sys.modules),
    "backend": sys.modules["matplotlib"].get_backend(),
}))
"""


def test_a_celery_worker_imports_the_report_stack_before_its_pool_forks(tmp_path):
    """The web app never imports the report's libraries; a Celery worker's main process
    does, when it starts (config.celery.preload_report_modules on worker_init), so its pool
    processes inherit them and no report pays for them."""
    env = probe_env(tmp_path, DEBUG="1")
    report_stack = ("pandas", "numpy", "scipy", "statsmodels", "sklearn", "matplotlib", "krippendorff")
    done = run_probe(["-c", "import django; django.setup()\n" + WORKER_PROBE % (report_stack, report_stack)], env)
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["before"] == []
    # Nothing but the signal imported them: the handler is connected.
    assert found["after"] == sorted(report_stack)
    assert found["backend"].lower() == "agg"


# `manage.py import_jsonl`: a new interpreter for each file, so its start-up is
# part of every import. It runs what the command runs (django.setup, then the command) and
# records what got imported. DRF (rest_framework is an installed app, but its
# serializers and compat modules are not needed) was a fifth of that start-up, imported through
# core.exceptions by every service module; the command does not serve a request.
IMPORT_COMMAND_PROBE = """
import json, sys
from django.core.management import execute_from_command_line
execute_from_command_line(["manage.py", "import_jsonl", sys.argv[1]])
print(json.dumps({"heavy": sorted(m for m in %r if m in sys.modules)}))
"""


def test_the_import_command_imports_neither_drf_nor_a_heavy_library(tmp_path):
    env = probe_env(tmp_path, DEBUG="1")  # as `make run` and the harness's command row
    migrated = run_probe(["manage.py", "migrate", "--verbosity", "0"], env, timeout=600)
    assert migrated.returncode == 0, migrated.stderr
    records = [
        {"type": "study", "slug": "probe", "title": "Probe", "rubric": "litsumm"},
        {"type": "source", "study": "probe", "key": "s1", "text": "A trial enrolled adults. It ended early."},
        {"type": "summary", "study": "probe", "source": "s1", "key": "m1", "text": "It ended.", "generator": "g"},
    ]
    path = tmp_path / "probe.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    # ... nor the apps' admin modules and forms (config/admin_app.py): no page is served.
    unwanted = (*HEAVY, "rest_framework.compat", "rest_framework.serializers", "annotate.admin", "annotate.forms")
    done = run_probe(["-c", IMPORT_COMMAND_PROBE % (unwanted,), str(path)], env)
    assert done.returncode == 0, done.stderr
    assert "summary: 1 created" in done.stdout, done.stdout
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["heavy"] == [], f"manage.py import_jsonl imported {found['heavy']}"


ADMIN_CHECK_PROBE = """
import json, sys
import django
django.setup()
before = "annotate.admin" in sys.modules
from django.core import checks
messages = checks.run_checks(tags=[checks.Tags.admin])
from django.contrib import admin
from annotate.models import Study
print(json.dumps({"before": before, "registered": admin.site.is_registered(Study),
                  "errors": [str(m) for m in messages if m.is_serious()]}))
"""


def test_the_admin_is_discovered_by_its_system_check_not_at_start_up(tmp_path):
    """config/admin_app.py: django.setup() imports no app's admin module, and the admin's
    system check discovers them before checking, so `manage.py check` (which loads no
    URLconf) still checks every registered ModelAdmin."""
    env = probe_env(tmp_path)
    done = run_probe(["-c", ADMIN_CHECK_PROBE], env)
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found == {"before": False, "registered": True, "errors": []}


# The study report's numbers read which stored `reference` run is today's and the rubric
# judge's columns (generation.selectors); they must not import the LLM gateway for that
# (generation.evaluators and generation.judging import openai and tiktoken: about a second of
# a report's first computation). The selectors are called on a database without
# tables: their imports come before their first query.
REPORT_PROBE = """
import json, sys
import django
django.setup()
from django.db import DatabaseError
from annotate.models import Study
from generation import selectors
study = Study(pk=1, slug="probe")
for read in (selectors.stored_reference_metrics, selectors.judge_metrics):
    try:
        read(study)
    except DatabaseError:
        pass
print(json.dumps(sorted(m for m in ("openai", "tiktoken", "generation.llm") if m in sys.modules)))
"""


def test_the_report_numbers_read_evaluator_runs_without_the_llm_gateway(tmp_path):
    env = probe_env(tmp_path, DEBUG="1")
    done = run_probe(["-c", REPORT_PROBE], env)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) == []
