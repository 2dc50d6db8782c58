"""Benchmark: what admins open on a study a hundred times the demo.

Run:  .venv/bin/python tests/bench/bench_large_study.py [--database-url URL] [--scale 1] [--loads 20]

Not collected by pytest (tests/bench/test_large_study_smoke.py runs it once at a tiny size).
On a SQLite file by default (var/bench-large/large.sqlite3; --database-url for PostgreSQL,
whose database must exist), the study of `manage.py make_large_study` is generated when it
is missing (--fresh: always, on a new SQLite file), with DEBUG off. Then:

1. the report as a worker computes it (analysis.tasks.run_study_report_task: the numbers,
   then every plot), in a fresh process: wall time of the numbers and of the whole task,
   and the process's peak resident memory (VmHWM);
2. the export (`export_dataset`, every format) in a fresh process: wall time, peak memory,
   the bytes written, and whether it streams (run again under tracemalloc, the Python
   objects it held at most came to less than half of what it wrote);
3. the admin's pages and every API list page, each loaded --loads times through Django's
   test client as the study's admin (signed in), after one load that fills what it caches:
   p50 and p95, the queries of one load, and the bytes of the page (a page whose loads
   take longer than --budget seconds in all is loaded fewer times, at least twice).

Prints a table against the targets (report 60 s and 1.5 GiB; export 60 s and 500 MiB;
every page p95 300 ms) and writes it as JSON to var/bench-large/<UTC time>.json (--json to
choose the file).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "var" / "bench-large"
STEPS = ("report", "export", "pages")
TARGETS = {"report_s": 60.0, "report_peak_mib": 1536.0, "export_s": 60.0, "export_peak_mib": 500.0, "page_p95_ms": 300}


def environment(database_url: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        DATABASE_URL=database_url,
        DJANGO_SETTINGS_MODULE="config.settings",
        SECRET_KEY=env.get("SECRET_KEY") or "bench-only-not-a-secret",
        DEBUG="0",
        ALLOWED_HOSTS="testserver",
        # No broker: nothing is queued to a worker that is not there (the children compute).
        CELERY_BROKER_URL="",
    )
    return env


def peak_mib() -> float:
    """This process's peak resident memory (VmHWM; ru_maxrss would carry the parent's)."""
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmHWM:")) / 1024


def rss_mib() -> float:
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS:")) / 1024


def run_child(kind: str, args, env: dict[str, str]) -> dict:
    out = subprocess.run(
        [sys.executable, __file__, "--child", kind, "--slug", args.slug],
        check=True,
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


# --- in the children ------------------------------------------------------------------


def child_report(slug: str) -> dict:
    """The report as a worker computes it: the numbers, then every plot (SVG and PNG). A
    worker imports the report's modules when it starts (config.celery), so this does too."""
    from config.celery import preload_report_modules

    preload_report_modules()
    from analysis import services
    from analysis.models import AnalysisResult
    from annotate.models import Study

    study = Study.objects.get(slug=slug)
    result = services.request_study_report(study=study, phase="all", enqueue=lambda _id: None)
    if result.status != AnalysisResult.Status.PENDING:
        services.restart_study_report(result=result, statuses=[s for s in AnalysisResult.Status.values])
    started = time.perf_counter()
    done = services.run_study_report(result_id=result.pk)
    numbers_s = time.perf_counter() - started
    numbers_peak = peak_mib()
    plots = services.draw_missing_plots(result_id=result.pk)
    return {
        "status": done.status if done is not None else "taken",
        "numbers_s": numbers_s,
        "numbers_peak_mib": numbers_peak,
        "report_s": time.perf_counter() - started,
        "report_peak_mib": peak_mib(),
        "plots": plots,
    }


def child_export(slug: str) -> dict:
    """The export, timed, then again under tracemalloc: the most its Python objects held
    at once. RSS also holds the allocators' free lists, SQLite's page cache and Arrow's
    pool; the traced peak is what grows with the rows if the export does not stream."""
    import tracemalloc

    from annotate.models import Study
    from datasets.exporting import export_dataset

    study = Study.objects.get(slug=slug)
    # The libraries the export uses, imported before the baseline: what the export adds
    # beyond them is what it holds of the data.
    import pandas  # noqa: F401
    import pyarrow.parquet  # noqa: F401

    import stats.agreement  # noqa: F401
    from planning.selectors import protocol_records

    protocol_records(study)
    before = rss_mib()
    with tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        result = export_dataset(study=study, out_dir=Path(tmp) / "export")
        took = time.perf_counter() - started
        written = sum(p.stat().st_size for p in Path(tmp).rglob("*") if p.is_file())
    peak = peak_mib()
    with tempfile.TemporaryDirectory() as tmp:
        tracemalloc.start()
        export_dataset(study=study, out_dir=Path(tmp) / "export")
        held = tracemalloc.get_traced_memory()[1] / 2**20
        tracemalloc.stop()
    return {
        "export_s": took,
        "export_peak_mib": peak,
        "grew_mib": peak - before,
        "held_mib": held,
        "written_mib": written / 2**20,
        "streams": held < written / 2**20 / 2,
        "line": result.summary_line(),
    }


