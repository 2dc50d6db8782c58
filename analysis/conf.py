"""Settings of the study report, read from the environment when asked for, never at import
(through core.env, as generation.conf): a test, or a long-running worker, that changes the
environment sees the change on the next call."""

from __future__ import annotations

from datetime import timedelta

from core.background import run_lease
from core.env import env_float


def report_lease() -> timedelta:
    """ANALYSIS_REPORT_LEASE (seconds; unset: RUN_LEASE, 30 by default): how long a running
    report may show no sign of life before it counts as abandoned ("stopped: the worker
    died"). The worker renews it from a heartbeat thread every third of it, whatever stage
    the report is in, so a short lease is safe: a killed worker shows within seconds."""
    default = run_lease().total_seconds()
    return timedelta(seconds=env_float("ANALYSIS_REPORT_LEASE", default, positive=True))
