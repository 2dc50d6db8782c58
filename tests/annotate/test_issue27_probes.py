"""The outside probe's findings on accounts, as it ran them: only
through HTTP and the database, so the same file shows them failing on the code before the
fix and passing after."""

import pytest
from django.db import connection
from django.test import Client

from tests.factories import PASSWORD

HOME, ELSEWHERE = "192.0.2.10", "192.0.2.20"


def obtain_token() -> str:
    response = Client().post(
        "/api/auth/token/",
        {"username": "rater_a", "password": PASSWORD},
        content_type="application/json",
        REMOTE_ADDR=HOME,
    )
    assert response.status_code == 200, response.content
    return response.json()["token"]


def log_in(password: str, address: str) -> int:
    return (
        Client()
        .post("/accounts/login/", {"username": "rater_a", "password": password}, REMOTE_ADDR=address)
        .status_code
    )


@pytest.mark.django_db
def test_f3_a_token_stops_working_when_the_password_changes(rater_a):
    token = obtain_token()
    assert Client().get("/api/assignments/", HTTP_AUTHORIZATION=f"Token {token}").status_code == 200
    rater_a.set_password("a-new-long-password-42")
    rater_a.save()
    assert Client().get("/api/assignments/", HTTP_AUTHORIZATION=f"Token {token}").status_code == 403


@pytest.mark.django_db
def test_f10_no_column_of_any_table_holds_the_token(rater_a):
    token = obtain_token()
    with connection.cursor() as cursor:
        for table in connection.introspection.table_names(cursor):
            for column in connection.introspection.get_table_description(cursor, table):
                quoted = connection.ops.quote_name
                cursor.execute(
                    f"SELECT COUNT(*) FROM {quoted(table)} WHERE CAST({quoted(column.name)} AS TEXT) = %s", [token]
                )
                assert cursor.fetchone()[0] == 0, f"{table}.{column.name} holds the token"


@pytest.mark.django_db
def test_f4_a_stranger_failing_on_purpose_cannot_lock_the_owner_out(rater_a):
    for _ in range(6):
        assert log_in("wrong-password", ELSEWHERE) in (200, 429)
    assert log_in(PASSWORD, HOME) == 302
