"""Waiting between retries of an outside HTTP service, shared by the clients that retry
(generation.llm for the LLM endpoint; literature.ncbi and literature.europepmc, which also
share the whole polite loop, `send_politely`)."""

from __future__ import annotations

import datetime
import email.utils
import logging
import random
import re
import time
from collections.abc import Callable

import httpx2

logger = logging.getLogger(__name__)

_jitter = random.SystemRandom()

# Failures of the connection itself that a later attempt may not meet.
TRANSIENT_ERRORS = (httpx2.TimeoutException, httpx2.NetworkError, httpx2.RemoteProtocolError)


class RetriesExhausted(Exception):
    """Every attempt failed with a retryable failure; the caller raises its own error."""

    def __init__(self, attempts: int, failure: str):
        super().__init__(f"failed after {attempts} attempts; last: {failure}")
        self.attempts, self.failure = attempts, failure


def send_politely(
    send: Callable[[], httpx2.Response],
    *,
    pace: Callable[[], None],
    max_retries: int,
    backoff_base: float,
    backoff_max: float,
    label: str,
) -> tuple[httpx2.Response, int]:
    """Send a request (`send()`) until it gets an answer not worth retrying, and return
    that answer with the number of attempts; the caller judges its status.

    `pace()` runs before every attempt (the service's rate limit, core.ratelimit), retries
    included: a retry is a request like any other to the service that counts them.
    Retried: 429, 5xx, timeouts and dropped connections, after `backoff_delay` (the
    server's Retry-After, in seconds or as an HTTP date, wins, capped at `backoff_max`).
    After `max_retries` + 1 attempts, RetriesExhausted. Each retry is logged as a warning
    with `label`, which must hold no secret."""
    attempts = 0
    while True:
        attempts += 1
        pace()
        retry_after = None
        try:
            response = send()
        except TRANSIENT_ERRORS as exc:
            failure = type(exc).__name__
        else:
            if response.status_code != 429 and response.status_code < 500:
                return response, attempts
            failure = f"HTTP {response.status_code}"
            retry_after = retry_after_seconds(response.headers.get("retry-after", ""))
        if attempts > max_retries:
            raise RetriesExhausted(attempts, failure)
        delay = backoff_delay(attempts, backoff_base, backoff_max, retry_after)
        logger.warning("%s: %s; retry %d in %.2f s", label, failure, attempts, delay)
        time.sleep(delay)


def retry_after_seconds(raw: str) -> float | None:
    """Seconds from a Retry-After header (delta-seconds or HTTP date); None if unreadable."""
    if re.fullmatch(r"\d+(\.\d+)?", raw.strip()):
        return float(raw)
    return http_date_delay(raw.strip())


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
