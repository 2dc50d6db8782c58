"""Issue 30, memory of `make run` (config/memory.py, config/gunicorn.conf.py's hooks): the
master builds what the workers' first requests would build (warm_up) and freezes its objects
before the workers fork, and a worker trims glibc's heap once it is idle, never while a request
is in flight. On real gunicorn, in a fresh interpreter, and on the trimmer's thread."""

import json
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

from django.conf import settings

from config.memory import IdleTrimmer
from tests.config.test_imports import probe_env, run_probe
from tests.config.test_server import environment

BASE = Path(settings.BASE_DIR)


def wait_for(predicate, limit_s=60.0):
    """Poll until predicate() is true; a generous limit (a loaded machine), not a timing check."""
    deadline = time.monotonic() + limit_s
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


class Recorder:
    """Stands in for malloc_trim (a C function): records the calls, and whether a request was in
    flight at each."""

    def __init__(self):
        self.calls = []
        self.trimmer = None

    def __call__(self, pad):
        self.calls.append(self.trimmer.in_flight)
        return 1


def trimmer(idle_s=0.01):
    recorder = Recorder()
    recorder.trimmer = IdleTrimmer(idle_s=idle_s, trim=recorder).start()
    return recorder.trimmer, recorder


def test_a_worker_is_trimmed_once_after_a_busy_spell_and_never_during_one():
    t, recorder = trimmer()
    t.request_started()
    t.request_started()
    t.request_finished()
    # One request still in flight: the thread must not trim (it is woken, looks, and waits).
    time.sleep(0.2)
    assert recorder.calls == []
    t.request_finished()
    assert wait_for(lambda: recorder.calls == [0])
    # Idle, nothing new: no second trim.
    time.sleep(0.2)
    assert recorder.calls == [0]
    # The next spell is trimmed once more, after it.
    t.request_started()
    t.request_finished()
    assert wait_for(lambda: recorder.calls == [0, 0])


def test_a_request_within_the_idle_delay_postpones_the_trim():
    t, recorder = trimmer(idle_s=0.3)
    stop = threading.Event()

    def busy():  # back-to-back requests with gaps far shorter than the idle delay
        while not stop.is_set():
            t.request_started()
            time.sleep(0.005)
            t.request_finished()
            time.sleep(0.005)

    worker = threading.Thread(target=busy)
    worker.start()
    time.sleep(0.6)
    stop.set()
    worker.join()
    # The gaps between requests never reached 0.3 s (a loaded machine can stretch a gap, so the
    # check is the one that cannot be wrong: no trim ever ran with a request in flight).
    assert all(in_flight == 0 for in_flight in recorder.calls)
    assert wait_for(lambda: len(recorder.calls) >= 1)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_gunicorn_workers_inherit_frozen_objects_and_trim_when_idle(tmp_path):
    env = environment(
        tmp_path,
        WEB_PREPARE="migrate",
        ADMIN_USERNAME="admin",
        ADMIN_PASSWORD="a-password-for-this-test-2026",
        ADMIN_EMAIL="admin@example.org",
        WEB_CONCURRENCY="1",
        WEB_BIND=f"127.0.0.1:{free_port()}",
        GUNICORN_CMD_ARGS="--log-level debug",
    )
    log_path = tmp_path / "gunicorn.log"
    with open(log_path, "wb") as log:
        gunicorn = str(Path(sys.executable).with_name("gunicorn"))
        process = subprocess.Popen(
            [gunicorn, "config.wsgi:application", "-c", "config/gunicorn.conf.py"],
            cwd=BASE,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    base = f"http://{env['WEB_BIND']}"

    def answers():
        try:
            with urllib.request.urlopen(f"{base}/accounts/login/", timeout=30) as response:
                return response.status == 200
        except OSError:
            return process.poll() is not None  # stop waiting if it died

    try:
        assert wait_for(answers, limit_s=300), log_path.read_text()[-3000:]
        assert process.poll() is None, log_path.read_text()[-3000:]
        for _ in range(5):
            assert answers()
        text = lambda: log_path.read_text()  # noqa: E731
        assert wait_for(lambda: "freed memory returned to the system" in text()), text()[-3000:]
        frozen = [line for line in text().splitlines() if "objects inherited frozen from the master" in line]
        assert frozen, text()[-3000:]
        count = int(frozen[0].split("objects inherited frozen")[0].split()[-1])
        # The master had loaded Django and the app: tens of thousands of objects.
        assert count > 10_000
    finally:
        process.terminate()
        process.wait(timeout=60)


# What gunicorn's master does before the workers fork (the app, then the on_starting hook as
# gunicorn calls it, `make run`'s WEB_PREPARE=demo), then what a worker's first requests do:
# a rater logs in and opens the queue and a rating page, a study admin imports a file through
# the REST API (in process: no broker). Every module those requests import is imported in the
# worker alone, once per worker, instead of once in the master and shared.
FIRST_REQUESTS_PROBE = """
import importlib.util, json, sys
import config.wsgi
spec = importlib.util.spec_from_file_location("gunicorn_conf", "config/gunicorn.conf.py")
conf = importlib.util.module_from_spec(spec)
spec.loader.exec_module(conf)
conf.on_starting(None)
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from annotate.accounts import create_token
from annotate.models import Assignment, Study, StudyMembership
from annotate.services import add_study_member, ensure_user
from datasets.importing import import_records
admin, _ = ensure_user(username="probe-admin", password="a-password-for-this-probe-2026")
token = create_token(user=admin).secret
import_records(lines=[json.dumps({"type": "study", "slug": "probe", "title": "Probe", "rubric": "litsumm"}) + "\\n"])
add_study_member(study=Study.objects.get(slug="probe"), user=admin, role=StudyMembership.Role.ADMIN)
records = [
    {"type": "source", "study": "probe", "key": "s1", "text": "A trial enrolled adults. It ended early."},
    {"type": "summary", "study": "probe", "source": "s1", "key": "m1", "text": "It ended.", "generator": "g"},
]
body = "".join(json.dumps(r) + "\\n" for r in records).encode()
before = set(sys.modules)
rater = Client(HTTP_HOST="127.0.0.1")
login = rater.post("/accounts/login/", {"username": "rater1", "password": "rate-summaries-2026"})
queue = rater.get("/rate/")
assignment = Assignment.objects.filter(rater__username="rater1", state="pending").order_by("position").first()
page = rater.get(f"/rate/{assignment.uuid}/")
api = Client(HTTP_HOST="127.0.0.1", HTTP_AUTHORIZATION="Token " + token)
upload = SimpleUploadedFile("probe.jsonl", body, "application/jsonl")
imported = api.post("/api/studies/probe/imports/", {"file": upload})
print(json.dumps({
    "status": [login.status_code, queue.status_code, page.status_code, imported.status_code],
    "import": imported.json()["status"],
    "late_modules": sorted(set(sys.modules) - before),
}))
"""


def test_a_workers_first_pages_and_import_import_nothing_the_master_did_not(tmp_path):
    env = probe_env(tmp_path, DEBUG="1", WEB_PREPARE="demo", WEB_DEMO_REPORTS="0", DEMO_PASSWORD="")
    done = run_probe(["-c", FIRST_REQUESTS_PROBE], env, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["status"] == [302, 200, 200, 202]
    assert found["import"] == "done"
    # Before warm_up (config/memory.py) these requests imported the template loaders, the
    # context processors, the message storage, the session serializer and Celery's task
    # machinery (about 60 modules) in each worker.
    assert found["late_modules"] == [], f"a worker's first requests imported {found['late_modules']}"
