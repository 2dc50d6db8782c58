"""What the management commands of every app share: options checked the same way, each
refused with one clear CommandError. (Finding the study a command names reads annotate's
models, so it lives there: annotate.management.common.study_named.)"""

from __future__ import annotations

from django.core.management.base import CommandError


def check_at_least_one(value: int | None, option: str) -> None:
    """A count option such as --limit, when given, must be at least 1."""
    if value is not None and value < 1:
        raise CommandError(f"{option} must be at least 1")
