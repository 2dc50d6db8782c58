"""Management commands work with no variables set; production still refuses without a key.

Each case is a fresh process with exactly the environment a person would have after
`make run` (no DEBUG, no SECRET_KEY), on a database and key file of its own.
"""

import os
import stat
import subprocess
import sys

import pytest
from django.conf import settings as django_settings

BASE = django_settings.BASE_DIR


def run(args, tmp_path, **env):
    clean = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": os.environ.get("HOME", "/tmp"),
        "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
        "LOCAL_SECRET_KEY_FILE": str(tmp_path / "var" / "secret_key"),
        **env,
    }
    return subprocess.run([sys.executable, *args], env=clean, cwd=BASE, capture_output=True, text=True, timeout=600)


def test_commands_work_without_debug_or_secret_key(tmp_path):
    migrated = run(["manage.py", "migrate", "--noinput"], tmp_path)
    assert migrated.returncode == 0, migrated.stderr
    key_file = tmp_path / "var" / "secret_key"
    assert key_file.exists()
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    key = key_file.read_text().strip()
    assert len(key) >= 50

    imported = run(["manage.py", "import_jsonl", str(BASE / "fixtures" / "import-example.jsonl")], tmp_path)
    assert imported.returncode == 0, imported.stderr
    assert "SECRET_KEY" not in imported.stderr
    # the same key is used by every later process of the machine
    assert key_file.read_text().strip() == key

    shown = run(
        ["-c", "import django; django.setup(); from django.conf import settings as s; print(s.SECRET_KEY)"],
        tmp_path,
        DJANGO_SETTINGS_MODULE="config.settings",
    )
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.strip().splitlines()[-1] == key


@pytest.mark.parametrize("env", [{"DJANGO_ENV": "production"}, {"SECURE_COOKIES": "1"}])
def test_production_refuses_to_start_without_a_key(tmp_path, env):
    done = run(["manage.py", "check"], tmp_path, **env)
    assert done.returncode != 0
    assert "SECRET_KEY must be set in production" in done.stderr
    assert not (tmp_path / "var" / "secret_key").exists()


@pytest.mark.parametrize("module", ["config.wsgi", "config.asgi"])
def test_a_served_site_without_debug_needs_its_own_key(tmp_path, module):
    refused = run(["-c", f"import {module}"], tmp_path)
    assert refused.returncode != 0
    assert "SECRET_KEY must be set to serve the site with DEBUG off" in refused.stderr
    assert run(["-c", f"import {module}"], tmp_path, DEBUG="1").returncode == 0
    assert run(["-c", f"import {module}"], tmp_path, SECRET_KEY="k" * 60).returncode == 0


def test_an_unknown_environment_name_is_refused(tmp_path):
    done = run(["manage.py", "check"], tmp_path, DJANGO_ENV="prod")
    assert done.returncode != 0 and "DJANGO_ENV must be development or production" in done.stderr
