"""What the console log shows: our own lines, and the libraries' only when they warn.

Libraries log routine chatter at INFO or DEBUG that reads as noise on a command's
output: one `HTTP Request: POST …` line per LLM call (httpx), "Using default tokenizer."
(rouge-score, through absl), "Building index from tokens" (bm25s, which sets its own
logger to DEBUG when imported), django-axes' start-up banner. A filter on the console
handler drops those below WARNING; `-v 2` on a command shows them again
(`show_library_logs`). A filter, not logger levels, because a library may set its
logger's level itself when it is imported, after the settings configured it.
"""

from __future__ import annotations

import logging

LIBRARIES = ("httpx", "httpx2", "httpcore", "openai", "absl", "bm25s", "celery.app.trace")


class LibraryChatter(logging.Filter):
    """Drops the libraries' records below `threshold` (WARNING unless made verbose)."""

    threshold = logging.WARNING

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno >= LibraryChatter.threshold:
            return True
        name = record.name
        return not any(name == lib or name.startswith(f"{lib}.") for lib in LIBRARIES)


def show_library_logs(verbosity: int) -> None:
    """A command's `-v 2` (or more) shows the libraries' INFO and DEBUG lines too."""
    LibraryChatter.threshold = logging.DEBUG if verbosity >= 2 else logging.WARNING


class RefusalsWithoutTraceback(logging.Filter):
    """A refused request (Django's "Forbidden (Permission denied): /studies/new/", a 4xx
    logged by django.request) is one line: the refusal is the page's to explain, and its
    traceback says nothing about a fault. Errors (5xx) keep theirs."""

    def filter(self, record: logging.LogRecord) -> bool:
        status = getattr(record, "status_code", None)
        if record.name == "django.request" and isinstance(status, int) and 400 <= status < 500:
            record.exc_info = None
            record.exc_text = None
        return True
