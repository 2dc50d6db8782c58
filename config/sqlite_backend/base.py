"""Django's SQLite backend, with writers queued on a lock instead of on SQLite's busy handler.

SQLite admits one writer at a time. Django opens every transaction with BEGIN IMMEDIATE
(settings: `transaction_mode`), and a second writer then waits in SQLite's busy handler,
which sleeps 1, 2, 5, 10, 15, 20, 25, 25, 25, 50, 50 and then 100 ms between tries: with
8 raters submitting at once, a submit that takes 25 ms could wait 700-900 ms at the 95th
percentile (the side-by-side benchmark, docs/performance.md), though the lock was free
most of that time.

Here a transaction first takes a lock of its own: a threading lock shared by the process's
threads (a waiter wakes as soon as it is released), then an exclusive `flock` on a file
beside the database, shared by the processes (gunicorn's workers, Celery's), tried every
millisecond. Only then does it BEGIN, so SQLite's handler is hardly ever entered. The lock
is released when the transaction commits or rolls back, or the connection closes. A
writer that cannot get it within the database's `timeout` (20 s) gets SQLite's own
"database is locked". In-memory databases (the tests' default) have a single process and
skip the file lock.
"""

from __future__ import annotations

import fcntl
import os
import threading
import time

from django.db import OperationalError
from django.db.backends.sqlite3 import base

_PROCESS_LOCKS: dict[str, threading.Lock] = {}
_PROCESS_LOCKS_GUARD = threading.Lock()
POLL_S = 0.001


def _process_lock(path: str) -> threading.Lock:
    with _PROCESS_LOCKS_GUARD:
        return _PROCESS_LOCKS.setdefault(path, threading.Lock())


class DatabaseWrapper(base.DatabaseWrapper):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._write_lock_fd: int | None = None
        self._write_lock_held = False

    def _lock_path(self) -> str | None:
        if self.is_in_memory_db():
            return None
        return f"{self.settings_dict['NAME']}.writelock"

    def _acquire_write_lock(self) -> None:
        path = self._lock_path()
        if path is None or self._write_lock_held:
            return
        timeout = float(self.settings_dict.get("OPTIONS", {}).get("timeout", 5))
        deadline = time.monotonic() + timeout
        local = _process_lock(path)
        if not local.acquire(timeout=timeout):
            raise OperationalError("database is locked")
        try:
            if self._write_lock_fd is None:
                self._write_lock_fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
            while True:
                try:
                    fcntl.flock(self._write_lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() > deadline:
                        raise OperationalError("database is locked") from None
                    time.sleep(POLL_S)
        except BaseException:
            local.release()
            raise
        self._write_lock_held = True

    def _release_write_lock(self) -> None:
        if not self._write_lock_held:
            return
        self._write_lock_held = False
        try:
            fcntl.flock(self._write_lock_fd, fcntl.LOCK_UN)
        finally:
            _process_lock(self._lock_path()).release()

    def _start_transaction_under_autocommit(self):
        self._acquire_write_lock()
        try:
            super()._start_transaction_under_autocommit()
        except BaseException:
            self._release_write_lock()
            raise

    def _commit(self):
        try:
            return super()._commit()
        finally:
            self._release_write_lock()

    def _rollback(self):
        try:
            return super()._rollback()
        finally:
            self._release_write_lock()

    def _close(self):
        try:
            return super()._close()
        finally:
            self._release_write_lock()
            if self._write_lock_fd is not None:
                os.close(self._write_lock_fd)
                self._write_lock_fd = None