# --- pages ------------------------------------------------------------------------------


def page_urls(client, study, batch) -> list[tuple[str, str]]:
    """(name, address) of every page measured; the deep cursor page is found by following
    the answers' `next` links."""
    s, b = study.slug, batch.uuid
    api = f"/api/studies/{s}/"
    urls = [
        ("study page", f"/studies/{s}/"),
        ("batch page", f"/studies/{s}/batches/{b}/"),
        ("disagreements page", f"/studies/{s}/batches/{b}/disagreements/"),
        ("monitor", f"/studies/{s}/batches/{b}/monitor/"),
        ("participants page", f"/studies/{s}/participants/"),
        ("report page (cached)", f"/analysis/{s}/"),
        ("export page", f"/studies/{s}/exports/"),
        ("API studies", "/api/studies/"),
        ("API study", api),
        ("API sources", api + "sources/"),
        ("API summaries", api + "summaries/"),
        ("API summaries, last page", None),
        ("API batches", api + "batches/"),
        ("API batch", api + f"batches/{b}/"),
        ("API assignments", api + f"batches/{b}/assignments/"),
        ("API answers by cursor, first", api + f"batches/{b}/answers/?cursor="),
        ("API answers by cursor, 50th", None),
        ("API answers by page number", api + f"batches/{b}/answers/"),
        ("API disagreements", api + f"batches/{b}/disagreements/?question=overall"),
        ("API consensus", api + f"batches/{b}/consensus/"),
        ("API notes", api + f"batches/{b}/notes/"),
        ("API exports", api + "exports/"),
        ("API imports", api + "imports/"),
        ("API report", api + "analysis/"),
    ]
    count = client.get(api + "summaries/").json()["count"]
    last = api + f"summaries/?page={max(1, (count + 49) // 50)}"
    url = api + f"batches/{b}/answers/?cursor="
    for _ in range(49):
        following = client.get(url).json()["next"]
        url = following or url
        if not following:
            break
    known = {"API summaries, last page": last, "API answers by cursor, 50th": url}
    return [(name, address or known[name]) for name, address in urls]


def load(client, url: str) -> tuple[float, int, int]:
    started = time.perf_counter()
    response = client.get(url)
    body = b"".join(response.streaming_content) if response.streaming else response.content
    took = time.perf_counter() - started
    if not 200 <= response.status_code < 300:  # the report's API answers 202 while it computes
        raise SystemExit(f"{url}: {response.status_code} {body[:300]!r}")
    return took * 1000, len(body), response.status_code


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


def measure_pages(slug: str, loads: int, budget_s: float, measured=lambda rows: None) -> list[dict]:
    """Every page's figures; `measured(rows so far)` after each page (the run keeps them)."""
    from django.db import connection
    from django.test import Client

    from annotate.models import Batch, Study, StudyMembership

    study = Study.objects.get(slug=slug)
    batch = Batch.objects.filter(study=study, name="main").get()
    admin = StudyMembership.objects.filter(study=study, role=StudyMembership.Role.ADMIN).first().user
    client = Client()
    client.force_login(admin)
    rows = []
    for name, url in page_urls(client, study, batch):
        load(client, url)  # the first load fills what the page caches
        queries: list[str] = []

        def count(execute, sql, *rest, queries=queries):
            queries.append(sql)
            return execute(sql, *rest)

        with connection.execute_wrapper(count):
            _, size, _ = load(client, url)
        times: list[float] = []
        while len(times) < loads and (sum(times) < budget_s * 1000 or len(times) < 2):
            times.append(load(client, url)[0])
        rows.append(
            {
                "page": name,
                "url": url,
                "loads": len(times),
                "p50_ms": percentile(times, 0.5),
                "p95_ms": percentile(times, 0.95),
                "queries": len(queries),
                "kib": size / 1024,
            }
        )
        measured(rows)
    return rows


# --- the run ----------------------------------------------------------------------------


