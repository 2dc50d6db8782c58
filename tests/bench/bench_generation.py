"""Throughput of `generate` against the scripted server (not collected by pytest).

    .venv/bin/python tests/bench/bench_generation.py [--latency 0.25] [--per-worker 8]

Every LLM call takes a fixed `latency` at the server; a clean LitSumm summary takes
2 calls (generate, self-consistency). At concurrency c the ideal is
c / (latency × 2) summaries per second. The run uses a throwaway SQLite file, the
real openai client over HTTP, and the same thread fan-out as `generate` without a
broker.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

CALLS_PER_SUMMARY = 2


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency", type=float, default=1.0, help="seconds per LLM call at the server")
    parser.add_argument("--per-worker", type=int, default=8, help="summaries per unit of concurrency")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 4, 16])
    parser.add_argument("--dbdir", default=None, help="where the throwaway SQLite file goes (default: the temp dir)")
    args = parser.parse_args()

    workdir = tempfile.mkdtemp(prefix="bench-generation-", dir=args.dbdir)
    os.environ.update(
        DJANGO_SETTINGS_MODULE="config.settings",
        DEBUG="1",
        DATABASE_URL=f"sqlite:///{workdir}/bench.sqlite3",
        CELERY_BROKER_URL="",
        LOG_LEVEL="WARNING",
        OPENAI_API_KEY="bench",
        GENERATION_MODEL="scripted-model",
    )
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)

    from annotate.models import Study
    from annotate.services import load_builtin_rubric
    from generation.llm import count_tokens
    from generation.selectors import run_progress
    from generation.services import start_generation_run
    from tests.generation.conftest import TRIAL, honest_model, make_source
    from tests.generation.scripted_server import ScriptedServer

    count_tokens("load the encoding once per process, as a worker does, before timing")
    rubric = load_builtin_rubric(key="litsumm")
    print(f"latency {args.latency * 1000:.0f} ms per call, {CALLS_PER_SUMMARY} calls per summary")
    print(f"{'concurrency':>11} {'summaries':>9} {'seconds':>8} {'per hour':>9} {'ideal/h':>9} {'% ideal':>8}")
    for concurrency in args.concurrency:
        study = Study.objects.create(slug=f"bench-{concurrency}", title="bench", rubric=rubric)
        n = max(16, args.per_worker * concurrency)
        for i in range(n):
            make_source(study, f"s{i:04d}", TRIAL, title=f"Drug {i}")
        with ScriptedServer(honest_model, latency=args.latency) as server:
            os.environ["OPENAI_BASE_URL"] = server.base_url
            os.environ["GENERATION_CONCURRENCY"] = str(concurrency)
            started = time.monotonic()
            run = start_generation_run(study=study, pipeline="litsumm")
            elapsed = time.monotonic() - started
        done = run_progress(run)["ok"]
        assert done == n, run_progress(run)
        per_hour = done / elapsed * 3600
        ideal = concurrency / (args.latency * CALLS_PER_SUMMARY) * 3600
        print(f"{concurrency:>11} {done:>9} {elapsed:>8.2f} {per_hour:>9.0f} {ideal:>9.0f} {per_hour / ideal:>8.1%}")


if __name__ == "__main__":
    main()
