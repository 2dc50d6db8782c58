"""Nothing a rater types is lost: a rationale typed before its score survives a reload, a
change made just before leaving the page is stored, a reload at once shows it and the next
edit saves (whichever save reaches the server first), and a second tab is still a conflict."""

import io
import json
import re
import threading
import time

import pytest
from playwright.sync_api import expect

from annotate.models import Assignment
from annotate.selectors.queue import latest_revision, revision_answers

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def stored_rationales(assignment):
    return revision_answers(latest_revision(assignment))[1]


def wait_until(condition, timeout):
    """Poll a database condition (the browser cannot wait on it) until it holds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def test_a_rationale_typed_before_the_score_survives_a_reload(page, factpico_item):
    assignment = factpico_item
    page.locator("#q-population-rationale").fill("Adults, typed before any score.")
    expect(page.locator("#save-status")).to_have_text(re.compile("^Draft saved"), timeout=15000)
    assert page.locator("#save-problem:not([hidden])").count() == 0
    page.reload()
    page.wait_for_load_state("load")
    assert page.locator("#q-population-rationale").input_value() == "Adults, typed before any score."
    assert stored_rationales(assignment) == {"population": "Adults, typed before any score."}


def test_a_change_then_leaving_within_100ms_is_stored(page, factpico_item):
    assignment = factpico_item
    page.locator("#q-population-rationale").fill("Typed just before leaving.")
    # Well inside the 1.2 s autosave delay: only the flush on leaving can store it.
    page.get_by_role("link", name=re.compile("My queue")).first.click()
    page.wait_for_url(re.compile(r".*/queue/?$|.*/$"))
    # The keepalive flush may land just after the next page: wait for it, generously.
    wait_until(lambda: stored_rationales(assignment).get("population"), timeout=15)
    assert stored_rationales(assignment) == {"population": "Typed just before leaving."}
    assignment.refresh_from_db()
    assert assignment.state == Assignment.State.IN_PROGRESS


def until(page, condition, timeout=15):
    """Poll `condition` while the browser keeps running (and Playwright keeps answering the
    routes it holds): sleeping in Python instead would block those."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "the condition did not hold in time"
        page.wait_for_timeout(50)


class Held:
    def __init__(self, body):
        self.body = body
        self.go = threading.Event()
        self.done = threading.Event()
        self.status = None


class HeldSaves:
    """The first `count` draft saves (PUT .../rating/) held on arrival at the live server,
    before the application sees them, and let in one at a time: the test decides the order
    in which the server stores them. (Playwright's routing does not see a keepalive request
    sent by a page being left, so they are held at the server.)"""

    def __init__(self, app, count):
        self.app = app
        self.count = count
        self.lock = threading.Lock()
        self.held = []

    def __call__(self, environ, start_response):
        if environ["REQUEST_METHOD"] != "PUT" or not environ["PATH_INFO"].endswith("/rating/"):
            return self.app(environ, start_response)
        body = environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
        environ["wsgi.input"] = io.BytesIO(body)
        with self.lock:
            slot = Held(json.loads(body)) if len(self.held) < self.count else None
            if slot:
                self.held.append(slot)
        if slot is None:
            return self.app(environ, start_response)
        slot.go.wait(timeout=120)

        def record(status, headers, exc_info=None):
            slot.status = int(status.split()[0])
            return start_response(status, headers, exc_info)

        result = self.app(environ, record)
        try:
            content = b"".join(result)
        finally:
            if hasattr(result, "close"):
                result.close()
            slot.done.set()
        return [content]

    def by_seq(self):
        """The held saves, oldest write first (the page numbers its writes)."""
        return sorted(self.held, key=lambda slot: slot.body["seq"])

    def send(self, slot):
        """Let a held save in; its HTTP status once the server has answered it."""
        slot.go.set()
        assert slot.done.wait(timeout=60)
        return slot.status

    def release_all(self):
        for slot in self.held:
            slot.go.set()


