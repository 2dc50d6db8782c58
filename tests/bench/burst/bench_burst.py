"""A crowd arriving at once (`make bench-burst`): a locust run of the crowd path.

Starts our server in one shape, makes a crowd study (setup_study.py), runs locust headless
(locustfile.py: Poisson arrivals, consent, instructions, three qualification items, ten
ratings, with think times), then reports per step p50, p95, p99 and errors (locust's own
statistics), the items over k and the answers stored against the submits accepted (from
the database), and the CPU used by the load generator (locust, getrusage of the child) and
by the server's processes. Printed and written to var/bench-burst/<UTC time>/report.json.

Shapes (--shape):
  run         what `make run` serves: `make run` (prepare --demo, then gunicorn with
              config/gunicorn.conf.py, DEBUG=1) on SQLite, a file under the output folder.
  production  docs/deployment.md: the release step (migrate, collectstatic), gunicorn with
              config/gunicorn.conf.py, DEBUG=0, PostgreSQL (database BURST_PG_DB, made afresh),
              DB_CONN_MAX_AGE=600, one Celery worker (the Procfile's, CELERY_CONCURRENCY=1) on
              Redis (database 13; nothing is flushed).
Both trust one proxy (TRUSTED_PROXY_COUNT=1): every participant sends an X-Forwarded-For of
its own, as a crowd arrives from many addresses.

    python tests/bench/burst/bench_burst.py --shape production --participants 300 --arrival-seconds 60
    python tests/bench/burst/bench_burst.py --shape run --find-max-rate --think-scale 0.1
    python tests/bench/burst/bench_burst.py --smoke

--find-max-rate raises the arrival rate step by step (a fresh study each step, on the same
server) and reports the largest rate at which every step's p95 stays within --p95-ms (300).
--smoke (CI): 5 participants in 5 s, no think time, the `make run` shape; exit 1 when a
figure is missing or a step errors. At any size the run exits 1 when an item has more than
k raters or the answers stored differ from the submits accepted.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
sys.path.insert(0, str(HERE.parent / "peers"))
from benchlib import Server, check_port, clean_env, port_free, tree_pids, wait_http_200  # noqa: E402

BIN = ROOT / ".venv" / "bin"
PY = str(BIN / "python")
# locust runs from a virtualenv of its own (tests/bench/burst/requirements.txt says why).
LOCUST_VENV = Path(os.environ.get("BURST_LOCUST_VENV", ROOT / "var" / "bench-burst" / "venv"))
PG_DB = os.environ.get("BURST_PG_DB", "ratings_bench_burst")
REDIS_URL = os.environ.get("BURST_REDIS_URL", "redis://127.0.0.1:6379/13")
SECRET_KEY = "bench-burst-not-a-secret-" + "0" * 40
# Every step a participant goes through: a run without one of them is missing a figure.
STEPS = [
    "arrive",
    "next step",
    "consent page",
    "consent",
    "instructions page",
    "instructions",
    "item page",
    "qualification: draft",
    "qualification: submit",
    "feedback page",
    "rating: draft",
    "rating: submit",
    "end page",
]


def log(message: str) -> None:
    print(f"[bench-burst] {time.strftime('%H:%M:%S')} {message}", file=sys.stderr, flush=True)


# --- the server ------------------------------------------------------------------------------


class Shape:
    def __init__(self, name: str, out: Path, port: int):
        self.name, self.out, self.port = name, out, port
        self.base = f"http://127.0.0.1:{port}"
        self.servers: list[Server] = []
        home = out / "home"
        home.mkdir(parents=True, exist_ok=True)
        common = {"TRUSTED_PROXY_COUNT": "1", "MPLCONFIGDIR": str(out / "matplotlib")}
        if name == "run":
            # What the Makefile gets from a shell: it sets DEBUG=1 itself; PORT picks the port.
            self.env = clean_env(
                {**common, "PORT": str(port), "DATABASE_URL": f"sqlite:///{out / 'db.sqlite3'}"}, home=str(home)
            )
            self.command_env = {**self.env, "DEBUG": "1"}
        else:
            self.env = clean_env(
                {
                    **common,
                    "DEBUG": "0",
                    "SECRET_KEY": SECRET_KEY,
                    "DATABASE_URL": f"postgres://postgres@127.0.0.1:5432/{PG_DB}",
                    "DB_CONN_MAX_AGE": "600",
                    "CELERY_BROKER_URL": REDIS_URL,
                    "CELERY_CONCURRENCY": "1",
                    "STATIC_ROOT": str(out / "static"),
                    "WEB_BIND": f"127.0.0.1:{port}",
                    "MALLOC_ARENA_MAX": "2",
                },
                home=str(home),
            )
            self.command_env = self.env

    def manage(self, *args: str) -> str:
        done = subprocess.run(
            [PY, "manage.py", *args], cwd=ROOT, env=self.command_env, capture_output=True, text=True, timeout=1800
        )
        if done.returncode != 0:
            raise SystemExit(f"manage.py {' '.join(args)} failed:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
        return done.stdout

    def start(self) -> None:
        if not port_free(self.port):
            raise SystemExit(f"port {self.port} is busy: pass --port")
        log_path = str(self.out / "server.log")
        if self.name == "run":
            web = Server(["make", "run"], self.env, str(ROOT), log_path).start()
        else:
            _fresh_database(PG_DB)
            log("the release step: migrate, collectstatic")
            self.manage("migrate", "--noinput")
            self.manage("collectstatic", "--noinput", "-v", "0")
            web = Server(
                [str(BIN / "gunicorn"), "config.wsgi:application", "-c", "config/gunicorn.conf.py"],
                self.env,
                str(ROOT),
                log_path,
            ).start()
            worker = Server(
                [str(BIN / "celery"), "-A", "config", "worker", "--concurrency=1", "--max-tasks-per-child=50"]
                + ["--loglevel=INFO", "-n", f"burst-{self.port}@%h"],
                self.env,
                str(ROOT),
                str(self.out / "worker.log"),
            ).start()
            self.servers.append(worker)
        self.servers.insert(0, web)
        if wait_http_200(self.base + "/healthz", web.t0, 600, poll_s=0.2, proc=web.proc) is None:
            self.stop()
            raise SystemExit(f"the server did not answer; see {log_path}")
        log(f"{self.name} shape serving on {self.base}")

    def stop(self) -> None:
        for server in self.servers:
            server.stop()

    def cpu_seconds(self) -> dict[str, float]:
        """CPU used so far by our server's processes (and, in production, the Celery worker's
        and the PostgreSQL server's, which other work on the machine shares), with the
        children they reaped (gunicorn's replaced workers)."""
        out = {"server": sum(_cpu(pid) for server in self.servers[:1] for pid in tree_pids(server.pid))}
        if self.name == "production":
            out["celery_worker"] = sum(_cpu(pid) for pid in tree_pids(self.servers[1].pid))
            out["postgresql_all"] = sum(_cpu(pid) for pid in _postgres_pids())
        return out


def _cpu(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            fields = handle.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return sum(int(x) for x in fields[11:15]) / os.sysconf("SC_CLK_TCK")  # utime stime cutime cstime


def _postgres_pids() -> list[int]:
    pids = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/comm") as handle:
                    if handle.read().strip() == "postgres":
                        pids.append(int(name))
            except OSError:
                continue
    return pids


def _fresh_database(name: str) -> None:
    import psycopg

    with psycopg.connect("postgresql://postgres@127.0.0.1:5432/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')


def locust_bin() -> str:
    """The locust of LOCUST_VENV, installed there first when it is missing or older than
    the requirements file."""
    requirements = HERE / "requirements.txt"
    stamp = LOCUST_VENV / ".installed"
    if not stamp.exists() or stamp.stat().st_mtime < requirements.stat().st_mtime:
        log(f"installing locust into {LOCUST_VENV}")
        subprocess.run([sys.executable, "-m", "venv", str(LOCUST_VENV)], check=True)
        pip = [str(LOCUST_VENV / "bin" / "python"), "-m", "pip", "install", "--quiet"]
        subprocess.run([*pip, "-r", str(requirements)], check=True)
        stamp.touch()
    return str(LOCUST_VENV / "bin" / "locust")


# --- one run ---------------------------------------------------------------------------------


def run_crowd(shape: Shape, *, participants: int, arrival_seconds: float, think_scale: float, k: int, tag: str):
    """One crowd on a fresh study: the report of the run (figures, counts, checks)."""
    out = shape.out / tag
    out.mkdir(parents=True, exist_ok=True)
    slug = f"burst-{tag}"
    setup = [PY, str(HERE / "setup_study.py")]
    made = subprocess.run(
        [
            *setup,
            "make",
            "--slug",
            slug,
            "--participants",
            str(participants),
            "--k",
            str(k),
            "--out",
            str(out / "links.json"),
        ],
        cwd=ROOT,
        env=shape.command_env,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    if made.returncode != 0:
        raise SystemExit(f"setup_study.py make failed:\n{made.stderr[-3000:]}")
    # Each participant: 2-10 s x 5 onboarding steps and feedback pages, 20-60 s x 13 items.
    longest = arrival_seconds + think_scale * (10 * 6 + 60 * 13) + 120 + participants
    env = {
        **os.environ,
        "BURST_LINKS": str(out / "links.json"),
        "BURST_ARRIVAL_SECONDS": str(arrival_seconds),
        "BURST_THINK_SCALE": str(think_scale),
        "BURST_COUNTS": str(out / "counts.json"),
    }
    argv = [locust_bin(), "-f", str(HERE / "locustfile.py"), "--headless", "--host", shape.base]
    argv += ["-u", str(participants), "-r", str(max(participants, 1)), "--run-time", f"{int(longest)}s"]
    argv += ["--only-summary", "--loglevel", "WARNING", "--stop-timeout", "5"]
    log(f"{participants} participants within {arrival_seconds:g} s, think x{think_scale:g} ({tag})")
    load_start, cpu_start = os.getloadavg(), shape.cpu_seconds()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.monotonic()
    with open(out / "locust.log", "w") as locust_log:
        done = subprocess.run(argv, cwd=HERE, env=env, stdout=locust_log, stderr=subprocess.STDOUT)
    wall = time.monotonic() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu_end, load_end = shape.cpu_seconds(), os.getloadavg()
    checked = subprocess.run(
        [*setup, "check", "--slug", slug], cwd=ROOT, env=shape.command_env, capture_output=True, text=True, timeout=600
    )
    if checked.returncode != 0:
        raise SystemExit(f"setup_study.py check failed:\n{checked.stderr[-3000:]}")
    counts_path = out / "counts.json"
    counts = json.loads(counts_path.read_text()) if counts_path.exists() else {}
    locust_cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {
        "participants": participants,
        "arrival_seconds": arrival_seconds,
        "arrival_rate_per_s": round(participants / arrival_seconds, 3) if arrival_seconds else None,
        "think_scale": think_scale,
        "k": k,
        "locust_exit": done.returncode,
        "wall_s": round(wall, 1),
        "steps": counts.pop("steps", {}),
        "counts": counts,
        "database": json.loads(checked.stdout.strip().splitlines()[-1]),
        "cpu_s": {
            "load_generator": round(locust_cpu, 1),
            **{name: round(cpu_end[name] - cpu_start[name], 1) for name in cpu_end},
        },
        "cpu_share_of_two_cores": {
            "load_generator": round(locust_cpu / (wall * (os.cpu_count() or 1)), 3),
            **{name: round((cpu_end[name] - cpu_start[name]) / (wall * (os.cpu_count() or 1)), 3) for name in cpu_end},
        },
        "loadavg": {"start": [round(x, 2) for x in load_start], "end": [round(x, 2) for x in load_end]},
        "folder": str(out),
    }


def problems_of(run: dict, *, p95_ms: float | None) -> list[str]:
    """What is wrong with a run. Always: a step with no figure or with errors, a
    participant who did not finish, an item over k, answers stored != submits accepted,
    an answer stored twice. With p95_ms: a step whose p95 is over it."""
    problems = []
    steps, counts, db = run["steps"], run["counts"], run["database"]
    for step in STEPS:
        figures = steps.get(step)
        if not figures or not figures["requests"] or any(figures[f] is None for f in ("p50_ms", "p95_ms", "p99_ms")):
            problems.append(f"no figure for the step {step!r}")
    for step, figures in steps.items():
        if figures["errors"] and step != "all":
            problems.append(f"{step}: {figures['errors']} errors")
        if p95_ms is not None and step != "all" and (figures["p95_ms"] or 0) > p95_ms:
            problems.append(f"{step}: p95 {figures['p95_ms']:.0f} ms > {p95_ms:.0f} ms")
    if not counts:
        problems.append("the load generator wrote no counts")
    elif counts.get("finished") != run["participants"]:
        problems.append(
            f"{counts.get('finished')} of {run['participants']} participants finished: {counts.get('problems')}"
        )
    if db["items_over_k"] != 0:
        problems.append(f"{db['items_over_k']} items have more than k raters")
    if db["answers_stored"] != counts.get("accepted_submits"):
        problems.append(f"answers stored {db['answers_stored']} != submits accepted {counts.get('accepted_submits')}")
    if db["qualification_answers_stored"] != counts.get("accepted_qualification_submits"):
        problems.append(
            f"qualification answers stored {db['qualification_answers_stored']} != "
            f"accepted {counts.get('accepted_qualification_submits')}"
        )
    if db["items_stored_more_than_once"] != 0:
        problems.append(f"{db['items_stored_more_than_once']} items have their answer stored more than once")
    return problems


def table(run: dict) -> str:
    lines = [
        f"{run['participants']} participants within {run['arrival_seconds']:g} s "
        f"({run['arrival_rate_per_s']}/s), think x{run['think_scale']:g}, k={run['k']}; {run['wall_s']} s",
        "| step | requests | errors | p50 ms | p95 ms | p99 ms | max ms |",
        "|---|---|---|---|---|---|---|",
    ]
    for step, f in run["steps"].items():
        cells = [step, f["requests"], f["errors"], f["p50_ms"], f["p95_ms"], f["p99_ms"], f["max_ms"]]
        lines.append(
            "| "
            + " | ".join("n/a" if c is None else f"{c:.0f}" if isinstance(c, float) else str(c) for c in cells)
            + " |"
        )
    db, counts = run["database"], run["counts"]
    lines.append(
        f"items over k: {db['items_over_k']}; answers stored {db['answers_stored']} / submits accepted "
        f"{counts.get('accepted_submits')} (qualification {db['qualification_answers_stored']} / "
        f"{counts.get('accepted_qualification_submits')}); stored more than once: {db['items_stored_more_than_once']}"
    )
    lines.append(
        f"requests resent after the server closed an idle connection: {counts.get('resent_after_closed_connection')}"
    )
    lines.append(f"CPU s: {run['cpu_s']} (share of the cores: {run['cpu_share_of_two_cores']})")
    lines.append(f"load average at start {run['loadavg']['start']}, at end {run['loadavg']['end']}")
    return "\n".join(lines)


# --- main ------------------------------------------------------------------------------------


def find_max_rate(shape: Shape, args) -> dict:
    """Raise the arrival rate (participants per second) step by step; stop at the first
    rate where a step's p95 is over the limit or anything errs."""
    rate, steps, best = args.start_rate, [], None
    for i in range(args.max_steps):
        participants = max(1, round(rate * args.arrival_seconds))
        run = run_crowd(
            shape,
            participants=participants,
            arrival_seconds=args.arrival_seconds,
            think_scale=args.think_scale,
            k=args.k,
            tag=f"rate{i}",
        )
        run["problems"] = problems_of(run, p95_ms=args.p95_ms)
        steps.append(run)
        print(table(run), flush=True)
        if run["problems"]:
            log(f"rate {rate:g}/s misses: {run['problems'][:3]}")
            break
        best = rate
        rate = round(rate * args.rate_factor, 3)
    return {"p95_limit_ms": args.p95_ms, "largest_rate_per_s": best, "steps": steps}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shape", choices=["run", "production"], default="run")
    parser.add_argument("--participants", type=int, default=100)
    parser.add_argument("--arrival-seconds", type=float, default=60.0)
    parser.add_argument("--think-scale", type=float, default=1.0, help="times the think times (0: none)")
    parser.add_argument("--k", type=int, default=3, help="raters per item")
    parser.add_argument("--p95-ms", type=float, default=300.0, help="--find-max-rate's limit per step")
    parser.add_argument("--find-max-rate", action="store_true")
    parser.add_argument("--start-rate", type=float, default=1.0, help="participants per second, first step")
    parser.add_argument("--rate-factor", type=float, default=1.5)
    parser.add_argument("--max-steps", type=int, default=6)
    parser.add_argument("--port", type=int, default=int(os.environ.get("BURST_PORT", "18300")))
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--smoke", action="store_true", help="5 participants, no think time (CI)")
    args = parser.parse_args()
    if args.smoke:
        args.shape, args.participants, args.arrival_seconds, args.think_scale = "run", 5, 5.0, 0.0
        args.find_max_rate = False
    check_port(args.port, "--port")
    out = args.out or ROOT / "var" / "bench-burst" / time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    out.mkdir(parents=True, exist_ok=True)
    shape = Shape(args.shape, out, args.port)
    report = {
        "shape": args.shape,
        "started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "nproc": os.cpu_count(),
        "commit": subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip(),
    }
    shape.start()
    try:
        if args.find_max_rate:
            report["find_max_rate"] = found = find_max_rate(shape, args)
            print(
                f"Largest arrival rate with every step's p95 within {args.p95_ms:g} ms: "
                f"{found['largest_rate_per_s']} participants/s",
                flush=True,
            )
            # Over k and stored != accepted fail at any size; a step over the limit only ends the search.
            problems = [p for run in found["steps"] for p in run["problems"] if "p95" not in p and "errors" not in p]
        else:
            run = run_crowd(
                shape,
                participants=args.participants,
                arrival_seconds=args.arrival_seconds,
                think_scale=args.think_scale,
                k=args.k,
                tag="crowd",
            )
            run["problems"] = problems_of(run, p95_ms=None)
            run["p95_over_500_ms"] = [s for s, f in run["steps"].items() if (f["p95_ms"] or 0) > 500]
            report["run"] = run
            print(table(run), flush=True)
            problems = (
                run["problems"] if args.smoke else [p for p in run["problems"] if "k raters" in p or "stored" in p]
            )
    finally:
        shape.stop()
    (out / "report.json").write_text(json.dumps(report, indent=2))
    print(f"Report: {out / 'report.json'}")
    if problems:
        print("The crowd run failed:\n  " + "\n  ".join(problems), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
