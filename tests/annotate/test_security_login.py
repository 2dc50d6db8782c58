"""Login throttling and API tokens, through the
real login page, the admin's login page and the token endpoint: failed logins are limited
per (username, address) pair and per address with a lock, and per username with a
progressive delay that a stranger cannot stretch into a lock (annotate/throttling.py);
tokens are stored hashed, expire after API_TOKEN_TTL_HOURS, die with the password and can
be revoked (docs/security.md)."""

import hashlib
from datetime import timedelta

import pytest
import time_machine
from django.contrib.auth import SESSION_KEY
from django.test import Client
from django.utils import timezone

from annotate.models import ApiToken, LoginThrottle
from tests.factories import PASSWORD, UserFactory

LOGIN = "/accounts/login/"
ADMIN_LOGIN = "/admin/login/"
TOKEN = "/api/auth/token/"
HOME = "192.0.2.10"  # documentation addresses (RFC 5737): only strings in REMOTE_ADDR here
ELSEWHERE = "192.0.2.20"


def log_in(client: Client, username: str, password: str, *, address: str = HOME, url: str = LOGIN):
    return client.post(url, {"username": username, "password": password}, REMOTE_ADDR=address)


def fail(client: Client, username: str, times: int, *, address: str = HOME, url: str = LOGIN) -> None:
    for _ in range(times):
        response = log_in(client, username, "wrong-password", address=address, url=url)
        assert response.status_code in (200, 429)


def signed_in(client: Client) -> bool:
    return SESSION_KEY in client.session


def move_clock_back(minutes: float) -> None:
    """As if `minutes` had passed: every recorded time of the throttle moved back."""
    delta = timedelta(minutes=minutes)
    for row in LoginThrottle.objects.all():
        row.window_start -= delta
        row.last_failure_at -= delta
        if row.locked_until:
            row.locked_until -= delta
        row.save()


@pytest.mark.django_db
def test_five_failures_from_one_address_lock_that_pair_with_a_clear_message(rater_a):
    client = Client()
    fail(client, "rater_a", 4)
    assert log_in(Client(), "rater_a", PASSWORD).status_code == 302  # four failures: still fine
    fail(client, "rater_a", 5)
    locked = log_in(client, "rater_a", PASSWORD)  # even the right password
    assert locked.status_code == 429
    page = locked.content.decode()
    assert "Too many failed logins for this account or from this address" in page
    assert "Try again in 15 minutes" in page
    assert 14 * 60 < int(locked["Retry-After"]) <= 15 * 60
    assert not signed_in(client)


@pytest.mark.django_db
def test_a_stranger_locking_the_pair_does_not_lock_the_owner_elsewhere(rater_a):
    """F4: failures from one address lock that address's tries, not the account."""
    fail(Client(), "rater_a", 8, address=ELSEWHERE)
    assert log_in(Client(), "rater_a", PASSWORD, address=ELSEWHERE).status_code == 429
    owner = Client()
    assert log_in(owner, "rater_a", PASSWORD, address=HOME).status_code == 302
    assert signed_in(owner)


@pytest.mark.django_db
def test_a_failure_during_the_lock_does_not_extend_it(rater_a):
    """F4: one failure every few minutes used to restart the cool-off for ever."""
    fail(Client(), "rater_a", 5)
    for _ in range(3):  # a failure every 4 minutes during the 15-minute lock
        move_clock_back(4)
        assert log_in(Client(), "rater_a", "wrong-password").status_code == 429
    move_clock_back(3.5)  # 15.5 minutes after the lock began: it is over
    client = Client()
    assert log_in(client, "rater_a", PASSWORD).status_code == 302 and signed_in(client)


@pytest.mark.django_db
def test_one_failure_every_fifteen_minutes_never_keeps_the_owner_out(rater_a):
    """The probe's attack: a failure every 15 minutes kept the account locked for ever.
    Now the stranger locks only their own address, and the owner signs in meanwhile."""
    fail(Client(), "rater_a", 5, address=ELSEWHERE)
    for _ in range(6):
        move_clock_back(14)
        fail(Client(), "rater_a", 1, address=ELSEWHERE)
        move_clock_back(1)  # the owner comes a minute later (past any username delay)
        owner = Client()
        assert log_in(owner, "rater_a", PASSWORD, address=HOME).status_code == 302 and signed_in(owner)


