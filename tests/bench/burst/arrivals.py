"""Arrival times of a crowd: a Poisson process conditioned on its count."""

from __future__ import annotations

import random


def arrival_times(n: int, window: float, rng: random.Random) -> list[float]:
    """n arrival times (seconds, increasing) of a Poisson process with n arrivals in
    [0, window]: n + 1 exponential gaps scaled so that they sum to the window. The times are
    then distributed as n sorted uniform times on the window, which is that process."""
    gaps = [rng.expovariate(1.0) for _ in range(n + 1)]
    total, t, out = sum(gaps), 0.0, []
    for gap in gaps[:n]:
        t += gap
        out.append(window * t / total)
    return out
