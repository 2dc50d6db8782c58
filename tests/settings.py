"""Test settings: the real settings, plus a throwaway secret and a fast hasher.

DATABASE_URL still decides the database, so the same suite runs on SQLite (default)
and PostgreSQL (.ci/run).
"""

import os

os.environ.setdefault("SECRET_KEY", "tests-only-not-a-secret")

from config.settings import *  # noqa: E402,F403

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]

if "sqlite" in DATABASES["default"]["ENGINE"]:
    # A file, not the in-memory default: threads and the live server then use real,
    # separate connections that wait for each other's locks as in production.
    # One file per test process, so two suites running at once never share it.
    DATABASES["default"]["TEST"] = {"NAME": str(BASE_DIR / "var" / f"test-{os.getpid()}.sqlite3")}

# The suite does not depend on deployment variables in the developer's shell (README's
# configuration table): what they set is pinned here to the development values, and
# the tests of each rule set the values they need.
SECURE_SSL_REDIRECT = False
SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = False
SECURE_HSTS_SECONDS = 0
SECURE_PROXY_SSL_HEADER = None
TRUSTED_PROXY_COUNT = 0
LOGIN_FAILURE_LIMIT = 5
LOGIN_COOLOFF_MINUTES = 15
LOGIN_ADDRESS_FAILURE_LIMIT = 20
LOGIN_USERNAME_FAILURE_LIMIT = 10
LOGIN_USERNAME_WINDOW_HOURS = 24
LOGIN_USERNAME_MAX_DELAY_SECONDS = 60
API_TOKEN_TTL_HOURS = 720
# The schemathesis suite reads /api/schema/ anonymously when it is collected; the tests
# of the production rule (signed-in users only) turn this off.
API_SCHEMA_PUBLIC = True
# load_demo refuses the public default password with DEBUG off (as in tests): the tests
# log in to the demo accounts with this one, whatever DEMO_PASSWORD the shell has.
DEMO_PASSWORD = "rate-summaries-2026"
# Django's live server serves MEDIA_ROOT under MEDIA_URL before the app sees a request;
# unset, those are the working directory and "/", so every path that names a file of the
# checkout (/docs/batches.md, /Makefile) got the file instead of the page. The app has no
# media: a prefix nothing uses keeps every path for the app, as gunicorn serves it.
MEDIA_URL = "/test-live-server-media/"

# Pages rendered in process and by the live server name static files as they are in static/
# (the live server serves them through the finders): the hashed names of the production
# storage exist only after `collectstatic`, which the tests of the served shapes run
# (tests/config/test_production_start.py, test_server.py, the rehearsal).
STORAGES = {**STORAGES, "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"}}
