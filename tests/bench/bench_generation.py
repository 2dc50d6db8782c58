"""Throughput of `generate` against the scripted server (not collected by pytest).

    .venv/bin/python tests/bench/bench_generation.py [--latency 1.0] [--per-worker 8]
        [--concurrency 1 4 16] [--runs 3] [--mode threads|celery]
        [--database sqlite|postgres|URL] [--broker URL]

Every LLM call takes a fixed `latency` at the server; a clean LitSumm summary takes
2 calls (generate, self-consistency). At concurrency c the ideal is
c / (latency × 2) summaries per second. The pipelines use the real openai client over
HTTP.

--mode threads (default, as on a fresh machine): no broker; `generate` fans the jobs
out over GENERATION_CONCURRENCY threads in one process, on SQLite by default.
--mode celery (as deployed): a Celery worker with `--pool=prefork --concurrency=c`
(c processes, one job each at a time) fed through Redis, on PostgreSQL by default;
the timer runs from `start_generation_run` until the database shows every job done.
The worker is started and warmed up (one job per process) before the timer, as a
long-running worker would be.

The scripted server runs in a process of its own, as a real LLM server would: in
the same process its request handling would compete with the pipelines for the
interpreter and be counted against them. Each figure is the median of `--runs` runs,
each on a fresh study.

--database: `sqlite` (a throwaway file), `postgres` (a throwaway database on
127.0.0.1:5432, dropped at the end) or a database URL.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

CALLS_PER_SUMMARY = 2
POSTGRES_ADMIN = "postgres://postgres@127.0.0.1:5432/postgres"
DEFAULT_BROKER = "redis://127.0.0.1:6379/14"


def serve(latency: float, conn) -> None:
    """The scripted server, in its own process, until the parent says stop."""
    # The scripted replies live beside the test fixtures, which import the models:
    # Django is set up here without a database of its own (none is used).
    os.environ.update(DJANGO_SETTINGS_MODULE="config.settings", DEBUG="1", DATABASE_URL="sqlite:///:memory:")
    import django

    django.setup()
    from tests.generation.conftest import honest_model
    from tests.generation.scripted_server import ScriptedServer

    with ScriptedServer(honest_model, latency=latency) as server:
        conn.send(server.base_url)
        conn.recv()


def postgres_database() -> tuple[str, callable]:
    import psycopg

    try:
        psycopg.connect(POSTGRES_ADMIN.replace("postgres://", "postgresql://"), connect_timeout=5).close()
    except psycopg.OperationalError as exc:
        raise SystemExit(f"--database postgres needs PostgreSQL on 127.0.0.1:5432 ({exc})") from None
    name = f"bench_generation_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(POSTGRES_ADMIN.replace("postgres://", "postgresql://"), autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')

    def drop() -> None:
        from django.db import connections

        connections.close_all()
        with psycopg.connect(POSTGRES_ADMIN.replace("postgres://", "postgresql://"), autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    return POSTGRES_ADMIN.rsplit("/", 1)[0] + f"/{name}", drop


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency", type=float, default=1.0, help="seconds per LLM call at the server")
    parser.add_argument("--per-worker", type=int, default=8, help="summaries per unit of concurrency")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 4, 16])
    parser.add_argument("--runs", type=int, default=3, help="runs per concurrency; the median is reported")
    parser.add_argument("--mode", choices=["threads", "celery"], default="threads")
    parser.add_argument("--database", default=None, help="sqlite, postgres or a database URL")
    parser.add_argument("--broker", default=DEFAULT_BROKER, help="broker URL for --mode celery")
    parser.add_argument("--dbdir", default=None, help="where the throwaway SQLite file goes (default: the temp dir)")
    args = parser.parse_args()
    database = args.database or ("postgres" if args.mode == "celery" else "sqlite")
    if args.mode == "celery":
        import kombu

        try:
            with kombu.Connection(args.broker, connect_timeout=5) as connection:
                connection.ensure_connection(max_retries=1)
        except Exception as exc:  # any failure to reach it: say so and stop
            raise SystemExit(f"--mode celery needs the broker at {args.broker} ({exc})") from None

    # The server process starts first, before Django opens any database connection.
    parent, child = multiprocessing.Pipe()
    server = multiprocessing.get_context("spawn").Process(target=serve, args=(args.latency, child), daemon=True)
    server.start()
    child.close()  # so that recv() fails, rather than waits, if the server process dies
    base_url = parent.recv()

    drop = None
    if database == "sqlite":
        workdir = tempfile.mkdtemp(prefix="bench-generation-", dir=args.dbdir)
        database_url = f"sqlite:///{workdir}/bench.sqlite3"
    elif database == "postgres":
        database_url, drop = postgres_database()
    else:
        database_url = database
    os.environ.update(
        DJANGO_SETTINGS_MODULE="config.settings",
        # As a worker runs in production: DEBUG off (with it on, Django keeps every
        # query's SQL in memory, which costs time per query).
        DEBUG="0",
        SECRET_KEY="bench-only-secret",
        DATABASE_URL=database_url,
        CELERY_BROKER_URL=args.broker if args.mode == "celery" else "",
        LOG_LEVEL="WARNING",
        OPENAI_API_KEY="bench",
        OPENAI_BASE_URL=base_url,
        GENERATION_MODEL="scripted-model",
    )
    try:
        run_all(args)
    finally:
        parent.send("stop")
        server.join(timeout=10)
        if drop is not None:
            drop()


class Worker:
    """`celery -A config worker --pool=prefork --concurrency=c` on a queue of its own."""

    def __init__(self, concurrency: int):
        from config.celery import app

        self.queue = f"bench-generation-{uuid.uuid4().hex[:8]}"
        app.conf.task_default_queue = self.queue
        self.log = tempfile.NamedTemporaryFile(prefix="bench-worker-", suffix=".log", delete=False)
        self.process = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "config", "worker", "--pool=prefork"]
            + [f"--concurrency={concurrency}", "-Q", self.queue, "--without-gossip", "--without-mingle"]
            + ["--without-heartbeat", "-l", "info"],
            cwd=ROOT,
            # Workers keep their database connection between tasks, as deployed
            # (DB_CONN_MAX_AGE; with 0, Celery closes it after every task).
            env={**os.environ, "GENERATION_CONCURRENCY": str(concurrency), "DB_CONN_MAX_AGE": "600"},
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 120
        while b"ready." not in Path(self.log.name).read_bytes():
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"the Celery worker did not start; its log: {self.log.name}")
            time.sleep(0.2)

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=60)


def generate_and_wait(study, *, broker: bool) -> tuple[object, float]:
    """Start a run over the study and return it with the seconds until every job is done."""
    from generation.selectors import run_progress
    from generation.services import start_generation_run
    from generation.tasks import generate_summary_task

    started = time.monotonic()
    run = start_generation_run(study=study, pipeline="litsumm", enqueue=generate_summary_task.delay)
    if broker:
        while True:
            progress = run_progress(run)
            if not progress["pending"] and not progress["running"]:
                break
            time.sleep(0.02)
    return run, time.monotonic() - started


def run_all(args) -> None:
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection

    call_command("migrate", verbosity=0)

    from annotate.models import Study
    from annotate.services.rubrics import load_builtin_rubric
    from generation.llm import count_tokens
    from generation.selectors import run_progress
    from tests.generation.conftest import TRIAL, make_source

    count_tokens("load the encoding once per process, as a worker does, before timing")
    rubric = load_builtin_rubric(key="litsumm")
    broker = args.mode == "celery"

    def fresh_study(slug: str, n: int):
        study = Study.objects.create(slug=slug, title="bench", rubric=rubric)
        for i in range(n):
            make_source(study, f"s{i:04d}", TRIAL, title=f"Drug {i}")
        return study

    where = "Celery prefork worker via " + args.broker.split("://")[0] if broker else "threads in one process"
    print(
        f"{where}; database {connection.vendor}; latency {args.latency * 1000:.0f} ms per call, "
        f"{CALLS_PER_SUMMARY} calls per summary; median of {args.runs} runs"
    )
    print(f"{'concurrency':>11} {'summaries':>9} {'seconds':>8} {'per hour':>9} {'ideal/h':>9} {'% ideal':>8}  (runs)")
    for concurrency in args.concurrency:
        os.environ["GENERATION_CONCURRENCY"] = str(concurrency)
        n = max(16, args.per_worker * concurrency)
        ideal = concurrency / (args.latency * CALLS_PER_SUMMARY) * 3600
        worker = Worker(concurrency) if broker else None
        try:
            if worker:  # one job per worker process before the timer (imports, encodings)
                generate_and_wait(fresh_study(f"warm-{concurrency}", concurrency), broker=True)
            shares = []
            for run_index in range(args.runs):
                study = fresh_study(f"bench-{concurrency}-{run_index}", n)
                run, elapsed = generate_and_wait(study, broker=broker)
                done = run_progress(run)["ok"]
                assert done == n, run_progress(run)
                shares.append((done / elapsed * 3600, elapsed))
        finally:
            if worker:
                worker.stop()
        per_hour, elapsed = sorted(shares)[len(shares) // 2]  # the median run (odd --runs)
        runs = " ".join(f"{p / ideal:.1%}" for p, _ in shares)
        share = per_hour / ideal
        print(
            f"{concurrency:>11} {n:>9} {elapsed:>8.2f} {per_hour:>9.0f} {ideal:>9.0f} {share:>8.1%}  ({runs})",
            flush=True,
        )


if __name__ == "__main__":
    main()
