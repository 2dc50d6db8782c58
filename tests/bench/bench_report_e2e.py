"""Benchmark: the demo report as a user of `make run` sees it, end to end.

Run:  .venv/bin/python tests/bench/bench_report_e2e.py [--rounds 3] [--port 20210]
          [--order demo-litsumm,demo-factpico] [--modes cold,start,cached]
          [--cadence page|old|fast] [--ask-after 0]

Not collected by pytest. Builds once a SQLite database with the demo loaded as `make run`
loads it (`load_demo --with-answers`, `load_question_demo --with-answers`; no report
computed), then per round copies it and starts gunicorn the way `make run` does
(`manage.py prepare --demo`, then config/gunicorn.conf.py, DEBUG=1, 2 workers × 8 threads,
MALLOC_ARENA_MAX=2). Once /healthz answers (and ``--ask-after`` seconds more), it logs in
as the demo admin and asks for each study of ``--order`` in turn, doing what the page does
(static/js/report.js): while the report is computed, poll /analysis/<slug>/progress, then
load the page; while plots are pending, load the page again and fetch each plot's SVG as
it appears. ``--cadence page`` polls as report.js does, ``old`` as it did before its
polling was tuned, ``fast`` every 0.05 s (when the server has it).

Modes, alternated in each round: ``cold``, no report computed ahead (WEB_DEMO_REPORTS=0:
what a lab with its own study gets: the first report of a fresh web worker, imports
included); ``start``, asked as soon as the server answers, while `compute_reports`
(config.demo_reports) is computing the demo's reports; ``cached``, asked once it is done
(the first visit served from the cache).

Printed per study and round: seconds from asking to the numbers on the page, and to the
page whole (every plot's SVG fetched); then medians over the rounds, with the load average.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from statistics import median

import requests
from urllib3.util.retry import Retry

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = ROOT / "var" / "bench-e2e-template.sqlite3"
DB = ROOT / "var" / "bench-e2e.sqlite3"
PASSWORD = "rate-summaries-2026"  # the demo's default password with DEBUG=1 (README)
# What static/js/report.js waits between polls, (first, growth, most): the progress while
# computing, then the page while plots are drawn. "old": report.js before its polling was
# tuned (every 1 s, every 2 s); "fast": when the server has it.
CADENCES = {
    "page": {"progress": (0.25, 1.5, 1.0), "plots": (0.5, 1.5, 2.0)},
    "old": {"progress": (1.0, 1.0, 1.0), "plots": (2.0, 1.0, 2.0)},
    "fast": {"progress": (0.05, 1.0, 0.05), "plots": (0.05, 1.0, 0.05)},
}


def waits(first: float, growth: float, most: float):
    wait = first
    while True:
        yield wait
        wait = min(wait * growth, most)


IMG = re.compile(r'<img src="([^"]+)"')


def environment(port: int, demo_reports: bool = True) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "CELERY_BROKER_URL", "DEMO_PASSWORD")}
    env.update(
        DATABASE_URL=f"sqlite:///{DB}",
        DJANGO_SETTINGS_MODULE="config.settings",
        DEBUG="1",
        WEB_BIND=f"127.0.0.1:{port}",
        MALLOC_ARENA_MAX="2",
        WEB_DEMO_REPORTS="1" if demo_reports else "0",
    )
    return env


def build_template() -> None:
    """The demo loaded as `make run` loads it, no report computed (copied for each round)."""
    if TEMPLATE.exists():
        return
    env = environment(0) | {"DATABASE_URL": f"sqlite:///{TEMPLATE}"}
    manage = [sys.executable, str(ROOT / "manage.py")]
    for args in (
        ["migrate", "-v0"],
        ["load_demo", "--with-answers"],
        ["load_question_demo", "--with-answers"],
        ["collectstatic", "--noinput", "-v0"],
    ):
        subprocess.run([*manage, *args], check=True, env=env, cwd=ROOT, stdout=subprocess.DEVNULL)


def start_server(port: int, log, demo_reports: bool) -> tuple[subprocess.Popen, float]:
    for suffix in ("", "-wal", "-shm"):
        Path(f"{DB}{suffix}").unlink(missing_ok=True)
    shutil.copy(TEMPLATE, DB)
    started = time.monotonic()
    venv = ROOT / ".venv" / "bin"
    server = subprocess.Popen(  # what `make run` runs: prepare, then gunicorn
        [
            "bash",
            "-c",
            f"{venv / 'python'} manage.py prepare --demo && "
            f"exec {venv / 'gunicorn'} config.wsgi:application -c config/gunicorn.conf.py",
        ],
        env=environment(port, demo_reports),
        cwd=ROOT,
        stdout=log,
        stderr=log,
        start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}"
    while True:
        if server.poll() is not None:
            raise SystemExit(f"gunicorn exited ({server.returncode}); see its log")
        try:
            if requests.get(f"{base}/healthz", timeout=2).status_code == 200:
                return server, time.monotonic() - started
        except requests.ConnectionError:
            pass
        time.sleep(0.05)


def demo_reports_done() -> int:
    """How many reports are stored with every plot (compute_reports at start, config.demo_reports)."""
    with sqlite3.connect(DB) as db:
        return db.execute(
            "SELECT COUNT(*) FROM analysis_analysisresult WHERE status = 'done' AND plots_done_at IS NOT NULL"
        ).fetchone()[0]


def stop_server(server: subprocess.Popen) -> None:
    os.killpg(server.pid, signal.SIGTERM)  # its own session: the master, its workers, any child it started
    try:
        server.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(server.pid, signal.SIGKILL)
        server.wait()


def login(base: str) -> requests.Session:
    session = requests.Session()
    # A kept-alive connection that gunicorn closed meanwhile is tried again, as a browser does.
    retry = Retry(total=3, connect=3, read=3, allowed_methods=("GET",), backoff_factor=0)
    session.mount("http://", requests.adapters.HTTPAdapter(max_retries=retry))
    session.get(f"{base}/accounts/login/").raise_for_status()
    response = session.post(
        f"{base}/accounts/login/",
        data={"username": "admin", "password": PASSWORD, "csrfmiddlewaretoken": session.cookies["csrftoken"]},
        headers={"Referer": f"{base}/accounts/login/"},
    )
    response.raise_for_status()
    if "/accounts/login" in response.url:
        raise SystemExit("login as the demo admin failed")
    return session


def ask(session: requests.Session, base: str, slug: str, cadence: dict[str, tuple]) -> dict[str, float]:
    """Seconds from asking for the report of `slug` to its numbers on the page and to the page
    whole, doing what the page and static/js/report.js do."""
    url = f"{base}/analysis/{slug}/?phase=all"
    start = time.monotonic()
    html = session.get(url).text
    while 'id="report-progress"' in html:
        delays = waits(*cadence["progress"])
        while True:  # report.js: poll the progress endpoint until done or failed, then reload
            time.sleep(next(delays))
            status = session.get(f"{base}/analysis/{slug}/progress?phase=all").json()["status"]
            if status in ("done", "failed"):
                break
        html = session.get(url).text
    numbers = time.monotonic() - start
    fetched: set[str] = set()
    delays = waits(*cadence["plots"])
    while True:
        for src in IMG.findall(html):
            if src not in fetched and "/plots/" in src:
                session.get(f"{base}{src}").raise_for_status()
                fetched.add(src)
        if "data-pending" not in html:
            break
        time.sleep(next(delays))
        html = session.get(url).text
    return {"numbers": numbers, "whole": time.monotonic() - start, "plots": len(fetched), "load": os.getloadavg()[0]}


# cold: no report computed ahead (WEB_DEMO_REPORTS=0: a lab's own study); start: asked as
# soon as the server answers, compute_reports just started; cached: asked once it is done.
MODES = ("cold", "start", "cached")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--port", type=int, default=int(os.environ.get("BENCH_E2E_PORT", "20210")))
    parser.add_argument("--order", default="demo-litsumm,demo-factpico", help="studies asked for, one after the other")
    parser.add_argument("--cadence", choices=tuple(CADENCES), default="page")
    parser.add_argument("--modes", default="cold,cached", help=f"comma-separated, of {', '.join(MODES)}")
    parser.add_argument("--ask-after", type=float, default=0.0, help="seconds between the server up and logging in")
    parser.add_argument("--rebuild", action="store_true", help="build the demo database anew")
    parser.add_argument("--json", action="store_true", help="print each round as JSON too")
    args = parser.parse_args()
    if args.rebuild:
        TEMPLATE.unlink(missing_ok=True)
    build_template()
    cadence = CADENCES[args.cadence]
    slugs = args.order.split(",")
    modes = args.modes.split(",")
    base = f"http://127.0.0.1:{args.port}"
    rows: dict[tuple[str, str], list[dict]] = {(m, slug): [] for m in modes for slug in slugs}
    log_path = ROOT / "var" / "bench-e2e-gunicorn.log"
    print(f"`make run`'s shape on port {args.port}; cadence {args.cadence}; asked {args.ask_after:g} s after start")
    print(f"{'round':>5} {'mode':6} {'study':16} {'numbers s':>10} {'whole s':>8} {'plots':>5} {'load':>5}")
    with open(log_path, "a") as log:
        for r in range(args.rounds):
            for mode in modes:  # alternated within each round
                server, up = start_server(args.port, log, demo_reports=mode != "cold")
                try:
                    time.sleep(args.ask_after)
                    if mode == "cached":
                        while demo_reports_done() < 4:
                            time.sleep(0.5)
                    session = login(base)
                    for slug in slugs:
                        row = ask(session, base, slug, cadence) | {"up": up}
                        rows[mode, slug].append(row)
                        print(
                            f"{r + 1:5d} {mode:6} {slug:16} {row['numbers']:10.2f} {row['whole']:8.2f} "
                            f"{row['plots']:5d} {row['load']:5.1f}",
                            flush=True,
                        )
                        if args.json:
                            print(json.dumps({"round": r + 1, "mode": mode, "study": slug, **row}))
                finally:
                    stop_server(server)
    print("medians (numbers: seconds from asking to the numbers on the page; whole: to every plot's SVG)")
    for (mode, slug), got in rows.items():
        if got:
            print(
                f"{'':5} {mode:6} {slug:16} {median(x['numbers'] for x in got):10.2f} "
                f"{median(x['whole'] for x in got):8.2f} {got[0]['plots']:5d} {median(x['load'] for x in got):5.1f}"
            )


if __name__ == "__main__":
    main()
