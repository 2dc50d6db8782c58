"""Tokens made before they were stored hashed keep working after the
upgrade, their clear keys are gone from the database, and so is DRF's token table:
rest_framework.authtoken is not installed, so an upgraded database is rebuilt here as that
app left it (its table made by SQL, as its migrations made it) and migrated forward."""

import hashlib
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.contrib.contenttypes.models import ContentType
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.test import Client
from django.utils import timezone

from annotate.models import ApiToken

BEFORE = [("annotate", "0008_api_tokens_hashed_and_login_throttle")]


def _executor() -> MigrationExecutor:
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    return executor


def _create_drf_token_table() -> None:
    """authtoken_token as DRF's migrations 0001-0003 made it: the clear key as primary key,
    its creation time, and a one-to-one link to the user."""
    quote = connection.ops.quote_name
    with connection.cursor() as cursor:
        cursor.execute(
            f"CREATE TABLE {quote('authtoken_token')} ("
            f"{quote('key')} varchar(40) NOT NULL PRIMARY KEY, "
            f"{quote('created')} {connection.data_types['DateTimeField']} NOT NULL, "
            f"{quote('user_id')} integer NOT NULL UNIQUE "
            f"REFERENCES {quote('auth_user')} ({quote('id')}) DEFERRABLE INITIALLY DEFERRED)"
        )


@pytest.mark.django_db(transaction=True)
def test_a_clear_text_token_of_before_the_upgrade_still_works_and_drfs_table_is_dropped():
    executor = _executor()
    latest = executor.loader.graph.leaf_nodes()
    executor.migrate(BEFORE)
    made = (timezone.now() - timedelta(days=2)).replace(microsecond=0)
    key = "a" * 20 + "0123456789abcdef0123"
    try:
        user = get_user_model().objects.create(username="scripted", password="")
        _create_drf_token_table()
        with connection.cursor() as cursor:
            cursor.execute(
                "INSERT INTO authtoken_token VALUES (%s, %s, %s)",
                [key, connection.ops.adapt_datetimefield_value(made), user.pk],
            )
        # What the installed app left beside its table: its models' content types and
        # permissions, which name models no installed app has any more.
        stale = ContentType.objects.create(app_label="authtoken", model="token")
        Permission.objects.create(content_type=stale, codename="view_token", name="Can view Token")
        ContentType.objects.create(app_label="authtoken", model="tokenproxy")
    finally:
        _executor().migrate(latest)
    response = Client().get("/api/assignments/", HTTP_AUTHORIZATION=f"Token {key}")
    assert response.status_code == 200, response.content
    token = ApiToken.objects.get()
    assert (token.user, token.digest, token.prefix) == (user, hashlib.sha256(key.encode()).hexdigest(), key[:8])
    assert token.created_at == made  # so it expires when it would have
    assert "authtoken_token" not in connection.introspection.table_names()
    assert not ContentType.objects.filter(app_label="authtoken").exists()
    assert not Permission.objects.filter(codename="view_token").exists()


@pytest.mark.django_db(transaction=True)
def test_the_migrations_run_back_and_forth_where_drfs_table_never_existed():
    executor = _executor()
    latest = executor.loader.graph.leaf_nodes()
    executor.migrate(BEFORE)
    _executor().migrate(latest)
    assert "authtoken_token" not in connection.introspection.table_names()
    assert "annotate_apitoken" in connection.introspection.table_names()
