"""Throughput of `generate` against the scripted server (not collected by pytest).

    .venv/bin/python tests/bench/bench_generation.py [--latency 0.25] [--per-worker 8]
        [--concurrency 1 4 16] [--runs 3] [--database sqlite|postgres|URL]

Every LLM call takes a fixed `latency` at the server; a clean LitSumm summary takes
2 calls (generate, self-consistency). At concurrency c the ideal is
c / (latency × 2) summaries per second. The run uses the real openai client over HTTP
and the same thread fan-out as `generate` without a broker.

The scripted server runs in a process of its own, as a real LLM server would: in
the same process its request handling would compete with the pipelines for the
interpreter and be counted against them. Each figure is the median of `--runs` runs,
each on a fresh study.

--database: `sqlite` (default: a throwaway file, as on a fresh machine), `postgres`
(a throwaway database on 127.0.0.1:5432, dropped at the end) or a database URL.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

CALLS_PER_SUMMARY = 2
POSTGRES_ADMIN = "postgres://postgres@127.0.0.1:5432/postgres"


def serve(latency: float, conn) -> None:
    """The scripted server, in its own process, until the parent says stop."""
    from tests.generation.conftest import honest_model
    from tests.generation.scripted_server import ScriptedServer

    with ScriptedServer(honest_model, latency=latency) as server:
        conn.send(server.base_url)
        conn.recv()


def postgres_database() -> tuple[str, callable]:
    import psycopg

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
    parser.add_argument("--database", default="sqlite", help="sqlite, postgres or a database URL")
    parser.add_argument("--dbdir", default=None, help="where the throwaway SQLite file goes (default: the temp dir)")
    args = parser.parse_args()

    # The server process starts first, before Django opens any database connection.
    parent, child = multiprocessing.Pipe()
    server = multiprocessing.get_context("spawn").Process(target=serve, args=(args.latency, child), daemon=True)
    server.start()
    base_url = parent.recv()

    drop = None
    if args.database == "sqlite":
        workdir = tempfile.mkdtemp(prefix="bench-generation-", dir=args.dbdir)
        database_url = f"sqlite:///{workdir}/bench.sqlite3"
    elif args.database == "postgres":
        database_url, drop = postgres_database()
    else:
        database_url = args.database
    os.environ.update(
        DJANGO_SETTINGS_MODULE="config.settings",
        DEBUG="1",
        DATABASE_URL=database_url,
        CELERY_BROKER_URL="",
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


def run_all(args) -> None:
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection

    call_command("migrate", verbosity=0)

    from annotate.models import Study
    from annotate.services import load_builtin_rubric
    from generation.llm import count_tokens
    from generation.selectors import run_progress
    from generation.services import start_generation_run
    from tests.generation.conftest import TRIAL, make_source

    count_tokens("load the encoding once per process, as a worker does, before timing")
    rubric = load_builtin_rubric(key="litsumm")
    print(
        f"database {connection.vendor}; latency {args.latency * 1000:.0f} ms per call, "
        f"{CALLS_PER_SUMMARY} calls per summary; median of {args.runs} runs"
    )
    print(f"{'concurrency':>11} {'summaries':>9} {'seconds':>8} {'per hour':>9} {'ideal/h':>9} {'% ideal':>8}  (runs)")
    for concurrency in args.concurrency:
        os.environ["GENERATION_CONCURRENCY"] = str(concurrency)
        n = max(16, args.per_worker * concurrency)
        ideal = concurrency / (args.latency * CALLS_PER_SUMMARY) * 3600
        shares = []
        for run_index in range(args.runs):
            study = Study.objects.create(slug=f"bench-{concurrency}-{run_index}", title="bench", rubric=rubric)
            for i in range(n):
                make_source(study, f"s{i:04d}", TRIAL, title=f"Drug {i}")
            started = time.monotonic()
            run = start_generation_run(study=study, pipeline="litsumm")
            elapsed = time.monotonic() - started
            done = run_progress(run)["ok"]
            assert done == n, run_progress(run)
            shares.append((done / elapsed * 3600, elapsed))
        per_hour, elapsed = sorted(shares)[len(shares) // 2]  # the median run (odd --runs)
        runs = " ".join(f"{p / ideal:.1%}" for p, _ in shares)
        share = per_hour / ideal
        print(
            f"{concurrency:>11} {n:>9} {elapsed:>8.2f} {per_hour:>9.0f} {ideal:>9.0f} {share:>8.1%}  ({runs})",
            flush=True,
        )


if __name__ == "__main__":
    main()
