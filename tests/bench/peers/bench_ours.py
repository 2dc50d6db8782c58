#!/usr/bin/env python3
"""Our platform (the summary-rating Django + DRF app), same figures as bench_labelstudio.py.

Run through run_ours.sh (it builds the venvs). Prints one JSON object on stdout and writes it to
results/ours-<config>-<UTC time>.json. Progress goes to stderr.

Configurations (OURS_CONFIG):
  a  what `make run` serves: `make run` = migrate + load_demo + gunicorn with the project's
     config/gunicorn.conf.py (2 gthread workers x 8 threads, app preloaded before the fork) and
     DEBUG=1, SQLite at var/db.sqlite3 of the checkout (the default DATABASE_URL); the file is
     deleted at the start of a run.
  b  production shape (docs/deployment.md): the same gunicorn config, OURS_WORKERS workers (default 2,
     the project's WEB_CONCURRENCY default) x 8 threads, DEBUG=0, PostgreSQL 127.0.0.1:5432 database
     perf_ours (dropped and created by this script), DB_CONN_MAX_AGE=600.
  c  gunicorn as in b, on SQLite (a file under the run dir), DB_CONN_MAX_AGE=0 (the default).

Copied from ../shared/bench-peers/ (2026-11-25) into the project, as that harness's README allows,
because the project's start command changed (`make run` serves with gunicorn) and the
shared copy is read-only; only bench_ours.py differs (configs a-c above; results/ under this folder).
Env knobs as in bench_labelstudio.py (ROUNDS, COLD_RUNS, IMPORT_RUNS, PAGE_RUNS, SEQ_N, CONC_N,
THREADS, PHASE_MAX_S, TASKS), plus OURS_PG_DB (perf_ours: config b's database, dropped and created), OURS_DIR ($TMPDIR/bench-ours, a clean clone of the project), OURS_PORT (18100/18110/18120),
OURS_WORKERS (2*nproc+1), SERVE_COLD_RUNS (3: extra cold starts of `make serve` alone, config a),
FORM_N (200: extra sequential phase through the HTML form, what the rating page posts on Submit).
"""
import json
import math
import os
import shutil
import sqlite3
import subprocess
import sys
import time
from urllib.parse import urlsplit

import requests

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from benchlib import (TASKS, Server, check_port, calibrate_cpu, clean_env, log, median, pct, pkg_version, port_free, r3,  # noqa: E402
                      pss_mib, rss_mib, tree_pids, venv_facts, wait_http_200)
import gen_tasks  # noqa: E402
import load  # noqa: E402
import ours_jsonl  # noqa: E402

CONFIG = os.environ.get("OURS_CONFIG", "a")
if CONFIG not in ("a", "b", "c"):
    raise SystemExit("OURS_CONFIG must be a, b or c")
