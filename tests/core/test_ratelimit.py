"""The limits shared by every process (core.ratelimit), against the real Redis at
127.0.0.1:6379, database 13 (TEST_RATELIMIT_REDIS_URL points elsewhere), with separate
processes: NCBI's rate across several processes counted at the scripted E-utilities
server, the semaphore freed when its holder is killed with SIGKILL, and what happens when
Redis cannot be reached (each process keeps its own limit, with a warning).

Arrival counts: "at most R requests in any 1-second window" is checked over every window
that starts at an arrival (the window holding the most arrivals can always be slid to
start at one), half-open [t, t + 1 s) as a service counting per second sees it."""

import logging
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
import redis

from core import ratelimit
from literature.ncbi import EutilsClient
from tests.literature.ncbi_server import NcbiServer, Reply, esearch_xml

REDIS_URL = os.environ.get("TEST_RATELIMIT_REDIS_URL") or "redis://127.0.0.1:6379/13"
ROOT = Path(__file__).resolve().parents[2]
# Nothing listens here (the first port of this test's range is never bound by the suite).
DEAD_REDIS = "redis://:secret@127.0.0.1:18599/13"


def max_in_any_second(times: list[float]) -> int:
    times = sorted(times)
    return max((sum(1 for t in times if start <= t < start + 1.0) for start in times), default=0)


def test_max_in_any_second_counts_a_half_open_window():
    # Worked by hand: [0, 1) holds 0, 0.5, 0.99 (3); [0.5, 1.5) holds 0.5, 0.99, 1.0, 1.2 (4);
    # later windows hold fewer. Arrivals exactly 1 s apart never share a window.
    assert max_in_any_second([0.0, 0.5, 0.99, 1.0, 1.2]) == 4
    assert max_in_any_second([0.0, 1.0, 2.0]) == 1


@pytest.fixture
def shared_redis():
    client = redis.Redis.from_url(REDIS_URL)
    try:
        client.ping()
    except redis.ConnectionError:
        pytest.fail(f"the shared-limit tests need Redis at {REDIS_URL}")
    yield client
    for key in client.scan_iter(ratelimit.PREFIX + "*"):
        client.delete(key)


def child(mode: str, *args: str, redis_url: str, **env: str) -> subprocess.Popen:
    environment = {
        **os.environ,
        "RATE_LIMIT_REDIS_URL": redis_url,
        "DJANGO_SETTINGS_MODULE": "tests.settings",
        **env,
    }
    environment.pop("CELERY_BROKER_URL", None)
    return subprocess.Popen(
        [sys.executable, "-m", "tests.core.ratelimit_child", mode, *args],
        cwd=ROOT,
        env=environment,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )


def wait_for_line(process: subprocess.Popen, expected: str) -> None:
    line = process.stdout.readline().strip()
    assert line == expected, f"the child said {line!r}, not {expected!r} (exit code {process.poll()})"


def send_from_processes(server: NcbiServer, *, redis_url: str, processes: int, each: int, rate: float) -> None:
    children = [child("ncbi", server.base_url, str(each), str(rate), redis_url=redis_url) for _ in range(processes)]
    try:
        for c in children:
            wait_for_line(c, "ready")
        for c in children:  # all start sending together
            c.stdin.write("go\n")
            c.stdin.flush()
        for c in children:
            wait_for_line(c, "done")
            assert c.wait(timeout=120) == 0
    finally:
        for c in children:
            if c.poll() is None:
                c.kill()
                c.wait()


def test_processes_sharing_redis_never_exceed_the_rate_together(shared_redis):
    """Three processes, 8 requests each, 5 a second allowed: through Redis, never more
    than 5 arrivals in any second; the same processes each with its own limit (the
    control) send about three times as many, so the count can fail."""
    with NcbiServer(replies={"esearch.fcgi": [Reply(esearch_xml(["1"]))]}) as server:
        send_from_processes(server, redis_url=REDIS_URL, processes=3, each=8, rate=5.0)
        shared = [r.received_at for r in server.requests]
    assert len(shared) == 24
    assert max_in_any_second(shared) <= 5
    # 24 requests at one per 1/(5 × 0.9) s take at least 23 × 0.222 s.
    assert max(shared) - min(shared) >= 23 / (5 * ratelimit.HEADROOM) - 0.05

    with NcbiServer(replies={"esearch.fcgi": [Reply(esearch_xml(["1"]))]}) as server:
        send_from_processes(server, redis_url="off", processes=3, each=8, rate=5.0)
        apart = [r.received_at for r in server.requests]
    assert len(apart) == 24
    assert max_in_any_second(apart) > 5


