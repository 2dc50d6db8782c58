"""What the terminal says when the site starts (config/gunicorn.conf.py): the next step
for the database it serves, so an empty install is not told to log in to demo accounts."""

from __future__ import annotations


def next_step(url: str) -> str:
    """One or two lines for the terminal: where the site is and what to do first."""
    from django.contrib.auth import get_user_model
    from django.db import DatabaseError

    try:
        return _next_step(url, get_user_model().objects)
    except DatabaseError:
        return f"Serving on {url}  (the database is not set up: run `make migrate`, or start with WEB_PREPARE=migrate)"


def _next_step(url: str, users) -> str:
    from annotate.models import Study
    from datasets.demo import DEMO_STUDY

    if Study.objects.filter(slug=DEMO_STUDY).exists() and users.filter(username="rater1").exists():
        return f"Serving on {url}  (log in as rater1, rater2 or admin)"
    if not users.filter(is_superuser=True).exists():
        return (
            f"Serving on {url}  (no admin account yet: run `.venv/bin/python manage.py createsuperuser`, "
            "or start again with ADMIN_USERNAME and ADMIN_PASSWORD set)"
        )
    if not Study.objects.exists():
        return f"Serving on {url}  (log in as your admin and create the first study at {url}studies/new/)"
    return f"Serving on {url}"
