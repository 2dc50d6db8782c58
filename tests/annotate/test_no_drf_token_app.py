"""DRF's token app (rest_framework.authtoken) is not installed: its clear-text tokens
authenticate no one, so neither its command nor its table is offered (docs/security.md,
"API tokens"); `create_api_token` makes the tokens that work."""

import pytest
from django.apps import apps
from django.core.management import CommandError, call_command
from django.db import connection

pytestmark = pytest.mark.django_db


def test_drf_create_token_is_not_a_command():
    with pytest.raises(CommandError, match="Unknown command: 'drf_create_token'"):
        call_command("drf_create_token", "someone")


def test_the_database_has_no_drf_token_table_and_no_such_app_is_installed():
    assert "authtoken_token" not in connection.introspection.table_names()
    assert not apps.is_installed("rest_framework.authtoken")
