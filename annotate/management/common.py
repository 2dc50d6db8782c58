"""What the management commands of every app share: finding the study a command names and
checking counts, each refused with one clear CommandError."""

from __future__ import annotations

from django.core.management.base import CommandError

from annotate.models import Study


def study_named(slug: str, hint: str = "") -> Study:
    """The study with this slug (its rubric fetched along), or CommandError("no study …")."""
    study = Study.objects.select_related("rubric").filter(slug=slug).first()
    if study is None:
        raise CommandError(f"no study {slug!r}{hint}")
    return study


def check_at_least_one(value: int | None, option: str) -> None:
    """A count option such as --limit, when given, must be at least 1."""
    if value is not None and value < 1:
        raise CommandError(f"{option} must be at least 1")
