"""Benchmark: bootstrap intervals for the 150,000-row analysis benchmark's agreement.

Run:  .venv/bin/python tests/bench/bench_bootstrap.py [--resamples 1000] [--loop-resamples 10]

Not collected by pytest. Same synthetic frame as bench_analysis.py: 5,000 summaries ×
3 raters × 10 questions. "vectorised" is what the report runs,
stats.agreement_bootstrap.agreement_cis with --resamples resamples for every question.
"loop" is the previous way, bootstrap_cis over agreement_report, which recomputes every
statistic on each resampled frame. It is far too slow to run in full, so it runs
--loop-resamples resamples of one question and is scaled up to the same work (its cost
per resample is constant). Prints wall times (median of --runs) and the ratio.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_analysis import build_frames  # noqa: E402

from stats.agreement import agreement_report, bootstrap_cis, report_statistics  # noqa: E402
from stats.agreement_bootstrap import agreement_cis  # noqa: E402

SCALE = [1.0, 2.0, 3.0, 4.0, 5.0]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--resamples", type=int, default=1000)
    parser.add_argument("--loop-resamples", type=int, default=10)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    ratings, _ = build_frames(5000)
    questions = [frame.drop(columns="question") for _, frame in ratings.groupby("question")]
    print(f"{len(ratings):,} rating rows, {len(questions)} questions, {args.resamples} resamples each")

    def vectorised():
        for frame in questions:
            agreement_cis(frame, SCALE, args.resamples, seed=1)

    times = []
    for _ in range(args.runs):
        start = time.perf_counter()
        vectorised()
        times.append(time.perf_counter() - start)
    ours = statistics.median(times)

    start = time.perf_counter()
    bootstrap_cis(questions[0], lambda r: report_statistics(agreement_report(r, SCALE)), args.loop_resamples, seed=1)
    per_resample = (time.perf_counter() - start) / args.loop_resamples
    loop = per_resample * args.resamples * len(questions)
    print(f"vectorised: {ours:.1f} s (median of {args.runs})")
    print(f"loop:       {loop:.0f} s (estimated from {args.loop_resamples} resamples at {per_resample:.2f} s each)")
    print(f"ratio loop / vectorised: {loop / ours:.0f}x")


if __name__ == "__main__":
    main()
