"""Real identity providers for the SSO tests, each started as its own process on a free
port and stopped after the tests: the npm package oidc-provider under Node.js
(tests/idp/oidc_idp.mjs) and pysaml2's IdP (tests/idp/saml_idp.py). The browser tests
(tests/browser/test_sso_*_browser.py) import these fixtures."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import threading
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

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


def start_node(script: str, port: int, env: dict[str, str]) -> subprocess.Popen:
    node = shutil.which("node") or "/usr/bin/node"
    if not (IDP_DIR / "node_modules").is_dir():
        pytest.fail("tests/idp/node_modules is missing: run `make idp` (npm ci in tests/idp)")
    return start_provider([node, script, str(port)], env)


def start_provider(argv: list[str], env: dict[str, str], timeout_s: float = 30) -> subprocess.Popen:
    """Start a provider in tests/idp and wait until it prints its "ready" line (or dies)."""
    process = subprocess.Popen(
        argv,
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
        pytest.fail(f"{' '.join(argv)} did not start")
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


def write_key_and_certificate(folder: Path) -> tuple[Path, Path]:
    """A fresh RSA key and its self-signed certificate (PEM), as a provider's signing pair."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    from cryptography.x509.oid import NameOID

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "test-idp")])
    now = datetime.now(UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(days=1))
        .not_valid_after(now + timedelta(days=30))
        .sign(key, hashes.SHA256())
    )
    key_path, cert_path = folder / "idp.key", folder / "idp.crt"
    key_path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return key_path, cert_path


@pytest.fixture(scope="session")
def saml_idp(live_server, tmp_path_factory):
    if not shutil.which("xmlsec1"):
        pytest.fail("xmlsec1 is missing: run `make xmlsec1` (apt-get install xmlsec1)")
    key, cert = write_key_and_certificate(tmp_path_factory.mktemp("saml-idp"))
    port = free_port()
    acs = [f"{base}/accounts/sso/saml/acs/" for base in ("http://testserver", live_server.url)]
    process = start_provider(
        [sys.executable, str(IDP_DIR / "saml_idp.py"), str(port)],
        {"IDP_KEY": str(key), "IDP_CERT": str(cert), "IDP_ACCOUNTS": json.dumps(ACCOUNTS), "IDP_ACS": json.dumps(acs)},
    )
    yield RunningProvider(issuer=f"http://localhost:{port}", process=process)
    process.terminate()
    process.wait(timeout=10)


@pytest.fixture
def saml_settings(settings, saml_idp):
    """The platform configured with the test SAML provider."""
    settings.SAML_IDP_METADATA_URL = f"{saml_idp.issuer}/metadata"
    settings.SAML_IDP_METADATA_FILE = ""
    settings.SAML_LABEL = "Test university"
    settings.SAML_GROUPS_ATTRIBUTE = "groups"
    settings.OIDC_PROVIDERS = {}
    settings.SSO_CREATE_ACCOUNTS = False
    settings.SSO_GROUP_ROLES = []
    return settings