@pytest.mark.django_db
def test_an_address_trying_many_accounts_is_locked(rater_a, rater_b):
    for n in range(20):
        fail(Client(), f"name{n}", 1, address=HOME)
    locked = log_in(Client(), "rater_b", PASSWORD, address=HOME)
    assert locked.status_code == 429
    elsewhere = Client()
    assert log_in(elsewhere, "rater_b", PASSWORD, address=ELSEWHERE).status_code == 302
    assert signed_in(elsewhere)


@pytest.mark.django_db
def test_nineteen_failures_from_an_address_do_not_lock_it(rater_b):
    for n in range(19):
        fail(Client(), f"name{n}", 1, address=HOME)
    assert log_in(Client(), "rater_b", PASSWORD, address=HOME).status_code == 302


@pytest.mark.django_db
def test_failures_of_one_username_from_many_addresses_are_delayed_progressively(rater_a):
    """Guessing spread over addresses: from the 10th failure, each try waits 1, 2, 4, …
    seconds (at most 60), and a try during the wait is refused without being counted."""
    for n in range(9):
        fail(Client(), "rater_a", 1, address=f"198.51.100.{n}")
    assert LoginThrottle.objects.get(scope="username").locked_until is None
    delays = []
    # The clock stands still from here: the first wait is one second, which a loaded machine
    # could spend between a failure and the next try.
    with time_machine.travel(timezone.now(), tick=False):
        fail(Client(), "rater_a", 1, address="198.51.100.9")
        for n in range(10, 18):
            row = LoginThrottle.objects.get(scope="username")
            delays.append(round((row.locked_until - row.last_failure_at).total_seconds()))
            refused = log_in(Client(), "rater_a", "wrong-password", address=f"198.51.100.{n}")
            assert refused.status_code == 429 and "each try must now wait" in refused.content.decode()
            assert LoginThrottle.objects.get(scope="username").failures == n  # not counted
            move_clock_back(delays[-1] / 60)
            fail(Client(), "rater_a", 1, address=f"198.51.100.{n}")
    assert delays == [1, 2, 4, 8, 16, 32, 60, 60]
    # The owner waits out at most the last delay, then signs in; the count starts again.
    move_clock_back(1)
    owner = Client()
    assert log_in(owner, "rater_a", PASSWORD, address=ELSEWHERE).status_code == 302 and signed_in(owner)
    assert not LoginThrottle.objects.filter(scope="username").exists()


@pytest.mark.django_db
def test_the_lock_ends_after_the_cool_off(rater_a):
    fail(Client(), "rater_a", 5)
    assert log_in(Client(), "rater_a", PASSWORD).status_code == 429
    move_clock_back(16)
    client = Client()
    assert log_in(client, "rater_a", PASSWORD).status_code == 302 and signed_in(client)


@pytest.mark.django_db
def test_a_successful_login_resets_the_count(rater_a):
    fail(Client(), "rater_a", 4)
    assert log_in(Client(), "rater_a", PASSWORD).status_code == 302
    fail(Client(), "rater_a", 4)
    client = Client()
    assert log_in(client, "rater_a", PASSWORD).status_code == 302 and signed_in(client)


@pytest.mark.django_db
def test_the_admin_login_is_throttled_too(admin_user):
    client = Client()
    fail(client, "admin", 5, url=ADMIN_LOGIN)
    locked = log_in(client, "admin", PASSWORD, url=ADMIN_LOGIN)
    assert locked.status_code == 429 and "Too many failed logins" in locked.content.decode()
    assert not signed_in(client)
    # The pair is locked on every login page; the account elsewhere is not.
    assert log_in(Client(), "admin", PASSWORD, url=LOGIN).status_code == 429
    assert log_in(Client(), "admin", PASSWORD, address=ELSEWHERE).status_code == 302


