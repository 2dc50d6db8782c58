"""`manage.py prepare`: what `make run` does to the database before it starts gunicorn, in
one process (one interpreter start instead of one per step)."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand
from django.db import DatabaseError

from core.env import env_str


class Command(BaseCommand):
    # Django's system checks import every view and URL pattern (about 0.6 s of the start);
    # they run in `manage.py check`, the release step's commands and the test suite, not
    # here, so `make run` serves a second sooner.
    requires_system_checks = []
    help = (
        "Prepare the database for serving: migrate, then the demo "
        "(--demo: its studies with seeded answers, and its reports computed in the background) or "
        "the first admin of an empty install; prints the next step for the site at --url."
    )

    def add_arguments(self, parser):
        parser.add_argument("--demo", action="store_true", help="load the demo studies with seeded answers")
        parser.add_argument("--url", default="http://127.0.0.1:8000/", help="where the site will be served")

    def handle(self, *args, demo: bool, url: str, **options):
        call_command("migrate", interactive=False, verbosity=0)
        if demo:
            call_command("load_demo", with_answers=True)
            call_command("load_question_demo", with_answers=True)
            if env_str("WEB_DEMO_REPORTS", "1") not in ("0", "no", "false"):
                from config.demo_reports import queue_demo_reports, start_demo_reports

                start_demo_reports(queue_demo_reports())
        else:
            call_command("create_first_admin")
        self.stdout.write(next_step(url))


def next_step(url: str) -> str:
    """One or two lines for the terminal: where the site is and what to do first."""
    try:
        return _next_step(url, get_user_model().objects)
    except DatabaseError:
        return f"Serving on {url}  (the database is not set up: run `make migrate`)"


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
