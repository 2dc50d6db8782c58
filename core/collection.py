"""Fewer garbage collections while a bulk job allocates.

An import builds tens of thousands of small containers (a 500-task file: 1,000 model
instances, 12,000 sentence spans, the decoded lines), and CPython runs a generation-0
collection every 700 new containers, each walking the young objects (and, every tenth,
generation 1 as well): about a tenth of the harness's import, collecting nothing, since what
an import drops is freed by its reference count. `fewer_collections()` raises the
generation-0 threshold for as long as any thread is inside it, and restores it when the
last one leaves (the threshold is the process's: threads of a worker share it). Collection
still happens, every THRESHOLD containers instead of every 700, so memory stays bounded
(the importers hold one chunk at a time).
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

THRESHOLD = 100_000

_lock = threading.Lock()
_inside = 0
_saved: tuple[int, ...] = ()


@contextmanager
def fewer_collections() -> Iterator[None]:
    global _inside, _saved
    with _lock:
        if _inside == 0:
            _saved = gc.get_threshold()
            gc.set_threshold(max(THRESHOLD, _saved[0]), *_saved[1:])
        _inside += 1
    try:
        yield
    finally:
        with _lock:
            _inside -= 1
            if _inside == 0:
                gc.set_threshold(*_saved)