def prepare(args, env: dict[str, str]) -> dict:
    """Migrate, and generate the study when it is missing; its generation time and size."""
    manage = [sys.executable, str(ROOT / "manage.py")]
    if args.fresh and args.database_url.startswith("sqlite:///"):
        db = args.database_url.removeprefix("sqlite:///")
        for suffix in ("", "-wal", "-shm", ".writelock"):
            Path(f"{db}{suffix}").unlink(missing_ok=True)
    subprocess.run([*manage, "migrate", "-v0"], check=True, env=env, cwd=ROOT)
    # The pages name their static files by the manifest collectstatic writes (as `make run`).
    subprocess.run([*manage, "collectstatic", "--noinput", "-v0"], check=True, env=env, cwd=ROOT)
    query = f"from annotate.models import Study; print(Study.objects.filter(slug={args.slug!r}).exists())"
    exists = subprocess.run(
        [*manage, "shell", "-c", query], check=True, env=env, cwd=ROOT, capture_output=True, text=True
    ).stdout.split()
    if exists[-1:] == ["True"]:
        return {"generated": False}
    started = time.perf_counter()
    out = subprocess.run(
        [*manage, "make_large_study", "--slug", args.slug, "--scale", str(args.scale), "--seed", "0"],
        check=True,
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    return {"generated": True, "generate_s": time.perf_counter() - started, "line": out.stdout.strip()}


def table(figures: dict) -> str:
    targets = figures["targets"]

    def mark(ok: bool) -> str:
        return "ok" if ok else "MISSES"

    lines = [
        f"study: {figures['study']}",
        f"load average before: {figures['load_before']:.2f}; after: {figures['load_after']:.2f}",
        "",
        f"{'what':34} {'time':>10} {'peak memory':>12}  target",
    ]
    if "report" in figures:
        report = figures["report"]
        ok = report["report_s"] <= targets["report_s"] and report["report_peak_mib"] <= targets["report_peak_mib"]
        lines += [
            f"{'report (numbers)':34} {report['numbers_s']:>9.1f}s {report['numbers_peak_mib']:>9.0f}MiB",
            f"{'report (numbers + every plot)':34} {report['report_s']:>9.1f}s {report['report_peak_mib']:>9.0f}MiB  "
            + mark(ok),
        ]
    if "export" in figures:
        export = figures["export"]
        ok = export["export_s"] <= targets["export_s"] and export["export_peak_mib"] <= targets["export_peak_mib"]
        lines += [
            f"{'export (every format)':34} {export['export_s']:>9.1f}s {export['export_peak_mib']:>9.0f}MiB  "
            + mark(ok),
            f"  wrote {export['written_mib']:.0f} MiB; RSS grew {export['grew_mib']:.0f} MiB; Python objects"
            f" held at most {export['held_mib']:.0f} MiB; streams: {export['streams']}",
        ]
    lines += ["", f"{'page (' + str(figures['loads']) + ' loads each)':34} {'p50 ms':>8} {'p95 ms':>8} {'queries':>8}"]
    lines[-1] += f" {'KiB':>8}  target"
    for row in figures["pages"]:
        lines.append(
            f"{row['page']:34} {row['p50_ms']:>8.1f} {row['p95_ms']:>8.1f} {row['queries']:>8} {row['kib']:>8.1f}  "
            + mark(row["p95_ms"] <= targets["page_p95_ms"])
            + ("" if row["loads"] == figures["loads"] else f" ({row['loads']} loads)")
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database-url", default=f"sqlite:///{OUT / 'large.sqlite3'}")
    parser.add_argument("--slug", default="large")
    parser.add_argument("--scale", type=float, default=1.0, help="of make_large_study, when it generates the study")
    parser.add_argument("--loads", type=int, default=20, help="loads of each page")
    parser.add_argument(
        "--budget", type=float, default=60.0, help="seconds of loads per page, after which it stops (at least 2 loads)"
    )
    parser.add_argument("--fresh", action="store_true", help="a new SQLite file and a new study")
    parser.add_argument(
        "--json", type=Path, help="where to write the figures (default: var/bench-large/<UTC time>.json)"
    )
    parser.add_argument(
        "--steps", type=lambda v: v.split(","), default=list(STEPS), help="of report,export,pages (default: all)"
    )
    parser.add_argument("--child", choices=("report", "export"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    if args.child:
        import django

        django.setup()
        figures = child_report(args.slug) if args.child == "report" else child_export(args.slug)
        print(json.dumps(figures))
        return
    OUT.mkdir(parents=True, exist_ok=True)
    env = environment(args.database_url)
    load_before = os.getloadavg()[0]
    figures = {"started": datetime.now(UTC).isoformat(timespec="seconds"), "database": args.database_url.split(":")[0]}
    figures.update(generation=prepare(args, env), load_before=load_before, loads=args.loads, targets=TARGETS)
    for step in ("report", "export"):
        if step in args.steps:
            figures[step] = run_child(step, args, env)
    os.environ.update(env)
    import django

    django.setup()
    from annotate.models import Study

    study = Study.objects.get(slug=args.slug)
    figures["study"] = (
        f"{args.slug}: {study.sources.count():,} sources, {study.summaries.count():,} summaries, "
        f"{study.assignments.count():,} assignments"
    )
    path = args.json or OUT / f"{datetime.now(UTC).strftime('%Y%m%dT%H%M%SZ')}.json"

    def keep(rows: list[dict]) -> None:
        path.write_text(json.dumps({**figures, "pages": rows}, indent=2) + "\n", encoding="utf-8")

    figures["pages"] = measure_pages(args.slug, args.loads, args.budget, keep) if "pages" in args.steps else []
    figures["load_after"] = os.getloadavg()[0]
    print(table(figures))
    path.write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
    print(f"\nwritten: {path}")


if __name__ == "__main__":
    main()