@pytest.mark.django_db
def test_the_admin_sees_the_locks_and_lifts_one(client, admin_user, rater_a):
    fail(Client(), "rater_a", 5, address=ELSEWHERE)
    assert log_in(Client(), "rater_a", PASSWORD, address=ELSEWHERE).status_code == 429
    client.force_login(admin_user)
    listing = client.get("/admin/annotate/loginthrottle/?locked=yes")
    page = listing.content.decode()
    assert listing.status_code == 200 and "rater_a" in page and ELSEWHERE in page
    pair = LoginThrottle.objects.get(scope="pair")
    response = client.post(
        "/admin/annotate/loginthrottle/",
        {"action": "lift", "_selected_action": [pair.pk]},
    )
    assert response.status_code == 302
    assert log_in(Client(), "rater_a", PASSWORD, address=ELSEWHERE).status_code == 302


@pytest.mark.django_db
def test_behind_a_proxy_the_forwarded_address_counts_and_spoofed_entries_do_not(settings, rater_b):
    settings.TRUSTED_PROXY_COUNT = 1
    proxy = "198.51.100.1"
    for n in range(5):
        # The client writes whatever it likes on the left; the proxy appends the real address.
        Client().post(
            LOGIN,
            {"username": "rater_b", "password": "x"},
            REMOTE_ADDR=proxy,
            HTTP_X_FORWARDED_FOR=f"203.0.113.{n}, {HOME}",
        )
    locked = Client().post(
        LOGIN, {"username": "rater_b", "password": PASSWORD}, REMOTE_ADDR=proxy, HTTP_X_FORWARDED_FOR=HOME
    )
    assert locked.status_code == 429
    other = Client()
    response = other.post(
        LOGIN, {"username": "rater_b", "password": PASSWORD}, REMOTE_ADDR=proxy, HTTP_X_FORWARDED_FOR=ELSEWHERE
    )
    assert response.status_code == 302 and signed_in(other)


@pytest.mark.django_db
def test_without_trusted_proxies_x_forwarded_for_is_ignored(rater_b):
    for n in range(5):
        Client().post(
            LOGIN, {"username": "rater_b", "password": "x"}, REMOTE_ADDR=HOME, HTTP_X_FORWARDED_FOR=f"203.0.113.{n}"
        )
    response = Client().post(
        LOGIN, {"username": "rater_b", "password": PASSWORD}, REMOTE_ADDR=HOME, HTTP_X_FORWARDED_FOR=ELSEWHERE
    )
    assert response.status_code == 429


# --- the API token -------------------------------------------------------------------------------


def obtain(client: Client, username: str, password: str, address: str = HOME, **extra):
    return client.post(
        TOKEN,
        {"username": username, "password": password, **extra},
        content_type="application/json",
        REMOTE_ADDR=address,
    )


def api_get(token: str):
    return Client().get("/api/assignments/", HTTP_AUTHORIZATION=f"Token {token}")


@pytest.mark.django_db
def test_a_token_is_obtained_used_and_revoked(rater_a):
    client = Client()
    response = obtain(client, "rater_a", PASSWORD, name="my script")
    assert response.status_code == 200, response.content
    body = response.json()
    expires = timezone.datetime.fromisoformat(body["expires_at"].replace("Z", "+00:00"))
    assert timedelta(hours=719) < expires - timezone.now() <= timedelta(hours=720)
    assert body["name"] == "my script" and body["token"].startswith(body["prefix"])
    assert api_get(body["token"]).status_code == 200
    other = obtain(client, "rater_a", PASSWORD).json()["token"]
    assert other != body["token"]  # each client its own; both work
    assert api_get(other).status_code == 200

    auth = {"HTTP_AUTHORIZATION": f"Token {body['token']}"}
    assert client.delete(TOKEN, **auth).status_code == 204
    refused = api_get(body["token"])
    assert refused.status_code in (401, 403) and refused.json()["error"]["code"] == "authentication_failed"
    assert api_get(other).status_code == 200  # only the one used was revoked


