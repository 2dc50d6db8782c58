"""The study admin's live quality monitor of a batch and the inbox of the raters'
questions (docs/monitoring.md)."""

from __future__ import annotations

from dataclasses import dataclass

from annotate.models import Batch, ItemFlag, Study
from annotate.selectors.monitor import Monitor, batch_monitor, study_flags

FLAG_STATUSES = ("all", "open", "answered")


@dataclass(frozen=True)
class MonitorPage:
    study: Study
    batch: Batch
    monitor: Monitor
    error: str  # a refused action or `fast` parameter, shown above the figures
    fast: float  # the share of the batch's median under which an item is too fast


def monitor_page(user, study: Study, batch: Batch, *, fast: float, error: str = "") -> MonitorPage:
    """The monitor of a batch of `study`, which the view got through
    annotate.selectors.access.get_study_for_admin: the figures as the database is now."""
    return MonitorPage(study, batch, batch_monitor(batch, fast_fraction=fast), error, fast)


@dataclass(frozen=True)
class FlagInboxPage:
    study: Study
    flags: list[ItemFlag]
    shown: str  # which flags: one of FLAG_STATUSES
    statuses: tuple[str, ...]
    error: str
    error_flag: ItemFlag | None  # the flag whose answer was refused


def flag_inbox_page(user, study: Study, *, shown: str, error: str = "", error_flag=None) -> FlagInboxPage:
    """The study's questions from raters, open ones first (`shown`: all, open or answered)."""
    return FlagInboxPage(study, list(study_flags(study, status=shown)), shown, FLAG_STATUSES, error, error_flag)