PEERS = os.environ.get("PEERS_DIR", os.path.join(os.environ.get("TMPDIR", "/tmp"), "peers"))
OURS = os.environ.get("OURS_DIR", os.path.join(os.environ.get("TMPDIR", "/tmp"), "bench-ours"))
VENV = os.path.join(OURS, ".venv")
PY = os.path.join(VENV, "bin", "python")
TOOLS_VENV = os.path.dirname(os.path.dirname(os.environ["TOOLS_PYTHON"])) if os.environ.get("TOOLS_PYTHON") else os.path.join(PEERS, "tools-venv")
RUN_DIR = os.path.join(PEERS, "data", f"ours-{CONFIG}")
PORT = check_port(int(os.environ.get("OURS_PORT", {"a": "18100", "b": "18110", "c": "18120"}[CONFIG])), "OURS_PORT")
BASE = f"http://127.0.0.1:{PORT}"
LOGIN_PATH = "/accounts/login/"
WORKERS = int(os.environ.get("OURS_WORKERS", "2"))
# gunicorn's default worker timeout is 30 s. Each worker imports the URLconf on its first request, and
# annotate.urls imports the analysis stack (pandas, scipy.stats, statsmodels, matplotlib): ~4.5 s of CPU
# per worker. With 5 workers on 2 cores shared with other work (load 10-12 on 2026-11-23), every
# worker was killed mid-import (WORKER TIMEOUT) and started again, and the server never answered. The
# timeout is therefore raised (knob; 30 = gunicorn's default, what doccano runs with).
GUNICORN_TIMEOUT = int(os.environ.get("OURS_GUNICORN_TIMEOUT", "120"))
ROUNDS = int(os.environ.get("ROUNDS", "3"))
COLD_RUNS = int(os.environ.get("COLD_RUNS", "5"))
SERVE_COLD_RUNS = int(os.environ.get("SERVE_COLD_RUNS", "3"))
IMPORT_RUNS = int(os.environ.get("IMPORT_RUNS", "3"))
PAGE_RUNS = int(os.environ.get("PAGE_RUNS", "5"))
SEQ_N = int(os.environ.get("SEQ_N", "200"))
CONC_N = int(os.environ.get("CONC_N", "400"))
THREADS = int(os.environ.get("THREADS", "8"))
FORM_N = int(os.environ.get("FORM_N", "200"))
PHASE_MAX_S = float(os.environ.get("PHASE_MAX_S", "300"))
START_DEADLINE_S = 300
PG_DB = os.environ.get("OURS_PG_DB", "perf_ours")  # dropped and created by config b: give each user their own
PG_URL = f"postgres://postgres@127.0.0.1:5432/{PG_DB}"
SQLITE_A = os.path.join(OURS, "var", "db.sqlite3")   # make run's default DATABASE_URL
SQLITE_C = os.path.join(RUN_DIR, "db.sqlite3")

N_RATERS = 8
RATERS = [f"benchrater{k}" for k in range(1, N_RATERS + 1)]
ADMIN = "benchadmin"
PASSWORD = "bench-pw-Xq-2026"
# every submit needs its own assignment (a submitted one is final): k raters per item
SUBMITS = ROUNDS * (SEQ_N + CONC_N) + SEQ_N + FORM_N
K = max(1, math.ceil(SUBMITS / TASKS))
if K > N_RATERS:
    raise SystemExit(f"{SUBMITS} submits need more than {N_RATERS} raters x {TASKS} items: lower SEQ_N/CONC_N/ROUNDS")

LIVE = []


def ours_env():
    if CONFIG == "a":
        # exactly what the Makefile gets from a shell: it exports DEBUG=1 itself; PORT picks the port
        return clean_env({"PORT": str(PORT)}, home=os.path.join(RUN_DIR, "home"))
    extra = {"DEBUG": "0", "SECRET_KEY": "bench-only-not-a-secret-0123456789abcdef",
             "WEB_BIND": f"127.0.0.1:{PORT}", "WEB_CONCURRENCY": str(WORKERS), "WEB_THREADS": "8"}
    if CONFIG == "b":
        extra.update({"DATABASE_URL": PG_URL, "DB_CONN_MAX_AGE": "600"})
    else:
        extra.update({"DATABASE_URL": f"sqlite:///{SQLITE_C}"})
    return clean_env(extra, home=os.path.join(RUN_DIR, "home"))


def cmd_env():
    """Environment of management commands: the server's (config a: with the Makefile's DEBUG=1)."""
    env = ours_env()
    if CONFIG == "a":
        env["DEBUG"] = "1"
    return env


def manage(*args, timeout=900, check=True, input=None):
    return subprocess.run([PY, "manage.py", *args], env=cmd_env(), cwd=OURS, capture_output=True, text=True,
                          timeout=timeout, check=check, input=input)


def server_argv(kind):
    if kind == "make-run":
        return ["make", "run"]
    if kind == "make-serve":
        return ["make", "serve"]
    return [os.path.join(VENV, "bin", "gunicorn"), "config.wsgi:application", "-c", "config/gunicorn.conf.py",
            "--chdir", OURS, "--capture-output", "--log-level", "info", "--timeout", str(GUNICORN_TIMEOUT)]


