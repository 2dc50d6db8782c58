"""The large-study benchmark's smoke run (tests/bench/bench_large_study.py): the generator at a
tiny size, then every measured step once, on a SQLite file of its own. It fails when a step
breaks or a figure is missing, never on a time."""

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "tests" / "bench" / "bench_large_study.py"
PAGES = {
    "study page",
    "batch page",
    "disagreements page",
    "monitor",
    "participants page",
    "report page (cached)",
    "export page",
    "API studies",
    "API summaries",
    "API assignments",
    "API answers by cursor, first",
    "API answers by cursor, 50th",
    "API disagreements",
    "API consensus",
    "API report",
}


def test_every_step_runs_once_and_reports_its_figures(tmp_path):
    out = tmp_path / "figures.json"
    env = dict(os.environ, STATIC_ROOT=str(tmp_path / "static"), SECRET_KEY="bench-smoke-only")
    done = subprocess.run(
        [
            sys.executable,
            str(SCRIPT),
            "--database-url",
            f"sqlite:///{tmp_path / 'large.sqlite3'}",
            "--scale",
            "0.005",
            "--loads",
            "1",
            "--budget",
            "0",
            "--json",
            str(out),
        ],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    figures = json.loads(out.read_text())
    assert figures["generation"]["generated"] and "10 sources, 30 summaries, 3 raters" in figures["generation"]["line"]
    report = figures["report"]
    assert report["status"] == "done" and report["plots"] > 0
    assert all(report[key] > 0 for key in ("numbers_s", "numbers_peak_mib", "report_s", "report_peak_mib"))
    export = figures["export"]
    assert all(export[key] > 0 for key in ("export_s", "export_peak_mib", "written_mib"))
    assert isinstance(export["streams"], bool)
    pages = {row["page"]: row for row in figures["pages"]}
    assert PAGES <= set(pages)
    for row in pages.values():
        assert row["loads"] == 1 and row["p95_ms"] >= row["p50_ms"] > 0 and row["queries"] > 0 and row["kib"] > 0
    assert all(name in done.stdout for name in PAGES)  # the printed table
