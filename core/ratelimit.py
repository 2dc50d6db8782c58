"""Limits on what we send to outside services, shared by every process that sends it.

Two kinds, each either shared through Redis (every web process and Celery worker on every
machine counts against the same limit) or kept in this process (today's behaviour on one
machine, and what a fresh machine with nothing running gets):

- `pacer(name)`: request starts spaced at least 1/rate apart (NCBI's requests per second
  per key, Europe PMC's polite rate). Through Redis it is a reservation of the next free
  start time, taken by a Lua script on Redis's own clock (`TIME`), so the machines' clocks
  never need to agree: each caller gets "start in d seconds" and sleeps that long.
  Sleeping only ever makes a request later, so starts are never closer than the interval.
  `HEADROOM`: we aim at 90 % of the limit, because the service counts arrivals, and the
  network between us and it shifts arrivals by a few tens of milliseconds either way;
  exactly at the limit, one late request followed by a prompt one would put rate + 1
  arrivals into some 1-second window about half the time.
- `semaphore(name, size)`: at most `size` holders at once (the LLM concurrency per
  endpoint). Through Redis it is a sorted set of holders, each with an expiry time on
  Redis's clock; a holder renews its own expiry every third of RATE_LIMIT_HOLD while it
  holds the slot, so a holder whose process dies (kill -9, OOM, its machine gone) frees
  its slot within RATE_LIMIT_HOLD seconds, and a long LLM call is never cut off. Waiters
  poll (20 ms growing to 250 ms) rather than block on a list: a dead holder never pushes
  a wake-up, and polling sees its expiry without a second mechanism.

Settings (read when a limit is first asked for in a process, never at import):
- RATE_LIMIT_REDIS_URL: the Redis holding the limits. Unset: CELERY_BROKER_URL when that
  is a Redis URL (redis:// or rediss://), else none (per process: a RabbitMQ broker gives
  no Redis to share them through; set this to a Redis to share them). `off`: per process
  even with a Redis broker.
- RATE_LIMIT_HOLD (s, default 30): how long a dead holder keeps its slot.
- RATE_LIMIT_REDIS_CONNECT_TIMEOUT (s, default 1) and RATE_LIMIT_REDIS_TIMEOUT (s, default
  5): how long a connection to that Redis, and one answer of it, may take before the
  process falls back to its own limit (below).

When Redis cannot be reached, each limit falls back to this process's own, and says so
in a warning (at most once a minute per limit): an outage of Redis should not stop
literature searches and LLM calls, and the per-process limit keeps each process polite
(N processes may then send N times the rate until Redis is back). We chose that over
failing because the services' answer to too many requests (429 with Retry-After) is
already retried with backoff (core.retry), whereas failing would fail every run at once.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
import uuid
from typing import Protocol

import redis

from core.env import env_float, env_str

logger = logging.getLogger(__name__)

HEADROOM = 0.9
OFF = frozenset({"off", "none", "0", "false", "no"})
WARN_EVERY = 60.0  # seconds between two warnings about the same limit's Redis

# Redis keeps the limits under this prefix (in the Redis URL's database).
PREFIX = "ratings:limit:"

# The next free start (microseconds on Redis's clock) is kept under KEYS[1]; the caller
# is told how long to wait for the one it just reserved. Lua numbers are doubles: epoch
# microseconds (~1.8e15) are exact below 2^53, and %.0f writes them without an exponent.
_RESERVE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local interval = tonumber(ARGV[1])
local start = now
local last = tonumber(redis.call('GET', KEYS[1]))
if last and last + interval > now then start = last + interval end
local keep = math.floor((start - now + interval) / 1000) + 1000
redis.call('SET', KEYS[1], string.format('%.0f', start), 'PX', keep)
return start - now
"""

# Holders are members of a sorted set scored by their expiry (ms on Redis's clock).
_ACQUIRE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZCARD', KEYS[1]) < tonumber(ARGV[1]) then
  redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[3])
  redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[2]) * 2)
  return 1
end
return 0
"""

_RENEW = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if not redis.call('ZSCORE', KEYS[1], ARGV[2]) then return 0 end
redis.call('ZADD', KEYS[1], 'XX', now + tonumber(ARGV[1]), ARGV[2])
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[1]) * 2)
return 1
"""


def redis_url() -> str:
    """The Redis that shares the limits, or "" for limits per process (module docstring)."""
    url = env_str("RATE_LIMIT_REDIS_URL")
    if url.lower() in OFF:
        return ""
    if url:
        return url
    broker = env_str("CELERY_BROKER_URL")
    return broker if broker.startswith(("redis://", "rediss://")) else ""


def hold_seconds() -> float:
    return env_float("RATE_LIMIT_HOLD", 30.0, positive=True)


def key_name(*parts: str) -> str:
    """A Redis key for a limit named by `parts` (an endpoint, an API key): hashed, so that
    no key or URL with credentials is ever written to Redis."""
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:24]


class Pacer(Protocol):
    def wait(self, interval: float) -> None: ...


