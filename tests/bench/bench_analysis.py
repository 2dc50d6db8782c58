"""Benchmark: the agreement + correlation report on 150,000 rating rows, against a floor.

Run:  .venv/bin/python tests/bench/bench_analysis.py [--runs 5] [--items 5000]

Not collected by pytest (the name does not match test_*.py). The frame is synthetic and
seeded: 5,000 summaries × 3 raters × 10 questions on a 1-5 scale, each item with a latent
quality so that raters agree more than chance, and 3 automatic metrics per summary.

"ours" is what the analysis app runs: per question ``agreement_report`` (percent agreement,
Cohen's kappa per pair with 3 weightings, Fleiss, Randolph, Gwet's AC1, PABAK,
Krippendorff's alpha at 3 levels), then ``correlate_report`` of the metrics against the
mean human score of the first question (Spearman, Kendall tau-b, Holm, acc_eq).

"floor" computes the same numbers calling the libraries directly on the same frame with
no validation or bookkeeping: one pivot per question, sklearn, statsmodels, krippendorff,
scipy, numpy. acc_eq has no library (see docs/statistics.md), so the floor calls the same
``stats.metaeval.acc_eq``: its cost is in both columns.

Reports the median wall time over the runs, the ratio ours / floor (goal: within 2x) and
the peak traced Python memory (tracemalloc, one extra run each, which is slower).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import tracemalloc
import warnings
from itertools import combinations
from pathlib import Path

import krippendorff
import numpy as np
import pandas as pd
from scipy import stats
from sklearn.metrics import cohen_kappa_score
from statsmodels.stats.inter_rater import aggregate_raters, fleiss_kappa
from statsmodels.stats.multitest import multipletests

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from stats.agreement import agreement_report  # noqa: E402
from stats.frames import split_by_question  # noqa: E402
from stats.metaeval import acc_eq, correlate_report  # noqa: E402

SCALE = [1, 2, 3, 4, 5]
N_RATERS = 3
N_QUESTIONS = 10
METRICS = ["rouge1", "rougeL", "embedding"]


def build_frames(n_items: int, seed: int = 2026) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(tidy ratings: item, rater, question, value; per-item metrics: item + METRICS)."""
    rng = np.random.default_rng(seed)
    quality = rng.normal(3.5, 0.9, size=n_items)
    items = np.repeat(np.arange(n_items), N_RATERS * N_QUESTIONS)
    raters = np.tile(np.repeat(np.arange(N_RATERS), N_QUESTIONS), n_items)
    questions = np.tile(np.arange(N_QUESTIONS), n_items * N_RATERS)
    noise = rng.normal(0, 0.8, size=items.size)
    values = np.clip(np.rint(quality[items] + noise), 1, 5)
    ratings = pd.DataFrame(
        {
            "item": items,
            "rater": np.array(["r0", "r1", "r2"])[raters],
            "question": np.array([f"q{q}" for q in range(N_QUESTIONS)])[questions],
            "value": values,
        }
    )
    metrics = pd.DataFrame({"item": np.arange(n_items)})
    for i, name in enumerate(METRICS):
        metrics[name] = quality + rng.normal(0, 0.5 + i * 0.5, size=n_items)
    return ratings, metrics


def ours_agreement(ratings: pd.DataFrame, metrics: pd.DataFrame) -> dict:
    return {q: agreement_report(part, SCALE) for q, part in split_by_question(ratings).items()}


def ours_correlation(ratings: pd.DataFrame, metrics: pd.DataFrame) -> dict:
    human = ratings[ratings["question"] == "q0"].groupby("item")["value"].mean()
    table = metrics.assign(human=metrics["item"].map(human))
    return correlate_report(table, "human", METRICS)


def ours(ratings: pd.DataFrame, metrics: pd.DataFrame) -> dict:
    return {"agreement": ours_agreement(ratings, metrics), "correlation": ours_correlation(ratings, metrics)}


def floor(ratings: pd.DataFrame, metrics: pd.DataFrame) -> dict:
    return {**floor_agreement(ratings, metrics), **floor_correlation(ratings, metrics)}


