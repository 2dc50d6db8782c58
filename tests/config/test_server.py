"""`make run` serves with gunicorn (config/gunicorn.conf.py): a real server process, started
as the Makefile starts it (`manage.py prepare`, then gunicorn), answers pages and static
files, several clients at once."""

import atexit
import gzip
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from functools import cache
from pathlib import Path

import pytest
from django.conf import settings as django_settings

BASE = Path(django_settings.BASE_DIR)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(url: str, **headers) -> tuple[int, bytes, dict]:
    with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=60) as response:
        return response.status, response.read(), dict(response.headers)


@cache
def collected_static() -> str:
    """A STATIC_ROOT filled by `collectstatic` as `make run` and the release step fill it,
    once per test process (the servers of these tests only read it)."""
    root = Path(os.environ.get("TMPDIR", "/tmp")) / f"ratings-test-static-{os.getpid()}"
    atexit.register(shutil.rmtree, root, ignore_errors=True)
    done = subprocess.run(
        [sys.executable, "manage.py", "collectstatic", "--noinput", "-v", "0"],
        cwd=BASE,
        env={"PATH": os.environ.get("PATH", ""), "HOME": os.environ.get("HOME", "/tmp"), "STATIC_ROOT": str(root)},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    return str(root)


def environment(tmp_path, **extra) -> dict[str, str]:
    return {
        "PATH": os.environ.get("PATH", ""),
        "HOME": os.environ.get("HOME", "/tmp"),
        "DEBUG": "1",
        "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
        "LOCAL_SECRET_KEY_FILE": str(tmp_path / "secret_key"),
        "STATIC_ROOT": collected_static(),
        **extra,
    }


def prepare(env: dict[str, str], *args: str) -> str:
    """`manage.py prepare`, as `make run` runs it before gunicorn; its output."""
    done = subprocess.run(
        [sys.executable, "manage.py", "prepare", *args], cwd=BASE, env=env, capture_output=True, text=True, timeout=900
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


@contextmanager
def gunicorn(env: dict[str, str], *, workers: int, limit_s: float = 180):
    """gunicorn as `make serve` starts it (on a database already prepared), on a free port;
    yields its base URL once the login page answers (a generous limit: a loaded 2-core machine can take a while)."""
    port = free_port()
    # Its log goes to a file: a pipe nobody reads fills with the access log and stalls it.
    log = tempfile.TemporaryFile()  # noqa: SIM115 (open for the server's life)
    process = subprocess.Popen(
        [str(Path(sys.executable).with_name("gunicorn")), "config.wsgi:application", "-c", "config/gunicorn.conf.py"],
        cwd=BASE,
        env={**env, "WEB_BIND": f"127.0.0.1:{port}", "WEB_CONCURRENCY": str(workers)},
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + limit_s
        while True:
            try:
                get(f"{base}/accounts/login/")
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    process.kill()
                    log.seek(0)
                    pytest.fail(f"gunicorn did not start: {log.read().decode()[-3000:]}")
                time.sleep(0.5)
        yield base
    finally:
        process.terminate()
        process.wait(timeout=60)
        log.close()


@pytest.fixture
def server(tmp_path):
    env = environment(tmp_path)
    migrated = subprocess.run(
        [sys.executable, "manage.py", "migrate", "--noinput"], cwd=BASE, env=env, capture_output=True, timeout=600
    )
    assert migrated.returncode == 0, migrated.stderr
    with gunicorn(env, workers=2) as base:
        yield base


def test_gunicorn_serves_pages_static_files_and_many_clients(server):
    status, body, headers = get(f"{server}/accounts/login/")
    assert status == 200 and b"Log in" in body
    assert "script-src 'self'" in headers["Content-Security-Policy"]
    status, css, _ = get(f"{server}/static/css/app.css")
    assert status == 200 and b"{" in css
    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(lambda _: get(f"{server}/accounts/login/")[0], range(32)))
    assert results == [200] * 32


def test_no_request_is_dropped_past_a_thousand_requests_a_worker(server):
    """With the default settings no worker is replaced while it holds connections: a
    gthread worker replaced after max_requests drops the connections it has accepted and
    not yet read (gunicorn issue 3038), which clients meet as a reset or an empty answer.
    2,600 requests from 8 clients, each on a new connection: past the 1,000 (plus jitter)
    requests a worker that the old default replaced after."""

    def fetch(_):
        try:
            return get(f"{server}/healthz")[0]
        except OSError as error:  # a reset, an empty answer, a refused connection
            return repr(error)

    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(fetch, range(2600)))
    failed = [r for r in results if r != 200]
    assert not failed, f"{len(failed)} of {len(results)} requests failed, e.g. {failed[:3]}"


def test_a_browser_that_accepts_gzip_gets_pages_and_static_text_files_gzipped(server):
    """The rating page's style and script, and the pages, go out compressed (a
    browser always sends Accept-Encoding: gzip); a client that does not ask gets them whole.
    (Where the `brotli` package is installed, as the load benchmark's locust brings it,
    collectstatic also writes Brotli files, which whitenoise prefers for a client that
    accepts br: this client asks for gzip only.)"""
    for path in ("static/js/rate.js", "static/css/app.css"):
        status, body, headers = get(f"{server}/{path}", **{"Accept-Encoding": "gzip, deflate"})
        assert status == 200 and headers.get("Content-Encoding") == "gzip", headers
        assert "Accept-Encoding" in headers.get("Vary", "")
        original = (BASE / path).read_bytes()
        assert gzip.decompress(body) == original
        assert len(body) < len(original) / 2
        status, plain, headers = get(f"{server}/{path}")
        assert plain == original and "Content-Encoding" not in headers
    status, body, headers = get(f"{server}/accounts/login/", **{"Accept-Encoding": "gzip"})
    assert status == 200 and headers.get("Content-Encoding") == "gzip"
    assert b"Log in" in gzip.decompress(body)


def test_make_run_prepares_the_database_then_serves(tmp_path):
    """`make run`: on an empty database, `prepare --demo` migrates and loads the demo, then
    gunicorn serves it and the demo's rater can log in."""
    env = environment(tmp_path, DEMO_PASSWORD="a-password-for-this-test", WEB_DEMO_REPORTS="0")
    assert "log in as rater1" in prepare(env, "--demo")
    with gunicorn(env, workers=1) as base:
        opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor())
        page = opener.open(f"{base}/accounts/login/", timeout=60).read().decode()
        token = page.split('name="csrfmiddlewaretoken" value="', 1)[1].split('"', 1)[0]
        form = urllib.parse.urlencode(
            {"username": "rater1", "password": "a-password-for-this-test", "csrfmiddlewaretoken": token}
        ).encode()
        landed = opener.open(
            urllib.request.Request(f"{base}/accounts/login/", data=form, headers={"Referer": f"{base}/"}), timeout=60
        )
        assert "/accounts/login/" not in landed.geturl()
        assert b"LitSumm" in landed.read()


