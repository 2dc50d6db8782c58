"""Finding the study a management command names (every app's commands use it); the
checks of options that need no model are in core.commands."""

from __future__ import annotations

from django.core.management.base import CommandError

from annotate.models import Study


def study_named(slug: str, hint: str = "") -> Study:
    """The study with this slug (its rubric fetched along), or CommandError("no study …")."""
    study = Study.objects.select_related("rubric").filter(slug=slug).first()
    if study is None:
        raise CommandError(f"no study {slug!r}{hint}")
    return study
