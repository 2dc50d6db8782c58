"""Finding the study a management command names (every app's commands use it); the
checks of options that need no model are in core.commands."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.core.management.base import CommandError

from annotate.models import Study


def study_named(slug: str, hint: str = "") -> Study:
    """The study with this slug (its rubric fetched along), or CommandError("no study …")."""
    study = Study.objects.select_related("rubric").filter(slug=slug).first()
    if study is None:
        raise CommandError(f"no study {slug!r}{hint}")
    return study


def users_named(text: str) -> tuple[list[str], dict]:
    """The usernames of a comma-separated option in its order, and username -> account;
    CommandError("no such user(s): …") naming every one that does not exist."""
    names = [n.strip() for n in text.split(",") if n.strip()]
    users = {u.username: u for u in get_user_model().objects.filter(username__in=names)}
    missing = [n for n in names if n not in users]
    if missing:
        raise CommandError(f"no such user(s): {', '.join(missing)}")
    return names, users
