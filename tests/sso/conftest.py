"""Real identity providers for the SSO tests, each started as its own process on a free
port and stopped after the tests: the npm package oidc-provider under Node.js
(tests/idp/oidc_idp.mjs). The browser fixtures are tests/browser's."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.browser.conftest import browser, page, server_gate  # noqa: F401 (fixtures)

IDP_DIR = Path(__file__).resolve().parents[1] / "idp"
CLIENT_SECRET = "lab-client-secret-for-the-tests-only-0123456789"
# Who can sign in at the test provider (any password): their claims.
ACCOUNTS = {
    "ana": {"email": "ana@uni.example", "email_verified": True, "groups": ["raters"]},
    "ben": {"email": "ben@uni.example", "email_verified": False},
    "cy": {"email": "cy@uni.example", "email_verified": True, "groups": ["pilot-admins", "raters"]},
    "root": {"email": "root@uni.example", "email_verified": True},
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class RunningProvider:
    issuer: str
    process: subprocess.Popen


def start_node(script: str, port: int, env: dict[str, str], timeout_s: float = 30) -> subprocess.Popen:
    """Start `node script port` and wait until it prints its "ready" line (or dies)."""
    node = shutil.which("node") or "/usr/bin/node"
    if not (IDP_DIR / "node_modules").is_dir():
        pytest.fail("tests/idp/node_modules is missing: run `make idp` (npm ci in tests/idp)")
    process = subprocess.Popen(
        [node, script, str(port)],
        cwd=IDP_DIR,
        env={**os.environ, **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    ready = threading.Event()

    def watch():
        for line in process.stdout:
            if line.startswith("ready "):
                ready.set()
        ready.set()  # the process ended: wake the waiter, which then sees it

    threading.Thread(target=watch, daemon=True).start()
    if not ready.wait(timeout_s) or process.poll() is not None:
        process.kill()
        pytest.fail(f"{script} did not start on port {port}")
    return process


@pytest.fixture(scope="session")
def oidc_idp(live_server):
    port = free_port()
    callbacks = [f"{base}/accounts/sso/oidc/callback/" for base in ("http://testserver", live_server.url)]
    after_logout = [f"{base}/accounts/login/" for base in ("http://testserver", live_server.url)]
    client = {
        "client_secret": CLIENT_SECRET,
        "redirect_uris": callbacks,
        "post_logout_redirect_uris": after_logout,
    }
    clients = [{"client_id": "lab", **client}, {"client_id": "other", **client}, {"client_id": "brief", **client}]
    process = start_node(
        "oidc_idp.mjs",
        port,
        {
            "IDP_CLIENTS": json.dumps(clients),
            "IDP_ACCOUNTS": json.dumps(ACCOUNTS),
            "IDP_ID_TOKEN_TTL": json.dumps({"brief": 1}),
        },
    )
    yield RunningProvider(issuer=f"http://127.0.0.1:{port}", process=process)
    process.terminate()
    process.wait(timeout=10)


def provider_settings(issuer: str, client_id: str = "lab", **extra) -> dict:
    return {
        "issuer": issuer,
        "client_id": client_id,
        "client_secret": CLIENT_SECRET,
        "label": "University",
        "groups_claim": "groups",
        **extra,
    }


@pytest.fixture
def oidc_settings(settings, oidc_idp):
    """The platform configured with the test provider as "uni"."""
    settings.OIDC_PROVIDERS = {"uni": provider_settings(oidc_idp.issuer)}
    settings.SSO_CREATE_ACCOUNTS = False
    settings.SSO_GROUP_ROLES = []
    return settings