@pytest.fixture
def held_saves(server_gate):
    """Hold the next draft saves at the server: held_saves(count) -> HeldSaves."""
    made = []

    def hold(count):
        made.append(HeldSaves(server_gate.app, count))
        server_gate.app = made[-1]
        return made[-1]

    yield hold
    for holder in reversed(made):
        holder.release_all()
        server_gate.app = holder.app


TYPED = "Typed just before the reload."


@pytest.mark.parametrize("lands_first", ["the save sent on leaving", "the reloaded page's resend"])
def test_a_reload_just_after_typing_shows_the_new_text_and_the_next_edit_saves(
    page, factpico_item, held_saves, lands_first
):
    assignment = factpico_item
    held = held_saves(2)
    page.locator("#q-population-rationale").fill(TYPED)
    # Inside the autosave delay: only the save sent on leaving carries the text, and it is
    # held until the reloaded page has been served the stored (older) answers.
    page.reload()
    page.wait_for_load_state("load")
    assert page.locator("#q-population-rationale").input_value() == TYPED
    # The reloaded page sends the change again.
    until(page, lambda: len(held.held) == 2)
    on_leaving, resend = held.by_seq()
    if lands_first == "the save sent on leaving":
        assert held.send(on_leaving) == 200
        assert stored_rationales(assignment) == {"population": TYPED}
        assert held.send(resend) == 200
    else:
        assert held.send(resend) == 200
        # Older than the resend, the save sent on leaving is refused: it never overwrites.
        assert held.send(on_leaving) == 409
    expect(page.locator("#q-population-rationale")).to_have_value(TYPED)
    expect(page.locator("#save-status")).to_have_text(re.compile("^Draft saved"), timeout=15000)
    assert stored_rationales(assignment) == {"population": TYPED}

    page.locator("#q-population-rationale").fill(TYPED + " And edited after it.")
    until(page, lambda: stored_rationales(assignment).get("population") == TYPED + " And edited after it.")
    expect(page.locator("#save-status")).to_have_text(re.compile("^Draft saved"))
    assert page.locator("#save-problem:not([hidden])").count() == 0
    assert "elsewhere" not in page.content()


def test_an_edit_from_a_second_tab_is_still_a_conflict(page, factpico_item):
    assignment = factpico_item
    second = page.context.new_page()
    second.goto(f"/rate/{assignment.uuid}/")
    second.wait_for_load_state("load")
    second.locator("#q-population-rationale").fill("From the second tab.")
    expect(second.locator("#save-status")).to_have_text(re.compile("^Draft saved"), timeout=15000)

    page.locator("#q-population-rationale").fill("From the first tab.")
    expect(page.locator("#save-problem")).to_contain_text("changed elsewhere", timeout=15000)
    expect(page.locator("#save-status")).to_contain_text("changed elsewhere")
    assert stored_rationales(assignment) == {"population": "From the second tab."}
    # The first tab's text stays on its page to be copied.
    expect(page.locator("#q-population-rationale")).to_have_value("From the first tab.")


def test_a_second_tab_after_a_reload_with_an_unsent_change_is_a_conflict(page, factpico_item, held_saves):
    """The resend of a change sent on leaving never overwrites another tab's later save."""
    assignment = factpico_item
    held = held_saves(2)
    page.locator("#q-population-rationale").fill(TYPED)
    page.reload()
    page.wait_for_load_state("load")
    until(page, lambda: len(held.held) == 2)
    # Another tab saves before either of this tab's saves reaches the server.
    second = page.context.new_page()
    second.goto(f"/rate/{assignment.uuid}/")
    second.wait_for_load_state("load")
    second.locator("#q-population-rationale").fill("From the second tab.")
    expect(second.locator("#save-status")).to_have_text(re.compile("^Draft saved"), timeout=15000)
    on_leaving, resend = held.by_seq()
    assert held.send(on_leaving) == 409
    assert held.send(resend) == 409
    expect(page.locator("#save-problem")).to_contain_text("changed elsewhere")
    expect(page.locator("#q-population-rationale")).to_have_value(TYPED)
    assert stored_rationales(assignment) == {"population": "From the second tab."}
