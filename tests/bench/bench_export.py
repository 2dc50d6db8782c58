"""Benchmark: the dataset export of a study with 1,000,000 answer rows, against a floor.

Run:  .venv/bin/python tests/bench/bench_export.py [--summaries 20000] [--runs 3] [--rebuild]
      [--formats jsonl,parquet]   (add csv to time the CSV writer, with its formula-injection guard)

Not collected by pytest. The study is synthetic: 20,000 summaries × 5 raters × 10
questions (8 scales, a tick-box list, a text) = 1,000,000 rating rows, with a rationale
on every tenth. It is built once with bulk_create in a file SQLite database,
var/bench-export.sqlite3 (the build time is printed separately), and reused.

Each measurement runs in its own process, so its peak resident memory (ru_maxrss) is
its own:
- "ours": datasets.exporting.export_dataset to JSON Lines and Parquet (every table, the
  card with its agreement figures, checksums), streaming from the database;
- "floor, write": the same ratings rows, already in a pandas frame (read with one SQL
  query by pd.read_sql, not timed), written with DataFrame.to_json(lines=True) and
  pyarrow.parquet.write_table: the issue's floor;
- "floor, read + write": the same, with the pd.read_sql time included, since ours also
  has to read the rows from the database.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path
from statistics import median

ROOT = Path(__file__).resolve().parents[2]
DB = ROOT / "var" / "bench-export.sqlite3"
OUT = ROOT / "var" / "bench-export-out"
SLUG = "bench-export"
N_RATERS = 5
SCALES = [f"q{i}" for i in range(1, 9)]


def setup_django() -> None:
    sys.path.insert(0, str(ROOT))
    os.environ["DATABASE_URL"] = f"sqlite:///{DB}"
    os.environ.setdefault("SECRET_KEY", "bench-only-not-a-secret")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()


def rubric_definition() -> dict:
    scale = [{"value": v, "label": str(v)} for v in range(1, 6)]
    questions = [{"key": k, "kind": "scale", "prompt": k, "required": True, "options": scale} for k in SCALES]
    questions[0]["rationale"] = "optional"
    questions.append(
        {"key": "modes", "kind": "checkboxes", "prompt": "modes", "options": [{"value": v, "label": v} for v in "abc"]}
    )
    questions.append({"key": "note", "kind": "text", "prompt": "note"})
    return {"key": "bench", "title": "Benchmark rubric", "questions": questions}


def build(n_summaries: int) -> float:
    """Create the synthetic study; returns the seconds it took."""
    import random
    from datetime import UTC, datetime, timedelta

    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.db import transaction

    from annotate.models import Assignment, Rating, Rationale, Revision, Source, Study, Summary
    from annotate.services.rubrics import load_rubric

    start = time.perf_counter()
    call_command("migrate", verbosity=0)
    rng = random.Random(0)
    chunk = 50_000
    with transaction.atomic():
        rubric = load_rubric(definition=rubric_definition())
        study = Study.objects.create(slug=SLUG, title="Benchmark study", rubric=rubric, licence="CC-BY-4.0")
        users = [get_user_model().objects.create(username=f"bench-rater-{i}") for i in range(N_RATERS)]
        sources = Source.objects.bulk_create(
            Source(study=study, key=f"S{i:05d}", text=f"Source text {i}.", licence="CC BY 4.0")
            for i in range(n_summaries // 10)
        )
        summaries = Summary.objects.bulk_create(
            (
                Summary(study=study, source=sources[i // 10], key=f"T{i:06d}", text=f"Summary {i}.", generator="g")
                for i in range(n_summaries)
            ),
            batch_size=chunk,
        )
        assignments = Assignment.objects.bulk_create(
            (
                Assignment(study=study, summary=s, rater=u, position=i, state="submitted")
                for r, u in enumerate(users)
                for i, s in enumerate(summaries)
            ),
            batch_size=chunk,
        )
        base = datetime(2026, 1, 1, tzinfo=UTC)
        revisions = Revision.objects.bulk_create(
            (
                Revision(
                    assignment=a,
                    number=1,
                    status="submitted",
                    rubric=rubric,
                    submitted_at=base + timedelta(seconds=n),
                )
                for n, a in enumerate(assignments)
            ),
            batch_size=chunk,
        )
        quality = [rng.randint(1, 5) for _ in summaries]
        ratings = []
        for n, revision in enumerate(revisions):
            q = quality[n % n_summaries]
            for key in SCALES:
                score = min(5, max(1, q + rng.choice((-1, 0, 0, 0, 1))))
                ratings.append(Rating(revision=revision, question=key, score=score, scale_min=1, scale_max=5))
            ratings.append(Rating(revision=revision, question="modes", value=[rng.choice("abc")]))
            ratings.append(Rating(revision=revision, question="note", value=f"Note {n}"))
            if len(ratings) >= chunk:
                created = Rating.objects.bulk_create(ratings)
                Rationale.objects.bulk_create(
                    Rationale(rating=r, text="Because.") for r in created if r.question == "q1"
                )
                ratings = []
        created = Rating.objects.bulk_create(ratings)
        Rationale.objects.bulk_create(Rationale(rating=r, text="Because.") for r in created if r.question == "q1")
    return time.perf_counter() - start


FLOOR_SQL = """
SELECT s.key AS summary_key, r.question, f.uuid AS finding, r.score, r.value, ra.text AS rationale,
       rev.phase, rb.key AS rubric_key, rb.version AS rubric_version, a.rater_id AS rater, b.name AS batch,
       rev.number AS revision_number, rev.submitted_at, rev.assisted