def start_server(kind):
    if not port_free(PORT):
        raise SystemExit(f"port {PORT} is busy: set OURS_PORT")
    srv = Server(server_argv(kind), ours_env(), OURS, os.path.join(RUN_DIR, "server.log")).start()
    LIVE.append(srv)
    t = wait_http_200(BASE + LOGIN_PATH, srv.t0, START_DEADLINE_S, proc=srv.proc)
    if t is None:
        srv.stop()
        raise SystemExit(f"our server ({kind}) did not answer 200 on {LOGIN_PATH}; see {RUN_DIR}/server.log")
    return srv, t


def demo_reports_running(root):
    """True while a `manage.py compute_reports` process runs under the server's tree."""
    for p in tree_pids(root):
        try:
            with open(f"/proc/{p}/cmdline", "rb") as f:
                if b"compute_reports" in f.read():
                    return True
        except OSError:
            continue
    return False


def proc_breakdown(root):
    """Per process of the tree: pid, command (short), VmRSS MiB, Pss MiB."""
    out = []
    for p in tree_pids(root):
        try:
            with open(f"/proc/{p}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
            cmd = " ".join(a.decode(errors="replace") for a in argv if a)[:120]
        except OSError:
            continue
        out.append({"pid": p, "cmd": cmd.replace(OURS, "$OURS"), "rss_mib": rss_only(p), "pss_mib": pss_only(p)})
    return out


def rss_only(p):
    try:
        with open(f"/proc/{p}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return r3(int(line.split()[1]) / 1024, 1)
    except OSError:
        return None


def pss_only(p):
    try:
        with open(f"/proc/{p}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return r3(int(line.split()[1]) / 1024, 1)
    except OSError:
        return None


def api(method, path, token, ok=(200, 201, 204), **kw):
    r = requests.request(method, BASE + path, headers={"Authorization": "Token " + token}, timeout=300, **kw)
    if r.status_code not in ok:
        raise SystemExit(f"{method} {path} -> {r.status_code}: {r.text[:300]}")
    return r.json() if r.content else None


def psql(sql, db="postgres"):
    return subprocess.run(["psql", "-h", "127.0.0.1", "-p", "5432", "-U", "postgres", "-d", db, "-v",
                           "ON_ERROR_STOP=1", "-Atc", sql], capture_output=True, text=True, timeout=120,
                          check=True).stdout.strip()


def db_count(sql, *params):
    """Read-only count on the platform's database (SQLite file, or PostgreSQL through psql)."""
    if CONFIG == "b":
        q = sql
        for p in params:
            q = q.replace("?", "'" + str(p).replace("'", "''") + "'", 1)
        return int(psql(q, PG_DB))
    path = SQLITE_A if CONFIG == "a" else SQLITE_C
    c = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30)
    try:
        return c.execute(sql, params).fetchone()[0]
    finally:
        c.close()


SQL_REV = ("select count(*) from annotate_revision r join annotate_assignment a on r.assignment_id = a.id "
           "join annotate_study s on a.study_id = s.id where s.slug = ? and r.status = 'submitted'")
SQL_RATING = ("select count(*) from annotate_rating g join annotate_revision r on g.revision_id = r.id "
              "join annotate_assignment a on r.assignment_id = a.id join annotate_study s on a.study_id = s.id "
              "where s.slug = ? and r.status = 'submitted'")
SQL_RATIONALE = ("select count(*) from annotate_rationale x join annotate_rating g on x.rating_id = g.id "
                 "join annotate_revision r on g.revision_id = r.id join annotate_assignment a on r.assignment_id = a.id "
                 "join annotate_study s on a.study_id = s.id where s.slug = ? and r.status = 'submitted'")
SQL_SPAN = ("select count(*) from annotate_span x join annotate_revision r on x.revision_id = r.id "
            "join annotate_assignment a on r.assignment_id = a.id join annotate_study s on a.study_id = s.id "
            "where s.slug = ? and r.status = 'submitted'")
SQL_ASSIGN_SUBMITTED = ("select count(*) from annotate_assignment a join annotate_study s on a.study_id = s.id "
                        "where s.slug = ? and a.state = 'submitted'")

USERS_PY = r"""
import json
from annotate.models import Study, StudyMembership
from annotate.services.accounts import create_token
from annotate.services.members import add_study_member, ensure_user
from datasets.importing import import_records
names = %r
out = {}
for name in names:
    user, _ = ensure_user(username=name, password=%r, is_staff=(name == %r), is_superuser=(name == %r))
    # what `manage.py create_api_token NAME` does, in one process
    out[name] = create_token(user=user).secret
    if name == %r:
        admin = user
# The studies the REST imports go into (as a peer's projects are made before its import), the admin their admin.
import_records(lines=[json.dumps(r) + "\n" for r in %r])
for study in Study.objects.filter(slug__in=[r["slug"] for r in %r]):
    add_study_member(study=study, user=admin, role=StudyMembership.Role.ADMIN)
print("TOKENS" + json.dumps(out))
"""


def create_users(studies):
    code = USERS_PY % (RATERS + [ADMIN], PASSWORD, ADMIN, ADMIN, ADMIN, studies, studies)
    r = manage("shell", "-c", code)
    line = [x for x in r.stdout.splitlines() if x.startswith("TOKENS")][-1]
    return json.loads(line[len("TOKENS"):])


def compare_stored(adapter_sent, base, study, batch, admin_token):
    """Every stored answer of the load study (admin answers endpoint) against the body that was sent."""
    s = requests.Session()
    s.headers["Authorization"] = "Token " + admin_token
    url, rows = f"{base}/api/studies/{study}/batches/{batch}/answers/", []
    for _ in range(500):  # bounded
        r = s.get(url, timeout=300)
        r.raise_for_status()
        j = r.json()
        rows += j["results"]
        url = j.get("next")
        if not url:
            break
    mism = []
    for row in rows:
        sent = adapter_sent.get(row["assignment"])
        if sent is None:
            mism.append({"assignment": row["assignment"], "why": "stored but not sent"})
            continue
        a, sa = row["answers"], sent["answers"]
        span = (a.get("added_info") or [{}])
        want_span = sa["added_info"][0]
        same = (a.get("overall") == sa["overall"] and a.get("failure_modes") == sa["failure_modes"]
                and len(span) == 1 and all(span[0].get(k) == want_span[k] for k in
                                           ("start", "end", "text", "answers", "rationale", "target"))
                and row["rationales"].get("overall") == sent["rationales"]["overall"])
        if not same:
            mism.append({"assignment": row["assignment"], "stored": {"answers": a, "rationales": row["rationales"]},
                         "sent": sent})
    return {"stored_rows": len(rows), "sent": len(adapter_sent), "mismatches": len(mism),
            "missing": len(set(adapter_sent) - {row["assignment"] for row in rows}),
            "all_equal": not mism and len(rows) == len(adapter_sent), "sample_mismatch": mism[:2]}


def main():
    res = {"platform": f"ours-{CONFIG}", "config": CONFIG,
           "started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
           "machine": {"nproc": os.cpu_count(), "loadavg_at_start": os.getloadavg()},
           "calibration_cpu_ms_before": calibrate_cpu()}
    res["versions"] = {k: pkg_version(VENV, k) for k in ("Django", "djangorestframework", "gunicorn", "psycopg",
                                                            "whitenoise")}
    res["versions"].update({
        "ours_commit": subprocess.run(["git", "-C", OURS, "rev-parse", "HEAD"], capture_output=True,
                                      text=True).stdout.strip(),
        "python": subprocess.run([PY, "-V"], capture_output=True, text=True).stdout.strip(),
        "playwright": pkg_version(TOOLS_VENV, "playwright"),
        "chromium": subprocess.run(["/usr/bin/chromium", "--version"], capture_output=True, text=True).stdout.strip()})
    if CONFIG == "b":
        res["versions"]["postgresql"] = psql("show server_version")
    res["server"] = {
        "a": "`make run` = collectstatic + prepare (migrate + load_demo) + gunicorn -c config/gunicorn.conf.py (2 gthread workers x 8 threads, "
             "preloaded), DEBUG=1, SQLite var/db.sqlite3 (WAL, IMMEDIATE transactions)",
        "b": f"gunicorn -c config/gunicorn.conf.py, {WORKERS} gthread workers x 8 threads, --timeout {GUNICORN_TIMEOUT}, "
             f"DEBUG=0, PostgreSQL {PG_DB} on 127.0.0.1, "
             "DB_CONN_MAX_AGE=600; no Celery broker (tasks in-process; none in the measured path)",
        "c": f"gunicorn -c config/gunicorn.conf.py, {WORKERS} gthread workers x 8 threads, --timeout {GUNICORN_TIMEOUT}, "
             "DEBUG=0, SQLite (WAL, IMMEDIATE transactions), DB_CONN_MAX_AGE=0",
    }[CONFIG]
    shutil.rmtree(RUN_DIR, ignore_errors=True)
    os.makedirs(os.path.join(RUN_DIR, "home"))
    kind = "make-run" if CONFIG == "a" else "gunicorn"

    # 1. first launch on an empty database
    if CONFIG == "a":
        for suffix in ("", "-wal", "-shm", "-journal"):
            if os.path.exists(SQLITE_A + suffix):
                os.remove(SQLITE_A + suffix)
        log("first `make run` on an empty database (migrate + load_demo + runserver)")
        srv, t_first = start_server(kind)
        res["first_start_empty_data_dir_s"] = r3(t_first, 2)
        # `make run` computes the demo's reports once, in a child of gunicorn's master that it
        # does not wait for (config/demo_reports.py). They are stored in the database, so later
        # starts find them and start nothing; let this first start finish them (not timed) so
        # that no cold start below, nor the memory and load figures, has that child running.
        t0 = time.perf_counter()
        deadline = time.monotonic() + PHASE_MAX_S
        while time.monotonic() < deadline and demo_reports_running(srv.pid):
            time.sleep(0.5)
        res["demo_reports_after_first_start_s"] = {
            "value": r3(time.perf_counter() - t0, 1),
            "what": "the first start's `manage.py compute_reports` child, waited for before the server stops",
        }
        log(f"the demo's reports computed {res['demo_reports_after_first_start_s']['value']} s after the first start")
        srv.stop()
    else:
        if CONFIG == "b":
            psql(f"DROP DATABASE IF EXISTS {PG_DB} WITH (FORCE)")
            psql(f"CREATE DATABASE {PG_DB}")
        log("manage.py migrate on an empty database")
        t0 = time.perf_counter()
        manage("migrate", "--noinput")
        res["first_time_setup_migrate_s"] = r3(time.perf_counter() - t0, 2)
        manage("collectstatic", "--noinput", "-v", "0")  # the release step's second command

    t0 = time.perf_counter()
    rest_slugs = [f"bench-{k}" for k in range(IMPORT_RUNS)]
    cmd_slugs = [f"bench-cmd-{k}" for k in range(IMPORT_RUNS)]
    tokens = create_users([ours_jsonl.study_record(slug) for slug in rest_slugs + cmd_slugs])
    res["users"] = {"raters": N_RATERS, "admin": ADMIN, "setup_s": r3(time.perf_counter() - t0, 2),
                    "how": "annotate.services.members.ensure_user + annotate.services.accounts.create_token (= create_api_token) "
                           "in one `manage.py shell -c`, which also makes the REST imports' studies"}
    rater_tokens = [tokens[u] for u in RATERS]
    admin_tok = tokens[ADMIN]

    # 2. cold starts on the existing database
    if CONFIG == "a" and SERVE_COLD_RUNS:
        serve = []
        for k in range(SERVE_COLD_RUNS):
            srv, t = start_server("make-serve")
            serve.append(t)
            log(f"cold start `make serve` {k+1}/{SERVE_COLD_RUNS}: {t:.2f}s")
            srv.stop()
        res["cold_start_make_serve_only_s"] = {"runs": [r3(x, 2) for x in serve], "median": r3(median(serve), 2),
                                               "what": "`make serve` alone (gunicorn, no migrate/load_demo)"}
    cold, rss_start, rss_settled, pss_start = [], [], [], []
    for k in range(COLD_RUNS):
        srv, t = start_server(kind)
        cold.append(t)
        rss_start.append(rss_mib(srv.pid))
        pss_start.append(pss_mib(srv.pid))
        time.sleep(3)
        rss_settled.append(rss_mib(srv.pid))
        log(f"cold start {kind} {k+1}/{COLD_RUNS}: {t:.2f}s rss {rss_start[-1]} MiB")
        if k < COLD_RUNS - 1:
            srv.stop()
    res["cold_start_s"] = {"runs": [r3(x, 2) for x in cold], "median": r3(median(cold), 2),
                           "p95": r3(pct(cold, 95), 2), "probe": "GET " + LOGIN_PATH + " every 50 ms",
                           "command": " ".join(server_argv(kind)).replace(OURS, "$OURS")}
    res["rss_mib"] = {"after_start_median": r3(median(rss_start), 1),
                      "after_start_plus_3s_median": r3(median(rss_settled), 1)}
    res["pss_mib"] = {"after_start_median": r3(median(pss_start), 1)}
    res["processes_after_start"] = proc_breakdown(srv.pid)

    # 3. import TASKS tasks x IMPORT_RUNS studies through the REST API, as the peers import: POST
    # /api/studies/<slug>/imports/ (multipart, the file the import page uploads), then the run is
    # polled until done (no broker: the run finishes in the request). Then, as an extra row, the same
    # files through `manage.py import_jsonl` (a new process: interpreter and Django start-up included).
    tasks = gen_tasks.generate(TASKS)
    imports, slugs = [], []
    for k, slug in enumerate(rest_slugs):
        body = ours_jsonl.jsonl_for(slug, tasks, with_study=False).encode()
        t0 = time.perf_counter()
        r = requests.post(f"{BASE}/api/studies/{slug}/imports/", headers={"Authorization": "Token " + admin_tok},
                          files={"file": (f"{slug}.jsonl", body, "application/jsonl")}, timeout=600)
        if r.status_code != 202:
            raise SystemExit(f"REST import -> {r.status_code}: {r.text[:300]}")
        run = r.json()
        deadline = time.monotonic() + PHASE_MAX_S
        while run["status"] not in ("done", "failed") and time.monotonic() < deadline:
            time.sleep(0.05)
            run = api("GET", urlsplit(r.headers["Location"]).path, admin_tok)
        dt = time.perf_counter() - t0
        if run["status"] != "done":
            raise SystemExit(f"REST import {slug}: {run['status']} {run.get('error')}")
        counts = api("GET", f"/api/studies/{slug}/", admin_tok)["counts"]
        if counts["summaries"] != TASKS or counts["sources"] != TASKS:
            raise SystemExit(f"import stored {counts}, expected {TASKS} sources and summaries")
        imports.append(dt)
        slugs.append(slug)
        log(f"REST import {k+1}/{IMPORT_RUNS}: {dt:.2f}s ({run['counts']})")
    res["import_500_s"] = {"runs": [r3(x, 3) for x in imports], "median": r3(median(imports), 3), "tasks": TASKS,
                           "tasks_per_s_median": r3(TASKS / median(imports), 1),
                           "how": "POST /api/studies/<slug>/imports/ (multipart JSONL, the study made beforehand) "
                                  "until the run is done: the peers' path (a REST import into a made project)"}
    empty = os.path.join(RUN_DIR, "empty.jsonl")
    open(empty, "w").close()
    t0 = time.perf_counter()
    r = manage("import_jsonl", empty, check=False)
    overhead = time.perf_counter() - t0
    res["import_cli_overhead_s"] = {"value": r3(overhead, 3), "what": "`manage.py import_jsonl` of an empty file "
                                    "(refused: 'holds no records'): interpreter + Django setup",
                                    "rc": r.returncode}
    commands = []
    for k, slug in enumerate(cmd_slugs):
        path = os.path.join(RUN_DIR, f"{slug}.jsonl")
        with open(path, "w") as f:
            f.write(ours_jsonl.jsonl_for(slug, tasks))
        t0 = time.perf_counter()
        r = manage("import_jsonl", path, check=False)
        dt = time.perf_counter() - t0
        if r.returncode != 0:
            raise SystemExit(f"import failed: {r.stderr[-500:]}")
        counts = api("GET", f"/api/studies/{slug}/", admin_tok)["counts"]
        if counts["summaries"] != TASKS or counts["sources"] != TASKS:
            raise SystemExit(f"import stored {counts}, expected {TASKS} sources and summaries")
        commands.append(dt)
        log(f"command import {k+1}/{IMPORT_RUNS}: {dt:.2f}s ({r.stdout.strip()[-120:]})")
    res["import_500_command_s"] = {"runs": [r3(x, 3) for x in commands], "median": r3(median(commands), 3),
                                   "tasks": TASKS, "median_minus_cli_overhead": r3(median(commands) - overhead, 3),
                                   "includes": "`manage.py import_jsonl FILE` wall time: a new process (interpreter, "
                                               "Django setup) + the import (sources split into sentences + "
                                               "summaries, one transaction); the server keeps running"}
    res["rss_mib"]["after_import"] = rss_mib(srv.pid)
    res["pss_mib"]["after_import"] = pss_mib(srv.pid)

    # 4. assignments: batch over 8 raters, k per item, for the load study; 1 rater for the page study
    t0 = time.perf_counter()
    batch = api("POST", f"/api/studies/{slugs[0]}/batches/", admin_tok, json={
        "name": "load", "kind": "main", "raters": RATERS, "design": "k_raters", "k": K, "seed": 7})
    res["assign"] = {"batch_create_s": r3(time.perf_counter() - t0, 3), "raters": N_RATERS, "k": K,
                     "assignments": K * 500, "how": "POST /api/studies/<slug>/batches/ (= manage.py create_batch)"}
    page_slug = slugs[1] if len(slugs) > 1 else cmd_slugs[0]  # a study the load batch does not use
    page_batch = api("POST", f"/api/studies/{page_slug}/batches/", admin_tok, json={
        "name": "page", "kind": "main", "raters": [RATERS[0]], "design": "k_raters", "k": 1, "n": 20, "seed": 7})

    # 5. submits
    adapter = load.OursAdapter(BASE, study=slugs[0], batch=batch["uuid"], admin_token=admin_tok, raters=RATERS,
                               tokens=rater_tokens)
    before_db = db_count(SQL_REV, slugs[0])
    res["submit"] = load.run_rounds(adapter, SEQ_N, CONC_N, THREADS, ROUNDS, PHASE_MAX_S)
    ka = load.OursAdapter(BASE, study=slugs[0], batch=batch["uuid"], admin_token=admin_tok, raters=RATERS,
                          tokens=rater_tokens, conn="keepalive")
    ka_tasks = ka.tasks()
    off = ROUNDS * (SEQ_N + CONC_N)
    res["submit"]["sequential_keepalive"] = load.run_phase(ka, ka_tasks, SEQ_N, 1, PHASE_MAX_S, offset=off)
    log(f"sequential keep-alive: p50 {res['submit']['sequential_keepalive']['p50_ms']} ms")
    sent = dict(adapter.sent)
    sent.update(ka.sent)
    ok_total = res["submit"]["submitted_ok_total"] + res["submit"]["sequential_keepalive"]["ok"]
    form_ok = 0
    if FORM_N:
        fa = load.OursFormAdapter(BASE, study=slugs[0], batch=batch["uuid"], admin_token=admin_tok, raters=RATERS,
                                  tokens=rater_tokens, password=PASSWORD)
        res["submit"]["sequential_form_post"] = load.run_phase(fa, fa.tasks(), FORM_N, 1, PHASE_MAX_S,
                                                               offset=off + SEQ_N)
        res["submit"]["sequential_form_post"]["what"] = (
            "POST /rate/<uuid>/ action=submit, the HTML form the rating page sends on Submit (session cookie + CSRF), "
            "answered 302 to the next item (not followed)")
        form_ok = res["submit"]["sequential_form_post"]["ok"]
        sent.update(fa.sent)
        log(f"sequential form post: p50 {res['submit']['sequential_form_post']['p50_ms']} ms")
    after_db = db_count(SQL_REV, slugs[0])
    expected = ok_total + form_ok
    res["submit"]["db_rows_added"] = after_db - before_db
    res["submit"]["db_rows_equal_ok_submits"] = (after_db - before_db) == expected
    res["submit"]["db_rows"] = {
        "submitted_revisions": after_db,
        "submitted_assignments": db_count(SQL_ASSIGN_SUBMITTED, slugs[0]),
        "ratings": db_count(SQL_RATING, slugs[0]), "rationales": db_count(SQL_RATIONALE, slugs[0]),
        "spans": db_count(SQL_SPAN, slugs[0]),
        "expected_per_submit": "1 submitted revision, 2 ratings (overall, failure_modes), 1 rationale, 1 span"}
    res["submit"]["stored_equals_sent"] = compare_stored(sent, BASE, slugs[0], batch["uuid"], admin_tok)
    log(f"stored == sent: {res['submit']['stored_equals_sent']['all_equal']} "
        f"({res['submit']['stored_equals_sent']['stored_rows']} rows)")
    res["submit"]["http_calls_per_submit"] = ("1: POST /api/assignments/<uuid>/submit/ {version, answers, rationales, "
                                              "active_seconds}; token of the assignment's rater")
    res["rss_mib"]["after_submit_load"] = rss_mib(srv.pid)
    res["pss_mib"]["after_submit_load"] = pss_mib(srv.pid)
    res["processes_after_submit_load"] = proc_breakdown(srv.pid)

    # 6. the rating page in Chromium, for an item nobody has rated (page study, rater 1's first item)
    rows = api("GET", f"/api/studies/{page_slug}/batches/{page_batch['uuid']}/assignments/?rater={RATERS[0]}",
               admin_tok)["results"]
    first = min(rows, key=lambda a: a["position"])
    summ = api("GET", f"/api/studies/{page_slug}/summaries/{first['summary']['uuid']}/", admin_tok)
    url = f"{BASE}/rate/{first['uuid']}/"
    shot = os.path.join(HERE, "results", f"ours-{CONFIG}-rating-page.png")
    os.makedirs(os.path.dirname(shot), exist_ok=True)
    import browser_load
    try:
        res["labeling_page"] = browser_load.measure(
            BASE, url, "ours", RATERS[0], PASSWORD,
            ["Overall quality of the summary", summ["text"][-50:]], PAGE_RUNS, shot)
        res["labeling_page"]["url"] = url.replace(BASE, "")
        res["labeling_page"]["ready_means"] = ("the overall question's prompt and the end of the summary text are in "
                                               "document.body.innerText")
    except Exception as e:  # keep the other figures if the browser fails
        res["labeling_page"] = {"error": f"{type(e).__name__}: {e}"[:500]}
    res["rss_mib"]["after_page_loads"] = rss_mib(srv.pid)
    res["pss_mib"]["after_page_loads"] = pss_mib(srv.pid)
    srv.stop()

    # 7. size
    res["install"] = venv_facts(VENV)
    res["install"]["note"] = "the checkout's .venv: requirements.txt + gunicorn (installed for configs b and c)"
    res["calibration_cpu_ms_after"] = calibrate_cpu()
    res["machine"]["loadavg_at_end"] = os.getloadavg()
    res["ratios"] = {
        "rss_after_load_over_after_start": r3(res["rss_mib"]["after_submit_load"] / res["rss_mib"]["after_start_median"], 2),
        "concurrent_p50_over_sequential_p50": res["submit"]["concurrent"].get("p50_ratio_vs_sequential"),
        "concurrent_throughput_over_one_client": res["submit"]["concurrent"].get("throughput_ratio_vs_one_client"),
        "keepalive_p50_over_close_p50": r3(res["submit"]["sequential_keepalive"]["p50_ms"] / res["submit"]["sequential"]["p50_ms_median"], 2),
    }
    if "first_start_empty_data_dir_s" in res:
        res["ratios"]["first_start_over_cold_start"] = r3(res["first_start_empty_data_dir_s"] / res["cold_start_s"]["median"], 2)
    out = json.dumps(res, indent=2, default=str)
    path = os.path.join(HERE, "results", f"ours-{CONFIG}-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}.json")
    with open(path, "w") as f:
        f.write(out)
    log("wrote", path)
    print(out)


if __name__ == "__main__":
    import signal
    # `timeout` sends SIGTERM: turn it into SystemExit so the finally below stops our servers
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        main()
    finally:
        for s in LIVE:
            s.stop()
