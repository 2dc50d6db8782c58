"""The processes of the production shape on one machine, as if on several that share no
disk (tests/rehearsal/test_rehearsal.py): a release step (migrate), two gunicorn web
servers and two Celery workers, each started from the code checkout but in a working
directory of its own (its var/ paths, uploads and exports there, never another's), on
PostgreSQL (a database made afresh for the run), Redis (broker and shared limits) and an
S3-compatible object store (moto in server mode, a separate process).

Every process's output goes to a log file in its directory, shown when a step fails.
Ports are free ones the kernel hands out. Only processes started here are ever stopped,
by their own PIDs.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import httpx2
import psycopg

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
SECRET_KEY = "rehearsal-" + "k" * 60  # not a secret: a throwaway test database
S3_BUCKET = "rehearsal"
# Plain HTTP straight to gunicorn: TLS ends at the load balancer, which is not rehearsed
# (with SECURE_COOKIES the cookies would be Secure and never sent back over http://).
PROXY_HEADERS: dict[str, str] = {}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until(condition, *, what: str, timeout: float = 180.0, every: float = 0.1, logs=()):
    """Poll `condition` until it returns something truthy; fail naming `what` (and showing
    the logs) when it has not after `timeout` seconds (generous: a loaded 2-core machine)."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            tails = "\n".join(log.tail() for log in logs)
            raise AssertionError(f"gave up waiting for {what} after {timeout:.0f} s\n{tails}")
        time.sleep(every)


@dataclass
class Service:
    name: str
    workdir: Path
    process: subprocess.Popen
    url: str = ""
    started_at: float = field(default_factory=time.monotonic)

    @property
    def log(self) -> Path:
        return self.workdir / "output.log"

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def tail(self, lines: int = 40) -> str:
        return f"--- {self.name} (pid {self.process.pid}, exit {self.process.poll()}) ---\n" + "\n".join(
            self.output().splitlines()[-lines:]
        )

    def alive(self) -> bool:
        return self.process.poll() is None

    def kill_hard(self) -> None:
        """SIGKILL to the whole process group (a Celery worker's main process and its pool)."""
        os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()

    def stop(self) -> None:
        if self.process.poll() is not None:
            return
        try:
            os.killpg(self.process.pid, signal.SIGTERM)
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
        except ProcessLookupError:
            pass


def fresh_database(url: str) -> str:
    """Drop and create the database of `url` (on its server's `postgres` database)."""
    parts = urlsplit(url)
    name = parts.path.lstrip("/")
    admin = urlunsplit(parts._replace(path="/postgres"))
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    return url


