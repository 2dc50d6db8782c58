"""Side by side with Label Studio and doccano: `make bench-peers`.

Runs the harness in tests/bench/peers/ (a copy of ../shared/bench-peers/, see its
bench_ours.py) on this machine, alternating platforms so that a drift in the machine's
load falls on all of them alike: per round, Label Studio, ours in the `make run` shape
(config a), doccano, ours on gunicorn + PostgreSQL (config b). Without --peers only our
two shapes run (a quick check of our own figures; the ratios then use the peers' files
given with --peer-results, if any).

Every run's JSON goes to the output folder (default var/bench-peers/<UTC time>/); at
the end a table gives, for each headline figure, the median over the runs of each
platform and the ratio of ours to the best peer (lower is better except throughput).
It is printed and written to table.md. The harness commits nothing: it benchmarks the
committed HEAD, cloned into var/bench-peers/ours.

    python tests/bench/bench_peers.py --peers --rounds 2

Knobs (environment, passed to every script): OURS_PORT, LS_PORT, DC_PORT (outside the kernel's
ephemeral range 32768-60999; the scripts refuse one inside it), OURS_PG_DB (config b's
database, dropped and created: perf_ours), TASKS (tasks per import, 500), ROUNDS, COLD_RUNS,
IMPORT_RUNS, PAGE_RUNS, SEQ_N, CONC_N, THREADS, FORM_N, PHASE_MAX_S (tests/bench/peers/README.md).

--smoke (what .ci/run runs): the smallest run that still goes through every step (one round,
20 tasks, a few submits, one page load), ours in the `make run` shape only, plus a peer whose
venv is already installed under PEERS_DIR (a smoke run installs nothing: CI has no peers); the
clone reuses this checkout's .venv. It fails (exit 1) when a run fails or a figure is missing,
so a broken harness fails CI.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HARNESS = ROOT / "tests" / "bench" / "peers"

# (label, path in the result JSON, higher is better)
# Memory: PSS is the figure (shared pages split between the processes that map them); RSS sums
# every page of every process, so gunicorn's second worker doubled the shared part depending on
# whether it had forked yet. RSS is kept below it for reference.
FIGURES = [
    ("cold start to login page, s", ["cold_start_s", "median"], False),
    ("PSS after start, MiB", ["pss_mib", "after_start_median"], False),
    ("PSS after submit load, MiB", ["pss_mib", "after_submit_load"], False),
    ("(RSS after start, MiB)", ["rss_mib", "after_start_median"], False),
    ("(RSS after submit load, MiB)", ["rss_mib", "after_submit_load"], False),
    ("import 500 tasks through REST, s", ["import_500_s", "median"], False),
    ("(ours: the same through manage.py import_jsonl, s)", ["import_500_command_s", "median"], False),
    ("submit p50, 1 client, ms", ["submit", "sequential", "p50_ms_median"], False),
    ("submit p95, 1 client, ms", ["submit", "sequential", "p95_ms_median"], False),
    ("submit p50, 8 clients, ms", ["submit", "concurrent", "p50_ms_median"], False),
    ("submit p95, 8 clients, ms", ["submit", "concurrent", "p95_ms_median"], False),
    ("submits/s, 8 clients", ["submit", "concurrent", "throughput_per_s_median"], True),
    ("submit errors, 8 clients", ["submit", "concurrent", "errors_total"], False),
    ("stored = submitted (1 = yes)", ["submit", "all_stored_counts_match"], True),
    ("rating page ready, ms", ["labeling_page", "ready_ms_median"], False),
    ("rating page, KiB on the wire", ["labeling_page", "kib_total_median"], False),
]
PEERS = {"labelstudio": "Label Studio", "doccano": "doccano"}
OURS = {"a": "ours, make run", "b": "ours, gunicorn + PostgreSQL", "c": "ours, gunicorn + SQLite"}


def get(doc, path):
    for key in path:
        if not isinstance(doc, dict) or key not in doc:
            return None
        doc = doc[key]
    if isinstance(doc, bool):
        return int(doc)
    return doc if isinstance(doc, (int, float)) else None


def median_of(docs, path):
    values = [v for v in (get(d, path) for d in docs) if v is not None]
    return statistics.median(values) if values else None


def run_one(name: str, script: str, env: dict, out: Path, log) -> Path | None:
    path = out / f"{name}.json"
    started = time.monotonic()
    log(f"[bench-peers] {name}: {script}")
    with open(path, "w") as stdout:
        done = subprocess.run(["bash", str(HARNESS / script)], cwd=ROOT, env=env, stdout=stdout)
    log(f"[bench-peers] {name}: exit {done.returncode} after {time.monotonic() - started:.0f} s")
    if done.returncode != 0 or path.stat().st_size == 0:
        return None
    return path


def refresh_clone(clone: Path) -> None:
    """The benchmark measures the committed HEAD: clone it, or bring the clone to it
    (keeping its .venv, which `make install` updates when requirements.txt changes)."""
    if not (clone / ".git").exists():
        subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
        return
    subprocess.run(["git", "-C", str(clone), "fetch", "-q", str(ROOT), "HEAD"], check=True)
    subprocess.run(["git", "-C", str(clone), "checkout", "-q", "-f", "FETCH_HEAD"], check=True)
    subprocess.run(["git", "-C", str(clone), "clean", "-q", "-fdx", "-e", ".venv"], check=True)


def table(results: dict[str, list[dict]]) -> str:
    peers = [p for p in PEERS if results.get(p)]
    ours = [c for c in OURS if results.get(c)]
    head = ["figure", *(PEERS[p] for p in peers), *(OURS[c] for c in ours)]
    if peers:
        head += [f"{OURS[c]} / best peer" for c in ours]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for label, path, higher in FIGURES:
        peer_values = [median_of(results[p], path) for p in peers]
        our_values = [median_of(results[c], path) for c in ours]
        cells = [label, *(_fmt(v) for v in peer_values), *(_fmt(v) for v in our_values)]
        known = [v for v in peer_values if v is not None]
        if peers:
            best = (max(known) if higher else min(known)) if known else None
            cells += [_ratio(v, best) for v in our_values]
        lines.append("| " + " | ".join(cells) + " |")
    counts = ", ".join(f"{PEERS.get(k) or OURS.get(k)}: {len(v)}" for k, v in results.items() if v)
    loads = "; ".join(
        f"{PEERS.get(k) or OURS.get(k)} {i}: {_load(d)}" for k, docs in results.items() for i, d in enumerate(docs, 1)
    )
    return (
        "\n".join(lines)
        + f"\n\nRuns per platform (figures are medians over them): {counts}.\n"
        + f"Load average (1 min) at the start and end of each run: {loads}.\n"
    )


def _load(doc) -> str:
    machine = doc.get("machine", {})
    start, end = machine.get("loadavg_at_start"), machine.get("loadavg_at_end")
    return f"{start[0]:.1f}-{end[0]:.1f}" if start and end else "n/a"


# Figures a smoke run must produce for each of our shapes (the rest may be n/a for a peer).
SMOKE_ENV = {
    "ROUNDS": "1",
    "COLD_RUNS": "1",
    "SERVE_COLD_RUNS": "0",
    "IMPORT_RUNS": "1",
    "PAGE_RUNS": "1",
    "SEQ_N": "4",
    "CONC_N": "8",
    "THREADS": "2",
    "FORM_N": "2",
    "TASKS": "20",
    "PHASE_MAX_S": "300",
}
SMOKE_OPTIONAL = {"(ours: the same through manage.py import_jsonl, s)"}


def smoke_problems(results: dict[str, list[dict]]) -> list[str]:
    problems = []
    for key, docs in results.items():
        for doc in docs:
            for label, path, _ in FIGURES:
                if key not in OURS and label in SMOKE_OPTIONAL:
                    continue  # a peer has no import command
                if get(doc, path) is None:
                    problems.append(f"{key}: no figure for {label!r} ({'.'.join(path)})")
            if get(doc, ["submit", "all_stored_counts_match"]) != 1:
                problems.append(f"{key}: the stored answers do not match the submits")
    return problems


def _fmt(value) -> str:
    if value is None:
        return "n/a"
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"


def _ratio(value, best) -> str:
    if value is None or best in (None, 0):
        return "n/a"
    return f"{value / best:.2f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--peers", action="store_true", help="also run Label Studio and doccano (alternated)")
    parser.add_argument("--rounds", type=int, default=int(os.environ.get("BENCH_ROUNDS", "1")))
    parser.add_argument("--configs", default="a,b", help="our shapes: a (make run), b (gunicorn + PostgreSQL), c")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--peer-results", nargs="*", default=[], help="earlier peer result files to compare with")
    parser.add_argument("--smoke", action="store_true", help="the smallest run, failing on a missing figure (CI)")
    args = parser.parse_args()
    if args.smoke:
        args.rounds, args.configs = 1, "a"

    out = args.out or ROOT / "var" / "bench-peers" / time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    out.mkdir(parents=True, exist_ok=True)
    clone = ROOT / "var" / "bench-peers" / "ours"
    refresh_clone(clone)
    env = {**os.environ, "OURS_DIR": str(clone), "OURS_REPO": str(ROOT)}
    env.setdefault("PEERS_DIR", str(ROOT / "var" / "bench-peers" / "peers"))
    if args.smoke:
        env = {**SMOKE_ENV, **env, "TOOLS_PYTHON": sys.executable}
        # The clone runs on this checkout's environment: nothing is installed for a smoke run.
        if not (clone / ".venv").exists():
            (clone / ".venv").symlink_to(ROOT / ".venv")
        peers_dir = Path(env["PEERS_DIR"])
        installed = {"labelstudio": "ls-venv/bin/label-studio", "doccano": "doccano-venv/bin/doccano"}
        args.peers = False
        smoke_peers = [p for p, exe in installed.items() if (peers_dir / exe).exists()]
    configs = [c for c in args.configs.split(",") if c]
    if any(c not in OURS for c in configs):
        parser.error("--configs takes a, b and c")

    results: dict[str, list[dict]] = {key: [] for key in [*PEERS, *OURS]}
    for path in args.peer_results:
        doc = json.loads(Path(path).read_text())
        platform = doc.get("platform", "")
        results[{"label-studio": "labelstudio"}.get(platform, platform.removeprefix("ours-"))].append(doc)

    def log(message):
        print(message, file=sys.stderr, flush=True)

    peer_order = list(PEERS) if args.peers else (smoke_peers[:1] if args.smoke else [])
    failed = []
    for round_ in range(1, args.rounds + 1):
        # LS, ours a, doccano, ours b (, ours c): each of ours follows a peer.
        sequence = []
        for k, config in enumerate(configs):
            if k < len(peer_order):
                sequence.append((peer_order[k], f"run_{peer_order[k]}.sh", {}))
            sequence.append((config, "run_ours.sh", {"OURS_CONFIG": config}))
        for key, script, extra in sequence:
            path = run_one(f"{key}-r{round_}", script, {**env, **extra}, out, log)
            if path is not None:
                results[key].append(json.loads(path.read_text()))
            else:
                failed.append(f"{key}-r{round_}")

    text = table(results)
    (out / "table.md").write_text(text)
    print(text)
    print(f"Result files: {out}")
    if failed:
        print(f"Runs that failed (their logs above): {', '.join(failed)}", file=sys.stderr)
    if args.smoke:
        problems = smoke_problems(results) + [f"{name}: the run failed" for name in failed]
        if not any(results[c] for c in configs):
            problems.append("no run of ours finished")
        if problems:
            print("Smoke run of the harness failed:\n  " + "\n  ".join(problems), file=sys.stderr)
            return 1
        print("Smoke run of the harness: every step ran and every figure is there.")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
