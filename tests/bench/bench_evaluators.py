"""Benchmark: the study report's reference metrics read from the `reference` evaluator's
stored run against computing them.

Run:  .venv/bin/python tests/bench/bench_evaluators.py [--summaries 2000] [--runs 3]

Not collected by pytest. On a fresh SQLite file (var/bench-evaluators.sqlite3): a study of
--summaries summaries over 200 abstracts of the Evidence Inference demo (fixtures/), then

1. `manage.py evaluate --evaluator reference` over the study (once: summaries per second);
2. the metric columns as the report builds them, median of --runs each way:
   computed (stats.metrics.metrics_frame over the texts) and stored (the stored run read
   back with generation.selectors.stored_reference_metrics, then metrics_frame with it).

Prints medians and the ratio computed / stored. Without the ML extra the embedding column
is neither computed nor stored, so this measures ROUGE, Flesch-Kincaid and length.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from statistics import median

from bench_bulk import setup_django

ROOT = Path(__file__).resolve().parents[2]
DB = ROOT / "var" / "bench-evaluators.sqlite3"


def abstracts(n: int) -> list[str]:
    texts = []
    for path in sorted((ROOT / "fixtures" / "demo").glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            record = json.loads(line)
            if record.get("type") == "source":
                text = record.get("text") or " ".join(s["text"] for s in record.get("sentences", []))
                texts.append(text)
    if not texts:
        raise SystemExit("no demo sources found under fixtures/demo")
    return [texts[i % len(texts)] for i in range(n)]


def build(n_summaries: int):
    from annotate.models import Source, Study, Summary
    from annotate.services.rubrics import load_builtin_rubric

    study = Study.objects.create(slug="bench-evaluators", title="bench", rubric=load_builtin_rubric(key="litsumm"))
    sources = Source.objects.bulk_create(
        Source(study=study, key=f"s{i}", title=f"s{i}", text=text) for i, text in enumerate(abstracts(200))
    )
    rows = []
    for i in range(n_summaries):
        source = sources[i % len(sources)]
        words = source.text.split()
        # A summary: the first sentences of the abstract, a different cut per summary.
        rows.append(
            Summary(study=study, source=source, key=f"m{i}", text=" ".join(words[: 30 + i % 40]), generator=f"g{i % 4}")
        )
    Summary.objects.bulk_create(rows)
    return study


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--summaries", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    setup_django(DB)
    from analysis import selectors
    from generation.evaluators import run_evaluation
    from stats.metrics import _rouge_tokens, metrics_frame

    study = build(args.summaries)
    start = time.perf_counter()
    run_evaluation(study=study, evaluator_name="reference")
    stored_seconds = time.perf_counter() - start
    print(
        f"reference evaluator over {args.summaries} summaries: {stored_seconds:.1f} s "
        f"({args.summaries / stored_seconds:.0f} summaries/s, stored once)"
    )

    texts = selectors.summary_texts_frame(study=study)
    computed, read = [], []
    for _ in range(args.runs):
        _rouge_tokens.cache_clear()  # a report computed in a fresh worker tokenises every text
        start = time.perf_counter()
        live = metrics_frame(texts)
        computed.append(time.perf_counter() - start)
        start = time.perf_counter()
        stored = selectors.stored_reference_metrics(study=study)
        from_store = metrics_frame(texts, stored=stored)
        read.append(time.perf_counter() - start)
    assert len(from_store) == len(live) == args.summaries
    a, b = median(computed), median(read)
    print(f"report metric columns, median of {args.runs}: computed {a:.2f} s, stored {b:.2f} s, ratio {a / b:.1f}x")


if __name__ == "__main__":
    main()
