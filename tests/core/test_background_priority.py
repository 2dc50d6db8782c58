"""Without a broker, a report or an evaluator runs in a background thread of the web
process (core.background): that thread, and only that thread, runs at a lower CPU priority
(nice +10), so that the raters' requests in the same and the other web processes come first."""

import os
import threading

from core.background import BACKGROUND_NICENESS, _pool


def niceness() -> int:
    return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())


def test_the_background_thread_runs_at_a_lower_priority_than_the_request_threads():
    before = niceness()
    inside = _pool("priority-test").submit(niceness).result(timeout=60)
    assert inside == min(19, before + BACKGROUND_NICENESS)
    assert niceness() == before  # the calling (request) thread, and so the process, keep theirs
    assert os.getpriority(os.PRIO_PROCESS, os.getpid()) == before