class LocalPacer:
    """Spaces request starts at least `interval` seconds apart, across this process's threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last = float("-inf")

    def wait(self, interval: float) -> None:
        with self._lock:
            now = time.monotonic()
            start = max(now, self._last + interval)
            self._last = start
        if start > now:
            time.sleep(start - now)


class _Fallback:
    """Warns, at most once a minute per limit, that Redis failed and the process's own
    limit is used instead."""

    def __init__(self, what: str, url: str) -> None:
        self.what, self.url = what, url
        self._warned = float("-inf")

    def warn(self, exc: Exception) -> None:
        now = time.monotonic()
        if now - self._warned >= WARN_EVERY:
            self._warned = now
            logger.warning(
                "Shared limit %s: Redis at %s failed (%s: %s); this process keeps its own limit until it answers",
                self.what,
                _public(self.url),
                type(exc).__name__,
                exc,
            )


class RedisPacer:
    """LocalPacer's spacing for every process using the same Redis key."""

    def __init__(self, client: redis.Redis, name: str, url: str) -> None:
        self.key = PREFIX + "pace:" + name
        self._reserve = client.register_script(_RESERVE)
        self._local = LocalPacer()
        self._fallback = _Fallback(f"pace:{name}", url)

    def wait(self, interval: float) -> None:
        try:
            delay = int(self._reserve(keys=[self.key], args=[max(1, round(interval * 1_000_000))])) / 1_000_000
        except redis.RedisError as exc:
            self._fallback.warn(exc)
            self._local.wait(interval)
            return
        if delay > 0:
            time.sleep(delay)


class RedisSemaphore:
    """At most `size` holders across every process using the same Redis key; a context
    manager like threading.BoundedSemaphore (each thread's holdings kept apart)."""

    def __init__(self, client: redis.Redis, name: str, size: int, url: str, hold: float) -> None:
        self.key = PREFIX + "slots:" + name
        self.size = size
        self.hold_ms = max(1, round(hold * 1000))
        self._acquire = client.register_script(_ACQUIRE)
        self._renew = client.register_script(_RENEW)
        self._redis = client
        self._local = threading.BoundedSemaphore(size)
        self._fallback = _Fallback(f"slots:{name}", url)
        self._held = threading.local()

    def __enter__(self) -> RedisSemaphore:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    def acquire(self, blocking: bool = True, timeout: float | None = None) -> bool:
        """Take a slot, waiting for one (up to `timeout` seconds) unless not `blocking`;
        whether one was taken, as threading.Semaphore.acquire answers."""
        token = uuid.uuid4().hex
        deadline = None if timeout is None else time.monotonic() + timeout
        poll = 0.02
        while True:
            try:
                got = self._acquire(keys=[self.key], args=[self.size, self.hold_ms, token])
            except redis.RedisError as exc:
                self._fallback.warn(exc)
                if not self._local.acquire(blocking, timeout if blocking else None):
                    return False
                self._stack().append(None)
                return True
            if got:
                stop = threading.Event()
                threading.Thread(target=self._keep, args=(token, stop), daemon=True, name="slot-renewal").start()
                self._stack().append((token, stop))
                return True
            if not blocking or (deadline is not None and time.monotonic() >= deadline):
                return False
            time.sleep(poll if deadline is None else max(0.0, min(poll, deadline - time.monotonic())))
            poll = min(poll * 1.5, 0.25)

    def release(self) -> None:
        held = self._stack().pop()
        if held is None:
            self._local.release()
            return
        token, stop = held
        stop.set()
        try:
            self._redis.zrem(self.key, token)
        except redis.RedisError as exc:
            # The slot expires on its own within RATE_LIMIT_HOLD.
            self._fallback.warn(exc)

    def holders(self) -> int:
        """How many hold a slot now (expired holders not counted)."""
        now_s, now_us = self._redis.time()
        return int(self._redis.zcount(self.key, now_s * 1000 + now_us // 1000 + 1, "+inf"))

    def _keep(self, token: str, stop: threading.Event) -> None:
        while not stop.wait(self.hold_ms / 3000):
            try:
                if not self._renew(keys=[self.key], args=[self.hold_ms, token]):
                    logger.warning("Shared limit %s: a slot expired while held (paused process?)", self.key)
                    return
            except redis.RedisError as exc:
                self._fallback.warn(exc)

    def _stack(self) -> list:
        if not hasattr(self._held, "stack"):
            self._held.stack = []
        return self._held.stack


_lock = threading.Lock()
_clients: dict[str, redis.Redis] = {}
_pacers: dict[tuple[str, str], Pacer] = {}
_semaphores: dict[tuple[str, str, int], RedisSemaphore | threading.BoundedSemaphore] = {}


def _client(url: str) -> redis.Redis:
    # Short timeouts: a Redis that does not answer must not hold a request for long
    # before the process falls back to its own limit. redis-py's pool notices a fork
    # (gunicorn's and Celery's workers) and opens new connections in the child.
    if url not in _clients:
        _clients[url] = redis.Redis.from_url(
            url,
            socket_connect_timeout=env_float("RATE_LIMIT_REDIS_CONNECT_TIMEOUT", 1.0, positive=True),
            socket_timeout=env_float("RATE_LIMIT_REDIS_TIMEOUT", 5.0, positive=True),
        )
    return _clients[url]


def pacer(name: str) -> Pacer:
    """The pacer of the limit `name` (see key_name), shared through Redis when one is set."""
    url = redis_url()
    with _lock:
        if (url, name) not in _pacers:
            _pacers[(url, name)] = RedisPacer(_client(url), name, url) if url else LocalPacer()
        return _pacers[(url, name)]


def semaphore(name: str, size: int) -> RedisSemaphore | threading.BoundedSemaphore:
    """The `size` slots of the limit `name`, shared through Redis when one is set."""
    url = redis_url()
    with _lock:
        if (url, name, size) not in _semaphores:
            shared = url and RedisSemaphore(_client(url), name, size, url, hold_seconds())
            _semaphores[(url, name, size)] = shared or threading.BoundedSemaphore(size)
        return _semaphores[(url, name, size)]


def _public(url: str) -> str:
    """A Redis URL without its password."""
    scheme, _, rest = url.partition("://")
    return f"{scheme}://{rest.rpartition('@')[2]}"
