# The browser tests' Chromium, live-server gate and page (tests/browser/conftest.py), for
# the rater's paths in other languages.
from tests.browser.conftest import browser, page, server_gate  # noqa: F401
