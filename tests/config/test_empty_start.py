"""An empty start without the demo: `DEMO=0 make run` migrates, creates the first admin from
ADMIN_USERNAME/ADMIN_PASSWORD/ADMIN_EMAIL and loads no demo; the terminal prints the next
step for the database it serves."""

import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
from django.conf import settings as django_settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import CommandError

from config.management.commands.prepare import next_step
from tests.config.test_server import environment, free_port, get
from tests.factories import StudyFactory, UserFactory

BASE = Path(django_settings.BASE_DIR)


def make_run(env: dict, *make_args: str, limit_s: float = 420):
    """`make run` as a user types it, on a free port; (process, base URL) once the login
    page answers, and the output so far."""
    port = free_port()
    process = subprocess.Popen(
        ["make", "--no-print-directory", "run", f"PORT={port}", *make_args],
        cwd=BASE,
        env={**env, "WEB_CONCURRENCY": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + limit_s
    while True:
        try:
            get(f"{base}/accounts/login/")
            return process, base
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                stop(process)
                pytest.fail(f"make run did not serve: {process.stdout.read()[-3000:]}")
            time.sleep(0.5)


def stop(process) -> str:
    import os
    import signal

    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)  # make and gunicorn: the group this test started
        process.wait(timeout=60)
    return process.stdout.read()


def log_in(base: str, username: str, password: str) -> str:
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor())
    page = opener.open(f"{base}/accounts/login/", timeout=60).read().decode()
    token = page.split('name="csrfmiddlewaretoken" value="', 1)[1].split('"', 1)[0]
    form = urllib.parse.urlencode({"username": username, "password": password, "csrfmiddlewaretoken": token})
    landed = opener.open(
        urllib.request.Request(f"{base}/accounts/login/", data=form.encode(), headers={"Referer": f"{base}/"}),
        timeout=60,
    )
    return landed.geturl() + "\n" + landed.read().decode()


def test_demo_0_make_run_starts_empty_with_the_admin_from_the_environment(tmp_path):
    env = environment(tmp_path, ADMIN_USERNAME="pi", ADMIN_PASSWORD="a-lab-password-2026", ADMIN_EMAIL="pi@lab.example")
    process, base = make_run(env, "DEMO=0")
    try:
        landed = log_in(base, "pi", "a-lab-password-2026")
        assert "/studies/" in landed.split("\n", 1)[0] and "New study" in landed
        assert "demo-litsumm" not in landed
        for demo_account in ("rater1", "admin"):
            assert "/accounts/login/" in log_in(base, demo_account, "rate-summaries-2026").split("\n", 1)[0]
    finally:
        output = stop(process)
    assert "Created the admin account 'pi'" in output
    assert "create the first study at" in output and "log in as rater1" not in output


def test_without_an_admin_in_the_environment_an_empty_start_says_how_to_begin(tmp_path):
    process, base = make_run(environment(tmp_path), "DEMO=0")
    try:
        assert "/accounts/login/" in log_in(base, "rater1", "rate-summaries-2026").split("\n", 1)[0]
    finally:
        output = stop(process)
    assert "no admin account yet" in output and "manage.py createsuperuser" in output
    assert "log in as rater1" not in output


# --- the pieces, in process ------------------------------------------------------------------


@pytest.mark.django_db
def test_next_step_follows_the_database():
    url = "http://127.0.0.1:8000/"
    assert "no admin account yet" in next_step(url)
    UserFactory(username="pi", is_superuser=True, is_staff=True)
    assert "create the first study at http://127.0.0.1:8000/studies/new/" in next_step(url)
    StudyFactory()
    assert next_step(url) == f"Serving on {url}"


@pytest.mark.django_db
def test_create_first_admin_from_the_environment(monkeypatch, capsys):
    monkeypatch.setenv("ADMIN_USERNAME", "pi")
    monkeypatch.setenv("ADMIN_PASSWORD", "a-lab-password-2026")
    monkeypatch.setenv("ADMIN_EMAIL", "pi@lab.example")
    call_command("create_first_admin")
    pi = get_user_model().objects.get(username="pi")
    assert pi.is_superuser and pi.email == "pi@lab.example" and pi.check_password("a-lab-password-2026")
    # Never again: an existing admin is left alone, whatever the environment says.
    monkeypatch.setenv("ADMIN_PASSWORD", "another-password-2026")
    call_command("create_first_admin")
    pi.refresh_from_db()
    assert pi.check_password("a-lab-password-2026")
    assert "exists already" in capsys.readouterr().out


@pytest.mark.django_db
@pytest.mark.parametrize(
    "env,message",
    [
        ({"ADMIN_USERNAME": "pi"}, "Set both ADMIN_USERNAME and ADMIN_PASSWORD"),
        ({"ADMIN_USERNAME": "pi", "ADMIN_PASSWORD": "short"}, "ADMIN_PASSWORD is refused"),
        ({"ADMIN_USERNAME": "p i", "ADMIN_PASSWORD": "a-lab-password-2026"}, "ADMIN_USERNAME must be"),
        (
            {"ADMIN_USERNAME": "pi", "ADMIN_PASSWORD": "a-lab-password-2026", "ADMIN_EMAIL": "nope"},
            "ADMIN_EMAIL is not a valid",
        ),
    ],
)
def test_a_bad_admin_environment_stops_with_its_reason_and_creates_nothing(monkeypatch, env, message):
    for name in ("ADMIN_USERNAME", "ADMIN_PASSWORD", "ADMIN_EMAIL"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(CommandError, match=message):
        call_command("create_first_admin")
    assert not get_user_model().objects.exists()


@pytest.mark.django_db
def test_without_the_environment_or_a_terminal_it_says_how(monkeypatch, capsys):
    for name in ("ADMIN_USERNAME", "ADMIN_PASSWORD", "ADMIN_EMAIL"):
        monkeypatch.delenv(name, raising=False)
    call_command("create_first_admin", no_input=True)
    assert "manage.py createsuperuser" in capsys.readouterr().out
    assert not get_user_model().objects.exists()
