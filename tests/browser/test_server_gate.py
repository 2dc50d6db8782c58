"""The gate the browser tests put in front of the live server (tests/browser/conftest.py).

When a test ends, a request the page still had running must finish before the test's
database is emptied, and a request arriving later must not reach the database at all.
"""

import threading

from tests.browser.conftest import ServerGate


def _call(gate, environ=None):
    statuses = []
    result = gate(environ or {}, lambda status, headers: statuses.append(status))
    body = b"".join(result)
    getattr(result, "close", lambda: None)()
    return statuses[0], body


def test_the_gate_waits_for_a_request_in_flight_and_refuses_later_ones():
    entered, release = threading.Event(), threading.Event()
    reached_app = []

    def app(environ, start_response):
        reached_app.append(environ.get("n"))
        entered.set()
        release.wait(timeout=60)
        start_response("200 OK", [])
        return [b"saved"]

    gate = ServerGate(app)
    slow = threading.Thread(target=_call, args=(gate, {"n": 1}))
    slow.start()
    assert entered.wait(timeout=60)

    drained = threading.Event()
    closer = threading.Thread(target=lambda: (gate.close_and_drain(timeout_s=60), drained.set()))
    closer.start()
    # Still running: the drain has not finished, and a newcomer is turned away at the gate.
    status, body = _call(gate, {"n": 2})
    assert status.startswith("503")
    assert not drained.is_set()

    release.set()
    slow.join(timeout=60)
    closer.join(timeout=60)
    assert drained.is_set()
    assert reached_app == [1]

    gate.open()
    release.set()
    assert _call(gate, {"n": 3}) == ("200 OK", b"saved")


def test_a_drain_that_never_ends_says_so():
    blocked = threading.Event()

    def app(environ, start_response):
        blocked.wait(timeout=60)
        start_response("200 OK", [])
        return [b""]

    gate = ServerGate(app)
    worker = threading.Thread(target=_call, args=(gate,))
    worker.start()
    try:
        # The wait below only needs the request to be inside the application.
        with gate.cond:
            assert gate.cond.wait_for(lambda: gate.in_flight == 1, timeout=60)
        try:
            gate.close_and_drain(timeout_s=0.2)
        except AssertionError as error:
            assert "1 request(s) still running" in str(error)
        else:
            raise AssertionError("the drain returned with a request still running")
    finally:
        blocked.set()
        worker.join(timeout=60)
