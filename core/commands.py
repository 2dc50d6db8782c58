"""What the management commands of every app share: options checked the same way, each
refused with one clear CommandError; counts with their nouns in the right number; progress
on long runs. (Finding the study a command names reads annotate's
models, so it lives there: annotate.management.common.study_named.)"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from contextlib import contextmanager

from django.core.management.base import CommandError

# The exit codes of the commands that call a model (docs/generation.md, "Exit codes"):
# 0 when every item has a usable result, 1 when any failed, 2 for a usage error.
FAILED_ITEMS, USAGE_ERROR = 1, 2


def usage_error(message: str) -> CommandError:
    """A usage error (an unknown study, a bad option, a missing setting): exit code 2,
    as argparse's own refusals."""
    return CommandError(message, returncode=USAGE_ERROR)


@contextmanager
def usage_errors():
    """A CommandError or ApplicationError raised in the block, before any item ran, is a
    usage error (exit code 2)."""
    from core.exceptions import ApplicationError

    try:
        yield
    except CommandError as exc:
        raise usage_error(str(exc)) from None
    except ApplicationError as exc:
        raise usage_error(exc.message) from None


def add_allow_failures(parser) -> None:
    parser.add_argument(
        "--allow-failures",
        action="store_true",
        help="exit 0 even when items failed (for batch runs that should go on); the count is still printed",
    )


def end_with_failures(
    stream, failed: int, noun: str, *, allow: bool, hint: str = "", plural: str | None = None
) -> None:
    """The end of an LLM command: nothing when no item failed; otherwise the count of
    failed items, as a CommandError (exit code 1) or, with --allow-failures, on `stream`."""
    if not failed:
        return
    message = f"{counted(failed, noun, plural)} failed{hint}"
    if allow:
        stream.write(f"{message} (--allow-failures: exit code 0)")
        return
    raise CommandError(message, returncode=FAILED_ITEMS)


def check_at_least_one(value: int | None, option: str) -> None:
    """A count option such as --limit, when given, must be at least 1."""
    if value is not None and value < 1:
        raise usage_error(f"{option} must be at least 1")


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """A count with its noun in the right number: "1 question", "2 questions", "3 summaries"
    (`plural` for a noun that is not made plural with -s, or consonant + y -> -ies)."""
    if n == 1:
        return f"{n} {noun}"
    if plural is None:
        plural = noun[:-1] + "ies" if noun.endswith("y") and noun[-2:-1] not in "aeiou" else noun + "s"
    return f"{n} {plural}"


class Progress:
    """Says how far a long run has got, on the command's stderr, at most every `interval`
    seconds ("12 of 40 summaries scored"); a run shorter than that says nothing."""

    def __init__(self, stream, noun: str, verb: str, *, total: int = 0, interval: float = 30.0):
        self.stream, self.total, self.noun, self.verb, self.interval = stream, total, noun, verb, interval
        self.last = time.monotonic()

    def __call__(self, done: int, total: int | None = None) -> None:
        total = self.total if total is None else total
        now = time.monotonic()
        if now - self.last >= self.interval and done < total:
            self.stream.write(f"{done} of {counted(total, self.noun)} {self.verb} …")
            self.last = now


@contextmanager
def reporting_progress(report: Callable[[], str | None], stream, *, interval: float = 30.0):
    """While the body runs, write `report()` to `stream` every `interval` seconds (for work
    that runs in other threads, such as a run's jobs without a broker)."""
    stop = threading.Event()

    def loop() -> None:
        from django.db import connection

        try:
            while not stop.wait(interval):
                line = report()
                if line:
                    stream.write(line)
        finally:
            connection.close()

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
