"""Tokens made before they were stored hashed (issue 27, F10) keep working after the
upgrade, and their clear keys are gone from the database."""

import hashlib

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.test import Client

BEFORE = [("annotate", "0008_api_tokens_hashed_and_login_throttle"), ("authtoken", "0003_tokenproxy")]


def _executor() -> MigrationExecutor:
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    return executor


@pytest.mark.django_db(transaction=True)
def test_a_clear_text_token_of_before_the_upgrade_still_works_and_is_kept_only_hashed():
    from django.contrib.auth import get_user_model

    executor = _executor()
    latest = executor.loader.graph.leaf_nodes()
    executor.migrate(BEFORE)
    try:
        old = _executor().loader.project_state(BEFORE).apps
        user = old.get_model("auth", "User").objects.create(username="scripted", password="")
        key = old.get_model("authtoken", "Token").objects.create(user=user, key="a" * 20 + "0123456789abcdef0123").key
    finally:
        _executor().migrate(latest)
    User = get_user_model()
    User.objects.filter(username="scripted").update(is_active=True)
    response = Client().get("/api/assignments/", HTTP_AUTHORIZATION=f"Token {key}")
    assert response.status_code == 200, response.content
    with connection.cursor() as cursor:
        cursor.execute("SELECT COUNT(*) FROM authtoken_token")
        assert cursor.fetchone()[0] == 0
        cursor.execute("SELECT digest FROM annotate_apitoken")
        assert cursor.fetchall() == [(hashlib.sha256(key.encode()).hexdigest(),)]
