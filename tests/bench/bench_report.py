"""Benchmark: the demo studies' reports, plots included, as a worker computes them.

Run:  .venv/bin/python tests/bench/bench_report.py [--runs 3] [--cpu 0]

Not collected by pytest. Builds a fresh SQLite database (var/bench-report.sqlite3) with the
demo and its seeded answers (`load_demo --with-answers`), then, for each demo study, starts
a new interpreter pinned to one core (``--cpu``) that does what a report worker does
(analysis.tasks.run_study_report_task): the numbers (services.run_study_report, 1,000
resamples as the app uses), then the plots (services.draw_missing_plots: every SVG, which
the page shows, then every PNG, the downloads). The first report in that process pays for
the imports (pandas, scipy, statsmodels, matplotlib), as a fresh worker does; the same
process then recomputes it (restart_study_report) ``--runs`` times, as a worker that has
already computed a report does.

Printed per study: CPU seconds of the process for the numbers, for the numbers and every
SVG (the report whole on the page), and for everything (the PNGs too); the first (cold)
run, then the median of the warm ones. The goal is the report with its plots in
≤ 2 s on one core at rest. The load average is printed with each study: on a shared machine
read CPU seconds, not wall time.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
from pathlib import Path
from statistics import median

ROOT = Path(__file__).resolve().parents[2]
DB = ROOT / "var" / "bench-report.sqlite3"
STUDIES = ("demo-litsumm", "demo-factpico", "demo-pairwise")


def environment() -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        DATABASE_URL=f"sqlite:///{DB}",
        DJANGO_SETTINGS_MODULE="config.settings",
        SECRET_KEY=env.get("SECRET_KEY", "bench-only-not-a-secret"),
        DEMO_PASSWORD=env.get("DEMO_PASSWORD", "bench-only-password"),
    )
    return env


def build() -> None:
    DB.parent.mkdir(exist_ok=True)
    if DB.exists():
        DB.unlink()
    manage = [sys.executable, str(ROOT / "manage.py")]
    subprocess.run([*manage, "migrate", "-v0"], check=True, env=environment(), cwd=ROOT)
    subprocess.run([*manage, "load_demo", "--with-answers", "-v0"], check=True, env=environment(), cwd=ROOT)


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def child(slug: str, runs: int) -> None:
    """In a fresh interpreter: the report of `slug` computed 1 + runs times, as a worker does."""
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from analysis import services
    from analysis.models import AnalysisResult, ReportPlot
    from annotate.models import Study

    study = Study.objects.get(slug=slug)
    queued: list[int] = []
    # Outside a transaction the report is queued at once (on_commit): `queued` gets its id.
    result = services.request_study_report(study=study, phase="all", enqueue=queued.append)
    figures = []
    for i in range(1 + runs):
        if i:
            services.restart_study_report(result=result, statuses=(AnalysisResult.Status.DONE,))
        start = cpu_seconds()
        services.run_study_report(result_id=result.pk)
        numbers = cpu_seconds() - start
        drawn = []
        # The plots one by one, as draw_missing_plots stores them, noting the CPU time after each.
        report = AnalysisResult.objects.get(pk=result.pk).result
        for image in services.draw_report_plots(report):
            image.result_id = result.pk
            ReportPlot.objects.bulk_create([image], ignore_conflicts=True)
            drawn.append((image.format, cpu_seconds() - start))
        svgs = [t for fmt, t in drawn if fmt == "svg"]
        figures.append(
            {
                "numbers": numbers,
                "with_svg": svgs[-1] if svgs else numbers,
                "all": drawn[-1][1] if drawn else numbers,
                "plots": len(svgs),
            }
        )
    print(json.dumps({"study": slug, "load": os.getloadavg()[0], "runs": figures}))


def pair(cold: dict, warm: list[dict], key: str) -> str:
    """ "cold / warm median" of one figure."""
    return f"{cold[key]:6.2f} / {median(r[key] for r in warm):6.2f}" if warm else f"{cold[key]:6.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="warm recomputations after the first (cold) report")
    parser.add_argument("--cpu", type=int, default=0, help="the core each study's process is pinned to")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        os.sched_setaffinity(0, {args.cpu})
        child(args.child, args.runs)
        return
    build()
    print("CPU seconds on one core; cold = a fresh worker's first report (imports included), warm = median of the rest")
    print(f"{'study':16} {'plots':>5} {'numbers':>16} {'+ SVGs (page)':>16} {'+ PNGs':>16} {'load':>5}")
    for slug in STUDIES:
        out = subprocess.run(
            [sys.executable, __file__, "--child", slug, "--runs", str(args.runs), "--cpu", str(args.cpu)],
            check=True,
            env=environment(),
            cwd=ROOT,
            capture_output=True,
            text=True,
        ).stdout
        data = json.loads(out.strip().splitlines()[-1])
        cold, warm = data["runs"][0], data["runs"][1:]
        cells = [pair(cold, warm, key) for key in ("numbers", "with_svg", "all")]
        print(f"{slug:16} {cold['plots']:5d} {cells[0]:>16} {cells[1]:>16} {cells[2]:>16} {data['load']:5.1f}")


if __name__ == "__main__":
    main()