@pytest.mark.django_db
def test_tokens_are_stored_only_as_a_hash(rater_a):
    """F10: nothing stored can be sent back as the token."""
    secret = obtain(Client(), "rater_a", PASSWORD).json()["token"]
    (row,) = ApiToken.objects.values()
    assert secret not in {str(v) for v in row.values()}
    assert row["digest"] == hashlib.sha256(secret.encode()).hexdigest()  # hashlib, independently
    assert api_get(row["digest"]).status_code == 403  # the digest is not a token


@pytest.mark.django_db
def test_a_password_change_revokes_every_token(rater_a):
    """F3: sessions ended with a password change; tokens did not."""
    tokens = [obtain(Client(), "rater_a", PASSWORD).json()["token"] for _ in range(2)]
    client = Client()
    client.force_login(rater_a)
    changed = client.post(
        "/accounts/password_change/",
        {
            "old_password": PASSWORD,
            "new_password1": "a-new-long-password-42",
            "new_password2": "a-new-long-password-42",
        },
    )
    assert changed.status_code == 302
    for token in tokens:
        assert api_get(token).status_code == 403
    assert not ApiToken.objects.filter(user=rater_a).exists()
    assert api_get(obtain(Client(), "rater_a", "a-new-long-password-42").json()["token"]).status_code == 200


@pytest.mark.django_db
def test_a_password_set_any_other_way_revokes_every_token_too(rater_a):
    """The admin's "change password", manage.py changepassword, the reset link: all set_password."""
    token = obtain(Client(), "rater_a", PASSWORD).json()["token"]
    rater_a.set_password("another-long-password-7")
    rater_a.save()
    assert api_get(token).status_code == 403


@pytest.mark.django_db
def test_the_account_page_lists_makes_and_revokes_ones_own_tokens(rater_a, rater_b):
    first = obtain(Client(), "rater_a", PASSWORD, name="nightly export").json()
    theirs = obtain(Client(), "rater_b", PASSWORD, name="rater b's own").json()
    api_get(first["token"])
    client = Client()
    client.force_login(rater_a)
    page = client.get("/accounts/").content.decode()
    assert "nightly export" in page and first["prefix"] in page
    assert "rater b&#x27;s own" not in page and theirs["prefix"] not in page
    assert first["token"] not in page
    assert ApiToken.objects.get(name="nightly export").last_used_at is not None

    made = client.post("/accounts/", {"action": "create", "name": "<b>laptop</b>"})
    page = made.content.decode()
    assert made.status_code == 200 and "&lt;b&gt;laptop&lt;/b&gt;" in page and "<b>laptop" not in page
    new_token = ApiToken.objects.get(name="<b>laptop</b>")
    secret = page.split('<code id="new-token">')[1].split("</code>")[0]
    assert secret.startswith(new_token.prefix) and api_get(secret).status_code == 200

    stranger = ApiToken.objects.get(user=rater_b)
    refused = client.post("/accounts/", {"action": "revoke", "token": str(stranger.uuid)})
    assert refused.status_code == 400 and ApiToken.objects.filter(pk=stranger.pk).exists()
    revoked = client.post("/accounts/", {"action": "revoke", "token": str(new_token.uuid)})
    assert revoked.status_code == 302 and api_get(secret).status_code == 403
    client.post("/accounts/", {"action": "revoke_all"})
    assert api_get(first["token"]).status_code == 403
    assert api_get(theirs["token"]).status_code == 200


@pytest.mark.django_db
def test_a_token_name_over_its_limit_is_a_400_naming_it(rater_a):
    response = obtain(Client(), "rater_a", PASSWORD, name="n" * 101)
    assert response.status_code == 400 and "name" in response.json()["error"]["fields"]
    client = Client()
    client.force_login(rater_a)
    page = client.post("/accounts/", {"action": "create", "name": "n" * 101})
    assert page.status_code == 400 and "at most 100" in page.content.decode()
    assert not ApiToken.objects.exists()


@pytest.mark.django_db
def test_wrong_credentials_are_a_clear_400(rater_a):
    response = obtain(Client(), "rater_a", "wrong-password")
    assert response.status_code == 400
    assert response.json()["error"] == {
        "code": "invalid_credentials",
        "message": "The username or password is not correct.",
    }
    missing = Client().post(TOKEN, {"username": "rater_a"}, content_type="application/json")
    assert missing.status_code == 400 and set(missing.json()["error"]["fields"]) == {"password"}
    assert not ApiToken.objects.exists()


