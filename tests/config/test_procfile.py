"""The Procfile (docs/deployment.md) names commands that exist and load this project:
the web command is the one `make serve` runs, and the worker's Celery app loads."""

import os
import shlex
import subprocess
import sys
from pathlib import Path

from django.conf import settings

BASE = Path(settings.BASE_DIR)


def processes() -> dict[str, str]:
    lines = (BASE / "Procfile").read_text().splitlines()
    return dict(line.split(": ", 1) for line in lines if line and not line.startswith("#"))


def test_the_procfile_names_release_web_worker_and_beat():
    assert set(processes()) == {"release", "web", "worker", "beat"}
    assert shlex.split(processes()["beat"])[:4] == ["celery", "-A", "config", "beat"]


def test_the_web_process_is_what_make_serve_runs():
    web = shlex.split(processes()["web"])
    makefile = (BASE / "Makefile").read_text()
    assert "$(BIN)/" + " ".join(web) in makefile
    assert (BASE / web[web.index("-c") + 1]).is_file()


def test_the_worker_loads_the_celery_app(tmp_path):
    worker = shlex.split(processes()["worker"])
    assert worker[:3] == ["celery", "-A", "config"]
    celery = Path(sys.executable).with_name("celery")
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": os.environ.get("HOME", "/tmp"),
        "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
        "LOCAL_SECRET_KEY_FILE": str(tmp_path / "secret_key"),
        "CELERY_BROKER_URL": "redis://127.0.0.1:1/0",  # never contacted: `report` only prints
    }
    done = subprocess.run(
        [str(celery), "-A", "config", "report"], cwd=BASE, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert "software ->" in done.stdout


def test_the_release_step_migrates_and_collects_static_files():
    release = processes()["release"]
    assert "manage.py migrate --noinput" in release
    assert "manage.py collectstatic --noinput" in release