def test_make_run_computes_the_demo_reports_that_the_first_visit_serves(tmp_path):
    """`make run`'s `prepare --demo` queues the demo's reports and starts `manage.py
    compute_reports` in a process of its own; once it is done, the admin's first visit to
    the LitSumm report gets the numbers and every plot at once, from that computation (the
    web workers compute nothing: the row and its time are the ones the process stored)."""
    import sqlite3

    env = environment(tmp_path, DEMO_PASSWORD="a-password-for-this-test")
    database = tmp_path / "db.sqlite3"

    def finished() -> dict[str, tuple]:
        with sqlite3.connect(database) as db:
            rows = db.execute(
                "SELECT s.slug, r.id, r.computed_at FROM analysis_analysisresult r JOIN annotate_study s"
                " ON s.id = r.study_id WHERE r.status = 'done' AND r.plots_done_at IS NOT NULL"
            ).fetchall()
        return {slug: (pk, at) for slug, pk, at in rows}

    assert "Computing the demo's reports in the background" in prepare(env, "--demo")
    with gunicorn(env, workers=1) as base:
        deadline = time.monotonic() + 900
        while len(finished()) < 4:  # the demo's LitSumm, FactPICO, pairwise and questions studies
            assert time.monotonic() < deadline, finished()
            time.sleep(1)
        before = finished()
        opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor())
        page = opener.open(f"{base}/accounts/login/", timeout=60).read().decode()
        token = page.split('name="csrfmiddlewaretoken" value="', 1)[1].split('"', 1)[0]
        form = urllib.parse.urlencode(
            {"username": "admin", "password": "a-password-for-this-test", "csrfmiddlewaretoken": token}
        ).encode()
        opener.open(urllib.request.Request(f"{base}/accounts/login/", data=form, headers={"Referer": f"{base}/"}))
        report = opener.open(f"{base}/analysis/demo-litsumm/", timeout=60).read().decode()
        assert 'id="report-progress"' not in report and "data-pending" not in report
        assert "Agreement" in report and report.count("<img src=") >= 10
        assert finished() == before