FROM annotate_rating r
JOIN annotate_revision rev ON rev.id = r.revision_id
JOIN annotate_assignment a ON a.id = rev.assignment_id
JOIN annotate_summary s ON s.id = a.summary_id
JOIN annotate_rubric rb ON rb.id = rev.rubric_id
LEFT JOIN annotate_finding f ON f.id = r.finding_id
LEFT JOIN annotate_rationale ra ON ra.rating_id = r.id
LEFT JOIN annotate_batch b ON b.id = a.batch_id
JOIN annotate_study st ON st.id = a.study_id
WHERE st.slug = ? AND rev.status = 'submitted'
ORDER BY s.key, b.name, a.rater_id, rev.phase, r.question
"""


def child(mode: str, formats: list[str]) -> None:
    setup_django()
    out = OUT / mode
    shutil.rmtree(out, ignore_errors=True)
    result: dict = {"mode": mode}
    if mode == "ours":
        # Imported before timing, as a worker process has them (the floor's pandas and
        # pyarrow are imported before its timer too): the export, the statistics of
        # the card, pyarrow.
        import pyarrow.parquet  # noqa: F401

        import stats.agreement  # noqa: F401
        from annotate.models import Study
        from datasets.exporting import export_dataset

        study = Study.objects.select_related("rubric").get(slug=SLUG)
        start = time.perf_counter()
        exported = export_dataset(study=study, out_dir=out, formats=formats)
        result["seconds"] = time.perf_counter() - start
        result["rows"] = exported.counts["ratings"]
    else:
        import pandas as pd
        import pyarrow as pa
        import pyarrow.parquet as pq
        from django.db import connection

        connection.ensure_connection()
        start = time.perf_counter()
        frame = pd.read_sql(FLOOR_SQL, connection.connection, params=(SLUG,))
        read = time.perf_counter() - start
        out.mkdir(parents=True)
        start = time.perf_counter()
        frame.to_json(out / "ratings.jsonl", orient="records", lines=True, force_ascii=False)
        pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), out / "ratings.parquet", compression="zstd")
        result["write_seconds"] = time.perf_counter() - start
        result["read_seconds"] = read
        result["rows"] = len(frame)
    result["max_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps(result))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--summaries", type=int, default=20_000, help="summaries (× 5 raters × 10 questions rows)")
    parser.add_argument("--runs", type=int, default=3, help="runs of each measurement; medians are reported")
    parser.add_argument("--rebuild", action="store_true", help="delete and rebuild the synthetic database")
    parser.add_argument(
        "--formats", default="jsonl,parquet", help="formats of our export, comma-separated (jsonl, csv, parquet)"
    )
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    formats = [f for f in args.formats.split(",") if f]
    if args.child:
        child(args.child, formats)
        return
    if args.rebuild and DB.exists():
        DB.unlink()
    if not DB.exists():
        setup_django()
        print(f"building {args.summaries * N_RATERS * 10:,} answer rows in {DB} ...", flush=True)
        print(f"build: {build(args.summaries):.1f} s", flush=True)
    runs: dict[str, list[dict]] = {"ours": [], "floor": []}
    for _ in range(args.runs):  # interleaved, so a slow spell of the machine hits both
        for mode in ("ours", "floor"):
            done = subprocess.run(
                [sys.executable, __file__, "--child", mode, "--formats", ",".join(formats)],
                check=True,
                capture_output=True,
                text=True,
                cwd=ROOT,
            )
            runs[mode].append(json.loads(done.stdout.strip().splitlines()[-1]))
    ours = {key: median(r[key] for r in runs["ours"]) for key in ("seconds", "max_rss_mib", "rows")}
    write = median(r["write_seconds"] for r in runs["floor"])
    read_write = median(r["write_seconds"] + r["read_seconds"] for r in runs["floor"])
    floor_rss = median(r["max_rss_mib"] for r in runs["floor"])
    assert ours["rows"] == runs["floor"][0]["rows"], (ours["rows"], runs["floor"][0]["rows"])
    print(f"answer rows: {ours['rows']:,}; medians of {args.runs} runs")
    each = ", ".join(f"{r['seconds']:.1f}" for r in runs["ours"])
    print(
        f"ours ({', '.join(formats)}; every table, card, checksums): {ours['seconds']:.1f} s,"
        f" {ours['max_rss_mib']:.0f} MiB"
        f" = {ours['max_rss_mib'] * 2**20 / 1e6:.0f} MB peak  (runs: {each} s)"
    )
    print(f"floor, write only (frame in memory):  {write:.1f} s  ratio {ours['seconds'] / write:.2f}")
    print(f"floor, read + write (pd.read_sql):    {read_write:.1f} s  ratio {ours['seconds'] / read_write:.2f}")
    print(f"floor peak memory: {floor_rss:.0f} MiB")
    shutil.rmtree(OUT, ignore_errors=True)


if __name__ == "__main__":
    main()