def floor_agreement(ratings: pd.DataFrame, metrics: pd.DataFrame) -> dict:
    out: dict = {}
    for question, part in ratings.groupby("question", sort=True):
        wide = part.pivot(index="item", columns="rater", values="value")
        values = wide.to_numpy()
        codes = values.astype(int) - 1
        table, _ = aggregate_raters(codes, n_cat=len(SCALE))
        counts = table.astype(float)
        r = counts.sum(axis=1)
        p_a = float(((counts * (counts - 1)).sum(axis=1) / (r * (r - 1))).mean())
        pi = (counts / r[:, None]).mean(axis=0)
        p_e = float((pi * (1 - pi)).sum() / (len(SCALE) - 1))
        result = {
            "percent_agreement": p_a,
            "fleiss": fleiss_kappa(table, method="fleiss"),
            "randolph": fleiss_kappa(table, method="randolph"),
            "gwet_ac1": (p_a - p_e) / (1 - p_e),
            "pabak": (len(SCALE) * p_a - 1) / (len(SCALE) - 1),
        }
        for level in ("nominal", "ordinal", "interval"):
            result[level] = krippendorff.alpha(
                reliability_data=values.T, value_domain=SCALE, level_of_measurement=level
            )
        for a, b in combinations(range(values.shape[1]), 2):
            for weights in (None, "linear", "quadratic"):
                result[(a, b, weights)] = cohen_kappa_score(values[:, a], values[:, b], labels=SCALE, weights=weights)
        out[question] = result
    return out


def floor_correlation(ratings: pd.DataFrame, metrics: pd.DataFrame) -> dict:
    out: dict = {}
    human = ratings[ratings["question"] == "q0"].groupby("item")["value"].mean().to_numpy()
    rho = [stats.spearmanr(human, metrics[m].to_numpy()) for m in METRICS]
    tau = [stats.kendalltau(human, metrics[m].to_numpy()) for m in METRICS]
    out["holm_rho"] = multipletests([x.pvalue for x in rho], method="holm")[1]
    out["holm_tau"] = multipletests([x.pvalue for x in tau], method="holm")[1]
    out["acc_eq"] = [acc_eq(human, metrics[m].to_numpy()) for m in METRICS]
    return out


def check_same_numbers(a: dict, b: dict) -> None:
    """The floor must compute the same statistics, or the comparison means nothing."""
    for question, report in a["agreement"].items():
        f = b[question]
        assert np.isclose(report.fleiss_kappa.value, f["fleiss"]), question
        assert np.isclose(report.randolph_kappa.value, f["randolph"]), question
        assert np.isclose(report.krippendorff_alpha.ordinal, f["ordinal"]), question
        assert np.isclose(report.gwet_ac1, f["gwet_ac1"]), question
        assert np.isclose(report.cohen_kappa[0].quadratic, f[(0, 1, "quadratic")]), question
    for i, metric in enumerate(METRICS):
        assert np.isclose(a["correlation"]["metrics"][metric]["acc_eq"]["value"], b["acc_eq"][i].value)
        assert np.isclose(a["correlation"]["metrics"][metric]["spearman"]["p_holm"], b["holm_rho"][i])


def timed(function, *args, runs: int) -> list[float]:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        function(*args)
        times.append(time.perf_counter() - start)
    return times


def peak_memory(function, *args) -> float:
    tracemalloc.start()
    function(*args)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak / 2**20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--items", type=int, default=5000)
    args = parser.parse_args()
    warnings.simplefilter("ignore")

    ratings, metrics = build_frames(args.items)
    print(
        f"frame: {len(ratings):,} rating rows ({args.items:,} summaries × {N_RATERS} raters × {N_QUESTIONS} questions)"
    )
    check_same_numbers(ours(ratings, metrics), floor(ratings, metrics))  # also warms caches and imports
    for label, mine, base in (
        ("agreement  ", ours_agreement, floor_agreement),
        ("correlation", ours_correlation, floor_correlation),
        ("total      ", ours, floor),
    ):
        mine_median = statistics.median(timed(mine, ratings, metrics, runs=args.runs))
        base_median = statistics.median(timed(base, ratings, metrics, runs=args.runs))
        print(f"{label}: ours {mine_median:6.2f} s, floor {base_median:6.2f} s, ratio {mine_median / base_median:.2f}")
    print(f"(median of {args.runs} runs each; goal: ratio <= 2)")
    print(f"peak traced memory: ours {peak_memory(ours, ratings, metrics):.0f} MiB, "
          f"floor {peak_memory(floor, ratings, metrics):.0f} MiB")  # fmt: skip


if __name__ == "__main__":
    main()
