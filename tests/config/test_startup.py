"""config.startup.run_in_child: gunicorn's master prepares the database in a forked child
(issue 30), so what the preparation imports and allocates leaves with the child. Each probe
runs in a fresh interpreter: the helper forks the process it runs in."""

import json

import pytest

from tests.config.test_imports import probe_env, run_probe

CHILD_PROBE = """
import json, os, sys
import django
django.setup()
from config.startup import run_in_child

def work():
    import xml.dom.minidom  # nothing in the app imports it
    from django.contrib.auth import get_user_model
    return {"pid": os.getpid(), "users": get_user_model().objects.count(), "minidom": "xml.dom.minidom" in sys.modules}

before = "xml.dom.minidom" in sys.modules
got = run_in_child(work)
print(json.dumps({"got": got, "pid": os.getpid(), "before": before, "after": "xml.dom.minidom" in sys.modules}))
"""


def test_the_child_returns_its_value_and_takes_its_imports_with_it(tmp_path):
    env = probe_env(tmp_path, DEBUG="1")
    assert run_probe(["manage.py", "migrate", "--verbosity", "0"], env).returncode == 0
    done = run_probe(["-c", CHILD_PROBE], env)
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout.strip().splitlines()[-1])
    # The work ran in another process, with the database (its own connection), and
    # what it imported is not in the parent.
    assert found["got"]["pid"] != found["pid"]
    assert found["got"]["users"] == 0
    assert found["got"]["minidom"] is True
    assert found["before"] is False and found["after"] is False


FAILING_PROBE = """
import os, sys
import django
django.setup()
from config.startup import run_in_child

def work():
    {body}

try:
    run_in_child(work)
except SystemExit as exc:
    print("PARENT EXIT", exc.code)
else:
    print("PARENT RETURNED")
"""


@pytest.mark.parametrize(
    ("body", "code", "on_stderr"),
    [
        ("raise RuntimeError('migration 0042 failed')", 1, "RuntimeError: migration 0042 failed"),
        ("raise SystemExit('Set ADMIN_PASSWORD to create the first admin')", 1, "Set ADMIN_PASSWORD"),
        ("raise SystemExit(3)", 3, ""),
        ("os.kill(os.getpid(), 9)", 128 + 9, ""),
    ],
)
def test_a_failing_child_stops_the_parent_with_its_status(tmp_path, body, code, on_stderr):
    done = run_probe(["-c", FAILING_PROBE.replace("{body}", body)], probe_env(tmp_path, DEBUG="1"))
    assert done.returncode == 0, done.stderr
    assert f"PARENT EXIT {code}" in done.stdout
    assert on_stderr in done.stderr


def test_a_child_that_exits_cleanly_returns_nothing(tmp_path):
    done = run_probe(["-c", FAILING_PROBE.replace("{body}", "sys.exit(0)")], probe_env(tmp_path, DEBUG="1"))
    assert done.returncode == 0, done.stderr
    assert "PARENT RETURNED" in done.stdout
