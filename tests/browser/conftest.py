"""Real Chromium (Debian's /usr/bin/chromium) driven by Playwright against the
live test server. Playwright's own browser download is never used."""

import os
import shutil
import threading

import pytest

# Playwright's sync API runs an event loop in this thread; the ORM calls the tests
# make between browser steps are ordinary blocking calls, which is safe here.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

CHROMIUM_ARGS = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
]


def chromium_path() -> str:
    path = os.environ.get("CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
    if not os.path.exists(path):
        pytest.fail(f"Chromium not found at {path}: install Debian's chromium (make test does it as root)")
    return path


@pytest.fixture(scope="session")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS, headless=True)
        yield browser
        browser.close()


class ServerGate:
    """Wraps the live server's WSGI application between tests.

    A test's database is emptied (TRUNCATE on PostgreSQL) as soon as the test ends, while
    the server may still be answering the page: a draft saved on a timer, or sent with
    keepalive when the page closes. That request and the TRUNCATE then lock the same
    tables in opposite orders and PostgreSQL aborts one of them ("couldn't be flushed").
    So when a test ends the gate closes: requests already in the application finish,
    later ones get a 503 without touching the database, and the test's teardown waits
    until none is left in flight.
    """

    def __init__(self, app):
        self.app = app
        self.cond = threading.Condition()
        self.in_flight = 0
        self.is_open = True

    def __call__(self, environ, start_response):
        with self.cond:
            if not self.is_open:
                start_response("503 Service Unavailable", [("Content-Type", "text/plain")])
                return [b"The test that used this server is over.\n"]
            self.in_flight += 1
        try:
            result = self.app(environ, start_response)
        except BaseException:
            self._done()
            raise
        return _Finished(result, self._done)

    def _done(self):
        with self.cond:
            self.in_flight -= 1
            self.cond.notify_all()

    def open(self):
        with self.cond:
            self.is_open = True

    def close_and_drain(self, timeout_s):
        with self.cond:
            self.is_open = False
            if not self.cond.wait_for(lambda: self.in_flight == 0, timeout=timeout_s):
                raise AssertionError(f"{self.in_flight} request(s) still running {timeout_s} s after the test ended")


class _Finished:
    """The application's response, reporting back once the server has closed it."""

    def __init__(self, result, done):
        self.result = result
        self.done = done

    def __iter__(self):
        return iter(self.result)

    def close(self):
        try:
            close = getattr(self.result, "close", None)
            if close is not None:
                close()
        finally:
            self.done()


@pytest.fixture(scope="session")
def server_gate(live_server):
    httpd = live_server.thread.httpd
    gate = ServerGate(httpd.get_app())
    httpd.set_app(gate)
    return gate


@pytest.fixture
def page(browser, live_server, server_gate):
    server_gate.open()
    context = browser.new_context(base_url=live_server.url, viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    page.set_default_timeout(10_000)
    yield page
    try:
        context.close()
    finally:
        # Generous: a request on a loaded machine may take seconds to finish.
        server_gate.close_and_drain(timeout_s=120)


def log_in(page, username, password):
    page.goto("/accounts/login/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Log in").click()
    # Raters land on their queue, study admins on Studies.
    page.wait_for_url(lambda url: "/accounts/login/" not in url)


def open_item(page, assignment):
    page.goto(f"/rate/{assignment.uuid}/")
    page.wait_for_load_state("load")


@pytest.fixture
def factpico_item(page):
    """rater1's FactPICO item (tests.annotate.factpico), logged in and open in `page`."""
    from tests.annotate.factpico import make_factpico_assignment
    from tests.factories import PASSWORD, UserFactory

    rater = UserFactory(username="rater1")
    assignment, _ = make_factpico_assignment(rater)
    log_in(page, rater.username, PASSWORD)
    open_item(page, assignment)
    return assignment
