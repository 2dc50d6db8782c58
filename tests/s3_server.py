"""A real S3 HTTP server for tests: moto in server mode, started as a process of its own
(never moto's in-process mock: our code talks HTTP to it through boto3, as to AWS or MinIO).

    with S3Server(port) as server:
        server.endpoint_url   # http://127.0.0.1:<port>
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

# Ports of this project's test servers for S3 (the issue-33 range): one per test process.
S3_PORT = int(os.environ.get("TEST_S3_PORT", "18410"))
CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1"}


def free_port(preferred: int) -> int:
    """`preferred` if nobody listens on it, else the next free one of the ten after it."""
    for port in range(preferred, preferred + 10):
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) != 0:
                return port
    raise RuntimeError(f"no free port in {preferred}-{preferred + 9}")


class S3Server:
    def __init__(self, port: int = S3_PORT):
        self.port = free_port(port)
        self.endpoint_url = f"http://127.0.0.1:{self.port}"
        self.process: subprocess.Popen | None = None

    def __enter__(self) -> S3Server:
        moto = Path(sys.executable).with_name("moto_server")
        self.process = subprocess.Popen(
            [str(moto), "-H", "127.0.0.1", "-p", str(self.port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env={**os.environ, **CREDENTIALS},
        )
        deadline = time.monotonic() + 120  # generous: a loaded machine imports moto slowly
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"moto_server exited with {self.process.returncode}")
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", self.port)) == 0:
                    return self
            time.sleep(0.1)  # polling a condition, not a fixed wait
        self.__exit__()
        raise RuntimeError("moto_server did not start listening")

    def __exit__(self, *exc) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=60)

    def storages(self, bucket: str, *, prefix: str = "") -> dict:
        """STORAGES entries for imports and exports in `bucket` of this server, as
        config/settings.py builds them for STORAGE_BACKEND=s3."""
        return {
            kind: {
                "BACKEND": "storages.backends.s3.S3Storage",
                "OPTIONS": {
                    "bucket_name": bucket,
                    "region_name": "us-east-1",
                    "endpoint_url": self.endpoint_url,
                    "location": f"{prefix}{kind}",
                    "default_acl": None,
                    "file_overwrite": False,
                },
            }
            for kind in ("imports", "exports")
        }
