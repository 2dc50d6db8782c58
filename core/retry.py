"""Waiting between retries of an outside HTTP service, shared by the clients that retry
(generation.llm for the LLM endpoint, literature.ncbi for NCBI E-utilities)."""

from __future__ import annotations

import datetime
import email.utils
import random
import time

_jitter = random.SystemRandom()


def backoff_delay(attempt: int, base: float, cap: float, retry_after: float | None) -> float:
    """Seconds to wait before retry number `attempt` (1 = first retry).

    Retry-After wins when given (capped at `cap`); otherwise "equal jitter": half the
    exponential step fixed, half random, so waits grow and concurrent workers do not retry
    in lockstep."""
    if retry_after is not None:
        return min(retry_after, cap)
    step = min(cap, base * 2 ** (attempt - 1))
    return step / 2 + _jitter.uniform(0, step / 2)


def http_date_delay(raw: str) -> float | None:
    """Seconds until an HTTP date (a Retry-After form), or None when `raw` is not one."""
    try:
        parsed = email.utils.parsedate_to_datetime(raw)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if parsed.tzinfo is None:
        # RFC 9110 dates are always GMT; a date without a zone is not local time.
        parsed = parsed.replace(tzinfo=datetime.UTC)
    return max(0.0, parsed.timestamp() - time.time())
