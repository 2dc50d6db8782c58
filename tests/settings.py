"""Test settings: the real settings, plus a throwaway secret and a fast hasher.

DATABASE_URL still decides the database, so the same suite runs on SQLite (default)
and PostgreSQL (.ci/run).
"""

import os

os.environ.setdefault("SECRET_KEY", "tests-only-not-a-secret")

from config.settings import *  # noqa: E402,F403

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]

if DATABASES["default"]["ENGINE"].endswith("sqlite3"):
    # A file, not the in-memory default: threads and the live server then use real,
    # separate connections that wait for each other's locks as in production.
    # One file per test process, so two suites running at once never share it.
    DATABASES["default"]["TEST"] = {"NAME": str(BASE_DIR / "var" / f"test-{os.getpid()}.sqlite3")}
