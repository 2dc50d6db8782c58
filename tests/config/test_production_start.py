"""The production start exactly as the Procfile and docs/deployment.md give it: the release
step (`migrate`, `collectstatic`) on a fresh database and a fresh STATIC_ROOT, then the web
process with DEBUG off, each run by a shell from the Procfile's own line. The server serves
pages, and static files under their hashed names, gzipped, with whitenoise's long cache
headers; the access log holds no panel id."""

import gzip
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from tests.config.test_server import BASE, free_port, get

PANEL_ID = "5f3c9a0e1b2d4c6e8f0a1b2c"  # a made-up Prolific participant id


def procfile() -> dict[str, str]:
    lines = (BASE / "Procfile").read_text().splitlines()
    return dict(line.split(": ", 1) for line in lines if line and not line.startswith("#"))


def deployment_env(tmp_path: Path, port: int) -> dict[str, str]:
    """The environment docs/security.md's production example sets, on this machine; `python`,
    `gunicorn` and `celery` are the project's own (its virtualenv first on PATH)."""
    venv_bin = str(Path(sys.executable).parent)
    return {
        "PATH": f"{venv_bin}:{os.environ.get('PATH', '')}",
        "HOME": str(tmp_path),
        "DEBUG": "0",
        "SECRET_KEY": "a-production-secret-key-of-more-than-fifty-characters-0123456789",
        "ALLOWED_HOSTS": "127.0.0.1",
        "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
        "STATIC_ROOT": str(tmp_path / "static"),
        "LOCAL_SECRET_KEY_FILE": str(tmp_path / "secret_key"),
        "WEB_BIND": f"127.0.0.1:{port}",
        "WEB_CONCURRENCY": "1",
    }


@pytest.fixture(scope="module")
def documented_start(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("production-start")
    port = free_port()
    env = deployment_env(tmp_path, port)
    commands = procfile()
    release = subprocess.run(
        ["bash", "-c", commands["release"]], cwd=BASE, env=env, capture_output=True, text=True, timeout=900
    )
    assert release.returncode == 0, release.stdout[-3000:] + release.stderr[-3000:]
    log = (tmp_path / "web.log").open("w+b")
    web = subprocess.Popen(
        ["bash", "-c", f"exec {commands['web']}"],
        cwd=BASE,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        while True:
            try:
                get(f"{base}/healthz")
                break
            except OSError:
                if web.poll() is not None:
                    log.seek(0)
                    pytest.fail(f"the web process exited: {log.read().decode()[-3000:]}")
                time.sleep(0.5)
        yield base, tmp_path
    finally:
        if web.poll() is None:
            os.killpg(web.pid, signal.SIGTERM)
            web.wait(timeout=120)
        log.close()


def test_the_release_step_collects_hashed_and_compressed_static_files(documented_start):
    _, tmp_path = documented_start
    manifest = tmp_path / "static" / "staticfiles.json"
    assert manifest.exists()
    hashed = list((tmp_path / "static" / "css").glob("app.*.css"))
    assert hashed and all((path.parent / (path.name + ".gz")).exists() for path in hashed)


def test_the_web_process_serves_a_page_and_its_static_files(documented_start):
    base, tmp_path = documented_start
    status, body, headers = get(f"{base}/accounts/login/")
    assert status == 200 and b"Log in" in body
    assets = re.findall(rb'(?:href|src)="(/static/[^"]+\.(?:css|js))"', body)
    assert assets, body[:2000]
    for asset in assets:
        path = asset.decode()
        assert re.search(r"\.[0-9a-f]{12}\.(css|js)$", path), f"{path} is not a hashed name"
        status, packed, headers = get(base + path, **{"Accept-Encoding": "gzip"})
        assert status == 200 and headers.get("Content-Encoding") == "gzip", (path, headers)
        assert "max-age=315360000" in headers["Cache-Control"] and "immutable" in headers["Cache-Control"]
        stored = (tmp_path / "static" / path.removeprefix("/static/")).read_bytes()
        assert gzip.decompress(packed) == stored
        status, whole, headers = get(base + path)
        assert whole == stored and "Content-Encoding" not in headers


def test_the_access_log_holds_no_panel_id(documented_start):
    base, tmp_path = documented_start
    query = f"PROLIFIC_PID={PANEL_ID}&STUDY_ID=study{PANEL_ID}&SESSION_ID=session{PANEL_ID}"
    for path in (f"/r/not-a-token/?{query}", f"/accounts/login/?{query}"):
        request = urllib.request.Request(base + path, headers={"Referer": f"{base}/r/x/?{query}"})
        try:
            urllib.request.urlopen(request, timeout=60).read()
        except urllib.error.HTTPError as refused:
            assert refused.code < 500
    marker = f"/after-the-panel-{PANEL_ID[:4]}/"
    try:
        urllib.request.urlopen(base + marker, timeout=60)
    except urllib.error.HTTPError:
        pass
    logged = tmp_path / "web.log"
    while marker not in logged.read_text():  # gunicorn writes each access line after its answer
        time.sleep(0.2)
    text = logged.read_text()
    assert "/r/not-a-token/" in text and "/accounts/login/" in text
    assert PANEL_ID not in text
