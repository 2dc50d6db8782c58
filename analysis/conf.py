"""Analysis settings, read from the environment when asked for, never at import.

As generation.conf: a test, or a long-running worker, that changes the environment sees
the change on the next call.
"""

from __future__ import annotations

import os
from datetime import timedelta

from django.core.exceptions import ImproperlyConfigured

DEFAULT_REPORT_LEASE_SECONDS = 600


def report_lease() -> timedelta:
    """ANALYSIS_REPORT_LEASE (seconds, default 600): how long a running report may show no
    sign of life before it counts as abandoned. The worker renews the lease as the
    bootstrap progresses and between the report's stages, so the lease must outlast the
    longest stage without progress: the text metrics (and embeddings) of the largest study."""
    raw = os.environ.get("ANALYSIS_REPORT_LEASE", "").strip()
    if not raw:
        return timedelta(seconds=DEFAULT_REPORT_LEASE_SECONDS)
    try:
        seconds = float(raw)
    except ValueError:
        raise ImproperlyConfigured(f"ANALYSIS_REPORT_LEASE must be a number of seconds, got {raw!r}") from None
    if seconds <= 0:
        raise ImproperlyConfigured(f"ANALYSIS_REPORT_LEASE must be positive, got {raw!r}")
    return timedelta(seconds=seconds)