def test_a_killed_holder_frees_its_slot_after_the_hold_and_a_live_one_keeps_it(shared_redis, monkeypatch):
    """RATE_LIMIT_HOLD = 4 s: a live holder renews its slot every third of it, so it still
    holds it after its first expiry has passed (with over two seconds to spare for a
    process the loaded machine did not schedule); after SIGKILL nobody renews it and it
    is free within the hold (plus the waiter's polling)."""
    monkeypatch.setenv("RATE_LIMIT_REDIS_URL", REDIS_URL)
    monkeypatch.setenv("RATE_LIMIT_HOLD", "4")
    name = f"test-{uuid.uuid4().hex[:8]}"
    holder = child("hold", name, redis_url=REDIS_URL, RATE_LIMIT_HOLD="4")
    try:
        wait_for_line(holder, "held")
        slots = ratelimit.semaphore(name, 1)
        assert isinstance(slots, ratelimit.RedisSemaphore)
        first_expiry = shared_redis.zrange(slots.key, 0, -1, withscores=True)[0][1]

        def redis_ms() -> float:
            seconds, micros = shared_redis.time()
            return seconds * 1000 + micros / 1000

        deadline = time.monotonic() + 60
        while redis_ms() <= first_expiry + 200:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert slots.holders() == 1
        assert not slots.acquire(blocking=False)

        holder.send_signal(signal.SIGKILL)
        holder.wait()
        killed = time.monotonic()
        assert slots.acquire(timeout=60)
        freed_after = time.monotonic() - killed
        slots.release()
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()
    assert freed_after <= 60
    assert slots.holders() == 0


def test_slots_are_shared_by_the_threads_and_released(shared_redis, monkeypatch):
    monkeypatch.setenv("RATE_LIMIT_REDIS_URL", REDIS_URL)
    slots = ratelimit.semaphore(f"test-{uuid.uuid4().hex[:8]}", 2)
    with slots:
        with slots:
            assert slots.holders() == 2
            assert not slots.acquire(blocking=False)
        assert slots.holders() == 1
    assert slots.holders() == 0


def test_with_redis_down_each_process_keeps_its_own_limit_and_says_so(monkeypatch, caplog):
    monkeypatch.setenv("RATE_LIMIT_REDIS_URL", DEAD_REDIS)
    caplog.set_level(logging.WARNING, logger="core.ratelimit")
    with (
        NcbiServer(replies={"esearch.fcgi": [Reply(esearch_xml(["1"]))]}) as server,
        EutilsClient(base_url=server.base_url, requests_per_second=5.0, max_retries=0) as client,
    ):
        for _ in range(3):
            assert client.esearch("asthma").ids == ("1",)
    assert min(server.gaps()) >= 1 / 5
    slots = ratelimit.semaphore(f"test-{uuid.uuid4().hex[:8]}", 1)
    with slots:
        assert not slots.acquire(blocking=False)
    warnings = [r.getMessage() for r in caplog.records]
    assert any("Redis at redis://127.0.0.1:18599/13 failed" in w and "keeps its own limit" in w for w in warnings)
    assert not any("secret" in w for w in warnings)
    # Once a minute per limit, not once per request.
    assert sum("pace:" in w for w in warnings) == 1


@pytest.mark.parametrize(
    ("limit_url", "broker", "expected"),
    [
        ("", "", ""),
        ("", "redis://10.0.0.5:6379/0", "redis://10.0.0.5:6379/0"),
        ("", "rediss://cache.example:6380/1", "rediss://cache.example:6380/1"),
        ("", "amqp://guest:guest@10.0.0.6:5672//", ""),
        ("redis://10.0.0.7:6379/3", "amqp://guest:guest@10.0.0.6:5672//", "redis://10.0.0.7:6379/3"),
        ("off", "redis://10.0.0.5:6379/0", ""),
    ],
)
def test_the_redis_of_the_limits_is_the_setting_else_a_redis_broker(monkeypatch, limit_url, broker, expected):
    monkeypatch.setenv("RATE_LIMIT_REDIS_URL", limit_url)
    monkeypatch.setenv("CELERY_BROKER_URL", broker)
    assert ratelimit.redis_url() == expected