class Cluster:
    """The processes of one rehearsal; `stop()` ends every one still running."""

    def __init__(self, base: Path, *, database_url: str, redis_url: str, extra_env: dict[str, str]):
        self.base = base
        self.database_url = database_url
        self.redis_url = redis_url
        self.extra_env = dict(extra_env)
        self.services: list[Service] = []
        self.s3_url = ""

    # --- environment -----------------------------------------------------------------------

    def machine(self, name: str) -> Path:
        workdir = self.base / name
        (workdir / "var").mkdir(parents=True, exist_ok=True)
        return workdir

    def env(self, workdir: Path) -> dict[str, str]:
        """One machine's environment: what docs/deployment.md lists for a web or worker
        machine, every local path inside its own working directory."""
        keep = {k: os.environ[k] for k in ("PATH", "LANG", "LC_ALL", "TMPDIR") if k in os.environ}
        var = workdir / "var"
        return {
            **keep,
            "HOME": str(workdir),
            "PYTHONPATH": str(ROOT),
            "PYTHONUNBUFFERED": "1",
            "DJANGO_SETTINGS_MODULE": "config.settings",
            "DEBUG": "0",
            "SECRET_KEY": SECRET_KEY,
            "ALLOWED_HOSTS": "127.0.0.1,localhost",
            "DATABASE_URL": self.database_url,
            "CELERY_BROKER_URL": self.redis_url,
            "DEMO_PASSWORD": "rehearsal-password",
            "IMPORTS_DIR": str(var / "imports"),
            "EXPORTS_DIR": str(var / "exports"),
            "STATIC_ROOT": str(var / "static"),
            "LOCAL_SECRET_KEY_FILE": str(var / "secret_key"),
            "MPLCONFIGDIR": str(var / "matplotlib"),
            "MALLOC_ARENA_MAX": "2",
            "STORAGE_BACKEND": "s3",
            "S3_BUCKET": S3_BUCKET,
            "S3_REGION": "us-east-1",
            "S3_ENDPOINT_URL": self.s3_url,
            "S3_ADDRESSING_STYLE": "path",
            "AWS_ACCESS_KEY_ID": "rehearsal",
            "AWS_SECRET_ACCESS_KEY": "rehearsal-secret",
            **self.extra_env,
        }

    # --- processes -------------------------------------------------------------------------

    def _start(self, name: str, argv: list[str], *, url: str = "", env: dict | None = None) -> Service:
        workdir = self.machine(name)
        log = (workdir / "output.log").open("ab")
        process = subprocess.Popen(
            argv,
            cwd=workdir,
            env=env or self.env(workdir),
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,  # its own process group: stopped (or killed) whole
        )
        log.close()
        service = Service(name, workdir, process, url)
        self.services.append(service)
        return service

    def start_s3(self) -> Service:
        port = free_port()
        self.s3_url = f"http://127.0.0.1:{port}"
        service = self._start(
            "s3", [str(BIN / "moto_server"), "-H", "127.0.0.1", "-p", str(port)], url=self.s3_url, env=os.environ.copy()
        )
        wait_until(lambda: self._answers(self.s3_url + "/"), what="the S3 server", logs=[service])
        self._create_bucket()
        return service

    def _create_bucket(self) -> None:
        import boto3

        client = boto3.client(
            "s3",
            endpoint_url=self.s3_url,
            region_name="us-east-1",
            aws_access_key_id="rehearsal",
            aws_secret_access_key="rehearsal-secret",
        )
        client.create_bucket(Bucket=S3_BUCKET)

    def manage(self, name: str, *args: str, env: dict[str, str] | None = None, timeout: float = 900) -> str:
        """A management command on machine `name` (the release step, a command a user runs)."""
        workdir = self.machine(name)
        result = subprocess.run(
            [sys.executable, str(ROOT / "manage.py"), *args],
            cwd=workdir,
            env={**self.env(workdir), **(env or {})},
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        assert result.returncode == 0, f"manage.py {' '.join(args)} on {name} failed:\n{result.stdout}\n{result.stderr}"
        return result.stdout

    def start_web(self, name: str) -> Service:
        # Each web machine's static files, collected on it as its code is installed: the
        # machines share no disk (docs/deployment.md, "Several machines").
        self.manage(name, "collectstatic", "--noinput")
        port = free_port()
        env = self.env(self.machine(name)) | {
            "WEB_BIND": f"127.0.0.1:{port}",
            "WEB_CONCURRENCY": "1",
            "WEB_THREADS": "4",
        }
        service = self._start(
            name,
            [str(BIN / "gunicorn"), "config.wsgi:application", "-c", str(ROOT / "config" / "gunicorn.conf.py")],
            url=f"http://127.0.0.1:{port}",
            env=env,
        )
        # Ready as a load balancer sees it: the database, the broker and the bucket answer.
        wait_until(lambda: self._ready(service.url + "/readyz"), what=f"{name} to be ready", logs=[service])
        return service

    def start_worker(self, name: str) -> Service:
        service = self._start(
            name,
            [
                str(BIN / "celery"),
                "-A",
                "config",
                "worker",
                "--concurrency=1",
                "--max-tasks-per-child=50",
                "--loglevel=INFO",
                "-n",
                f"{name}@%h",
            ],
        )
        wait_until(lambda: " ready." in service.output(), what=f"{name} to be ready", logs=[service])
        return service

    def _answers(self, url: str) -> bool:
        try:
            return httpx2.get(url, headers=PROXY_HEADERS, timeout=5).status_code < 500
        except httpx2.HTTPError:
            return False

    def _ready(self, url: str) -> bool:
        try:
            return httpx2.get(url, timeout=5).status_code == 200
        except httpx2.HTTPError:
            return False

    def stop(self) -> None:
        for service in reversed(self.services):
            service.stop()
