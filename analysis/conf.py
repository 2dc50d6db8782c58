"""Settings of the study report, read from the environment when asked for, never at import
(through core.env, as generation.conf): a test, or a long-running worker, that changes the
environment sees the change on the next call."""

from __future__ import annotations

from datetime import timedelta

from core.env import env_float

DEFAULT_REPORT_LEASE_SECONDS = 600


def report_lease() -> timedelta:
    """ANALYSIS_REPORT_LEASE (seconds, default 600): how long a running report may show no
    sign of life before it counts as abandoned. The worker renews the lease as the
    bootstrap progresses and between the report's stages, so the lease must outlast the
    longest stage without progress: the text metrics (and embeddings) of the largest study."""
    return timedelta(seconds=env_float("ANALYSIS_REPORT_LEASE", DEFAULT_REPORT_LEASE_SECONDS, positive=True))
