import sys

from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError

from annotate.services.members import create_first_admin
from core.env import env_str
from core.exceptions import ApplicationError


class Command(BaseCommand):
    help = (
        "Create the first admin (a superuser) of an empty install: from ADMIN_USERNAME, ADMIN_PASSWORD and "
        "ADMIN_EMAIL when they are set, else by asking at the terminal (createsuperuser). Does nothing when a "
        "superuser exists. `DEMO=0 make run` runs it before serving."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--no-input", action="store_true", help="Never ask: without ADMIN_USERNAME/ADMIN_PASSWORD, only say how."
        )

    def handle(self, *args, no_input: bool = False, **options):
        if get_user_model().objects.filter(is_superuser=True).exists():
            self.stdout.write("An admin account exists already.")
            return
        username, password = env_str("ADMIN_USERNAME"), env_str("ADMIN_PASSWORD")
        if username or password:
            if not (username and password):
                raise CommandError("Set both ADMIN_USERNAME and ADMIN_PASSWORD (and optionally ADMIN_EMAIL).")
            try:
                user = create_first_admin(username=username, password=password, email=env_str("ADMIN_EMAIL"))
            except ApplicationError as exc:
                raise CommandError(exc.message) from None
            self.stdout.write(f"Created the admin account {user.get_username()!r} from ADMIN_USERNAME/ADMIN_PASSWORD.")
            return
        if no_input or not sys.stdin.isatty():
            self.stdout.write(
                "No admin account yet. Create one with `.venv/bin/python manage.py createsuperuser`, or set "
                "ADMIN_USERNAME, ADMIN_PASSWORD (and ADMIN_EMAIL) and start again."
            )
            return
        self.stdout.write("No admin account yet: create the first one (a superuser).")
        call_command("createsuperuser", interactive=True)
