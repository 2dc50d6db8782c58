"""core.collection.fewer_collections: the generation-0 threshold is raised while any
thread is inside, and the process's own thresholds come back when the last one leaves."""

import gc
import threading

from core.collection import THRESHOLD, fewer_collections


def test_the_threshold_is_raised_inside_and_restored_after_even_on_an_error():
    before = gc.get_threshold()
    try:
        with fewer_collections():
            assert gc.get_threshold() == (max(THRESHOLD, before[0]), *before[1:])
            raise KeyError("an import that failed")
    except KeyError:
        pass
    assert gc.get_threshold() == before


def test_overlapping_threads_restore_the_threshold_only_when_the_last_leaves():
    before = gc.get_threshold()
    first_in, second_in, first_may_leave, first_left = (threading.Event() for _ in range(4))
    seen = {}

    def first():
        with fewer_collections():
            first_in.set()
            first_may_leave.wait(60)
        first_left.set()

    def second():
        first_in.wait(60)
        with fewer_collections():
            second_in.set()
            first_left.wait(60)
            seen["after the first left"] = gc.get_threshold()
        seen["after both left"] = gc.get_threshold()

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for t in threads:
        t.start()
    second_in.wait(60)
    first_may_leave.set()
    for t in threads:
        t.join(60)
    assert seen["after the first left"][0] == max(THRESHOLD, before[0])
    assert seen["after both left"] == before == gc.get_threshold()
