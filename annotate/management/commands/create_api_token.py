"""Make an API token for an account from the command line (the token is printed once; only
its hash is stored). Replaces DRF's drf_create_token, whose clear-text tokens no longer
authenticate anyone."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from annotate.services import accounts
from core.exceptions import ApplicationError


class Command(BaseCommand):
    help = "Make an API token for USERNAME and print it (shown once; stored only as a hash)."

    def add_arguments(self, parser):
        parser.add_argument("username", type=str)
        parser.add_argument("--name", type=str, default="", help="What the token is for (shown on the account page).")

    def handle(self, *args, username: str, name: str, **options):
        user = get_user_model().objects.filter(username=username, is_active=True).first()
        if user is None:
            raise CommandError(f"no active account named {username!r}")
        try:
            made = accounts.create_token(user=user, name=name)
        except ApplicationError as exc:
            raise CommandError(exc.message) from None
        self.stdout.write(made.secret)
