"""A separate process using the shared limits (tests/core/test_ratelimit.py starts several).

`python -m tests.core.ratelimit_child ncbi BASE_URL N RATE`: says "ready", waits for a line
on stdin (so that every child starts sending at once), then sends N esearch requests
through the real NCBI client at RATE requests a second.
`python -m tests.core.ratelimit_child hold NAME`: takes the one slot of the semaphore NAME,
says "held", and keeps it until killed.
The limits' settings (RATE_LIMIT_REDIS_URL, RATE_LIMIT_HOLD) come from the environment."""

import os
import sys
import threading

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")

import django  # noqa: E402

django.setup()

from core.ratelimit import semaphore  # noqa: E402
from literature.ncbi import EutilsClient  # noqa: E402


def main(mode: str, *args: str) -> None:
    if mode == "ncbi":
        base_url, n, rate = args[0], int(args[1]), float(args[2])
        with EutilsClient(base_url=base_url, requests_per_second=rate, max_retries=0) as client:
            print("ready", flush=True)
            sys.stdin.readline()
            for _ in range(n):
                client.esearch("asthma")
        print("done", flush=True)
    elif mode == "hold":
        slots = semaphore(args[0], 1)
        slots.acquire()
        print("held", flush=True)
        threading.Event().wait()
    else:
        raise SystemExit(f"unknown mode {mode!r}")


if __name__ == "__main__":
    main(*sys.argv[1:])
