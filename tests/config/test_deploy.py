"""`manage.py check --deploy` is clean with the production environment documented in
docs/security.md: the block is read from the document, so the
documentation and this test cannot drift apart."""

from __future__ import annotations

import os
import re
import secrets
import subprocess
import sys
from pathlib import Path

from django.conf import settings

DOC = Path(settings.BASE_DIR) / "docs" / "security.md"


def documented_environment() -> dict[str, str]:
    text = DOC.read_text(encoding="utf-8")
    block = re.search(r"<!-- production-environment -->\s*```sh\n(.*?)```", text, re.S)
    assert block, "docs/security.md lost its production environment block"
    pairs = [line.split("=", 1) for line in block.group(1).splitlines() if line and not line.startswith("#")]
    return {key.strip(): value.strip() for key, value in pairs}


def run_manage(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(Path(settings.BASE_DIR) / "manage.py"), *args],
        env=env,
        cwd=settings.BASE_DIR,
        capture_output=True,
        text=True,
        timeout=600,
    )


def production_env(tmp_path) -> dict[str, str]:
    env = documented_environment()
    assert env["DEBUG"] == "0" and env["SECURE_COOKIES"] == "1"
    # The placeholder is a placeholder; nothing is contacted by `check`, but the database
    # and broker stay local all the same.
    env["SECRET_KEY"] = secrets.token_urlsafe(64)
    env["DATABASE_URL"] = f"sqlite:///{tmp_path / 'deploy-check.sqlite3'}"
    env["CELERY_BROKER_URL"] = ""
    # Only what a fresh server has besides the documented block.
    base = {"PATH": os.environ.get("PATH", ""), "HOME": str(tmp_path), "DJANGO_SETTINGS_MODULE": "config.settings"}
    return base | env


def test_check_deploy_is_clean_with_the_documented_production_environment(tmp_path):
    done = run_manage(production_env(tmp_path), "check", "--deploy", "--fail-level", "WARNING")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "System check identified no issues (0 silenced)." in done.stdout


def test_check_deploy_warns_without_the_tls_settings(tmp_path):
    """The check can fail: without the TLS variables it names what is missing."""
    env = production_env(tmp_path)
    for key in ("SECURE_COOKIES", "SECURE_HSTS_SECONDS"):
        env.pop(key)
    done = run_manage(env, "check", "--deploy", "--fail-level", "WARNING")
    assert done.returncode != 0
    for warning in ("security.W004", "security.W008", "security.W012", "security.W016"):
        assert warning in done.stdout + done.stderr, warning