@pytest.mark.django_db
def test_token_logins_are_throttled_with_the_login_pages(rater_a):
    client = Client()
    for _ in range(5):
        obtain(client, "rater_a", "wrong-password")
    locked = obtain(client, "rater_a", PASSWORD)
    assert locked.status_code == 429
    assert locked.json()["error"]["code"] == "locked_out"
    assert "Too many failed logins" in locked.json()["error"]["message"]
    assert 14 * 60 < int(locked["Retry-After"]) <= 15 * 60
    assert not ApiToken.objects.exists()
    # The same pair on the login page: locked too.
    assert log_in(Client(), "rater_a", PASSWORD).status_code == 429


@pytest.mark.django_db
def test_an_expired_token_is_a_401_with_a_clear_message_and_a_new_one_can_be_obtained(rater_a):
    client = Client()
    old = obtain(client, "rater_a", PASSWORD).json()["token"]
    ApiToken.objects.update(created_at=timezone.now() - timedelta(hours=721))
    response = api_get(old)
    assert response.status_code == 401
    assert response["WWW-Authenticate"] == "Token"
    assert response.json()["error"] == {
        "code": "token_expired",
        "message": "The token has expired: obtain a new one with POST /api/auth/token/.",
    }
    new = obtain(client, "rater_a", PASSWORD).json()["token"]
    assert new != old
    assert api_get(new).status_code == 200


@pytest.mark.django_db
def test_the_token_lifetime_comes_from_the_setting(settings, rater_a):
    settings.API_TOKEN_TTL_HOURS = 1
    key = obtain(Client(), "rater_a", PASSWORD).json()["token"]
    ApiToken.objects.update(created_at=timezone.now() - timedelta(minutes=61))
    assert api_get(key).status_code == 401


@pytest.mark.django_db
def test_an_admin_revokes_a_token_in_the_django_admin(client, admin_user, rater_a):
    key = obtain(Client(), "rater_a", PASSWORD).json()["token"]
    client.force_login(admin_user)
    listing = client.get("/admin/annotate/apitoken/")
    assert listing.status_code == 200 and "rater_a" in listing.content.decode()
    token = ApiToken.objects.get(user=rater_a)
    response = client.post(f"/admin/annotate/apitoken/{token.pk}/delete/", {"post": "yes"})
    assert response.status_code == 302
    assert api_get(key).status_code == 403


@pytest.mark.django_db
def test_create_api_token_command_prints_a_working_token(rater_a):
    from io import StringIO

    from django.core.management import call_command

    out = StringIO()
    call_command("create_api_token", "rater_a", "--name", "cron", stdout=out)
    assert api_get(out.getvalue().strip()).status_code == 200


@pytest.mark.django_db
def test_revoking_needs_a_signed_in_caller():
    response = Client().delete(TOKEN)
    assert response.status_code == 403 and response.json()["error"]["code"] == "not_authenticated"


@pytest.mark.django_db
def test_an_inactive_account_gets_no_token(rater_a):
    user = UserFactory(username="gone")
    user.is_active = False
    user.save()
    assert obtain(Client(), "gone", PASSWORD).status_code == 400


@pytest.mark.django_db
@pytest.mark.parametrize(
    "url, name",
    [(LOGIN, "x" * 300), (LOGIN, "nul\x00name"), (ADMIN_LOGIN, "y" * 300), (TOKEN, "z" * 300)],
)
def test_a_username_no_account_can_have_is_a_failed_login_not_a_500(url, name):
    # Django's login form does not check the username's length before authenticating;
    # the throttle then recorded the failure in a limited column, which PostgreSQL
    # refused (a 500 found by the form fuzz). Each is refused as a failed login; where
    # it reaches authentication it is counted under a name that fits the column.
    response = log_in(Client(), name, "wrong-password", url=url)
    assert response.status_code in (200, 400)
    for counter in LoginThrottle.objects.all():
        assert len(counter.username) <= 150 and "\x00" not in counter.username
