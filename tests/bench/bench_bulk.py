"""Benchmark: studies of tens of thousands of summaries.

Run:  .venv/bin/python tests/bench/bench_bulk.py [--sizes 500 50000] [--answers 50000]

Not collected by pytest. On a fresh SQLite file (var/bench-bulk.sqlite3), in a running
process as the API import runs:

1. Import of N sources with their summaries (alternating, as hand-made files are) through
   import_records, against a bare floor: the same rows written with bulk_create and one
   executemany of the sentences, with no parsing, checks, lookups or counting.
2. Reading every answer of a batch of --answers submitted answers through the REST API as
   a study admin: the first and the last page by page number (50 rows each), every page
   by cursor (median, first, last and slowest page), the JSON Lines stream, the batch's
   disagreements on one question, and the last page of the summaries list.

3. Peak memory (RSS) of `manage.py import_jsonl` on files of --memory-sizes summaries,
   each in a fresh process: flat in the file's size means the ratio stays near 1.

Prints medians over --runs and the ratios.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from statistics import median

ROOT = Path(__file__).resolve().parents[2]
DB = ROOT / "var" / "bench-bulk.sqlite3"


def setup_django(db: Path = DB) -> None:
    """Django on a fresh SQLite file `db`, migrated (bench_evaluators uses it too)."""
    sys.path.insert(0, str(ROOT))
    for suffix in ("", "-wal", "-shm", ".writelock"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    os.environ["DATABASE_URL"] = f"sqlite:///{db}"
    os.environ.setdefault("SECRET_KEY", "bench-only-not-a-secret")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    os.environ.setdefault("ALLOWED_HOSTS", "testserver")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


SOURCE = (
    "Adults with moderate asthma were randomised to drug A or placebo for twelve weeks. "
    "Drug A reduced severe attacks compared with placebo. Adverse events were similar in both groups. "
    "Lung function improved slightly with drug A. The authors call for longer trials."
)


def lines(slug: str, n: int) -> list[str]:
    out = [json.dumps({"type": "study", "slug": slug, "title": slug, "rubric": "litsumm"}) + "\n"]
    for i in range(n):
        out.append(json.dumps({"type": "source", "study": slug, "key": f"s{i}", "text": f"Trial {i}. {SOURCE}"}) + "\n")
        out.append(
            json.dumps(
                {
                    "type": "summary",
                    "study": slug,
                    "source": f"s{i}",
                    "key": f"m{i}",
                    "text": f"In trial {i}, drug A cut severe asthma attacks.",
                    "generator": "bench",
                }
            )
            + "\n"
        )
    return out


def floor(slug: str, n: int) -> float:
    """The same rows with no import logic: bulk_create of the sources (their sentences in
    each row) and of the summaries."""
    from django.db import transaction

    from annotate.models import Source, Study, Summary
    from annotate.services.rubrics import load_builtin_rubric
    from core.sentences import split_spans

    started = time.perf_counter()
    with transaction.atomic():
        study = Study.objects.create(slug=slug, title=slug, rubric=load_builtin_rubric(key="litsumm"))
        texts = [f"Trial {i}. {SOURCE}" for i in range(n)]
        sources = Source.objects.bulk_create(
            [
                Source(study=study, key=f"s{i}", text=t, sentence_spans=[[s, e, ""] for s, e in split_spans(t)])
                for i, t in enumerate(texts)
            ],
            batch_size=500,
        )
        Summary.objects.bulk_create(
            [
                Summary(
                    study=study, source=source, key=f"m{i}", text=f"In trial {i}, drug A cut severe asthma attacks."
                )
                for i, source in enumerate(sources)
            ],
            batch_size=500,
        )
    return time.perf_counter() - started


def bench_import(sizes: list[int], runs: int) -> None:
    from datasets.importing import import_records

    print("Import of N sources with their summaries (alternating), SQLite, in process")
    print(f"{'N':>8} {'import_records':>15} {'bare floor':>11} {'ratio':>6}")
    for n in sizes:
        ours, bare = [], []
        for r in range(runs if n <= 5000 else 1):
            text = lines(f"imp-{n}-{r}", n)
            started = time.perf_counter()
            import_records(lines=text)
            ours.append(time.perf_counter() - started)
            bare.append(floor(f"floor-{n}-{r}", n))
        print(f"{n:>8} {median(ours):>14.2f}s {median(bare):>10.2f}s {median(ours) / median(bare):>5.2f}x")


# The child's peak is its VmHWM (/proc/self/status): the high-water mark of this process image,
# reset at exec. ru_maxrss is not: Linux carries it from the parent across fork and exec, so a
# child of a large parent printed the parent's peak (254 MB for every size).
MEMORY_SCRIPT = """
import os, sys
sys.path.insert(0, os.environ["BENCH_ROOT"])
import django
django.setup()
from django.core.management import call_command
call_command("migrate", verbosity=0)
call_command("import_jsonl", sys.argv[1], stdout=open(os.devnull, "w"), stderr=open(os.devnull, "w"))
with open("/proc/self/status") as status:
    print(next(int(line.split()[1]) for line in status if line.startswith("VmHWM:")))  # KiB
"""


def bench_memory(sizes: list[int]) -> None:
    """Peak resident memory of `manage.py import_jsonl` on files of each size, each in a
    fresh process on its own fresh SQLite file (the process's own peak, VmHWM)."""
    import subprocess
    import tempfile

    print("\nPeak memory of manage.py import_jsonl by file size (fresh process, SQLite)")
    print(f"{'N':>8} {'file':>9} {'peak RSS (VmHWM)':>17}")
    peaks = []
    for n in sizes:
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "in.jsonl"
            path.write_text("".join(lines(f"mem-{n}", n)), encoding="utf-8")
            env = dict(os.environ, BENCH_ROOT=str(ROOT), DATABASE_URL=f"sqlite:///{tmp}/mem.sqlite3")
            out = subprocess.run(
                [sys.executable, "-c", MEMORY_SCRIPT, str(path)], env=env, check=True, capture_output=True, text=True
            )
            peak_mb = int(out.stdout.split()[-1]) / 1024  # MiB
            peaks.append(peak_mb)
            print(f"{n:>8} {path.stat().st_size / 2**20:>7.1f}MB {peak_mb:>15.0f}MiB")
    print(f"  ratio of peaks, largest / smallest file: {peaks[-1] / peaks[0]:.2f}")


def answered_batch(n_answers: int):
    """A batch of n_answers submitted LitSumm answers (2 raters), written in bulk."""
    from django.contrib.auth import get_user_model
    from django.db import transaction
    from django.utils import timezone

    from annotate.models import Assignment, Batch, Rating, Revision, Study, StudyMembership, Summary
    from annotate.services.members import add_study_member

    user_model = get_user_model()
    admin = user_model.objects.create(username="bench-admin")
    raters = [user_model.objects.create(username=f"bench-r{k}") for k in (1, 2)]
    import_lines = lines("answers", n_answers // 2)
    from datasets.importing import import_records

    import_records(lines=import_lines)
    study = Study.objects.get(slug="answers")
    add_study_member(study=study, user=admin, role=StudyMembership.Role.ADMIN)
    for rater in raters:
        add_study_member(study=study, user=rater, role=StudyMembership.Role.RATER)
    now = timezone.now()
    with transaction.atomic():
        batch = Batch.objects.create(study=study, name="main", seed=1, raters_per_item=2)
        summaries = list(Summary.objects.filter(study=study).order_by("pk"))
        assignments = Assignment.objects.bulk_create(
            [
                Assignment(study=study, batch=batch, summary=s, rater=r, position=i, state=Assignment.State.SUBMITTED)
                for i, s in enumerate(summaries)
                for r in raters
            ],
            batch_size=500,
        )
        revisions = Revision.objects.bulk_create(
            [
                Revision(
                    assignment=a, number=1, rubric=study.rubric, status=Revision.Status.SUBMITTED, submitted_at=now
                )
                for a in assignments
            ],
            batch_size=500,
        )
        Rating.objects.bulk_create(
            [
                Rating(revision=v, question="overall", score=1 + i % 5, scale_min=1, scale_max=5)
                for i, v in enumerate(revisions)
            ]
            + [Rating(revision=v, question="failure_modes", value=["bad_length"]) for v in revisions],
            batch_size=500,
        )
    return study, batch, admin


def bench_answers(n_answers: int, runs: int) -> None:
    from rest_framework.test import APIClient

    study, batch, admin = answered_batch(n_answers)
    client = APIClient()
    client.force_authenticate(admin)
    base = f"/api/studies/{study.slug}/batches/{batch.uuid}/"

    def timed(url):
        started = time.perf_counter()
        response = client.get(url)
        body = b"".join(response.streaming_content) if response.streaming else response.content
        assert response.status_code == 200, body[:300]
        return time.perf_counter() - started, body

    _, first = timed(base + "answers/")
    count = json.loads(first)["count"]
    last_page = (count + 49) // 50
    first_ms = median(timed(base + "answers/")[0] for _ in range(runs)) * 1000
    last_ms = median(timed(base + f"answers/?page={last_page}")[0] for _ in range(runs)) * 1000
    # Every page in turn by cursor (the way a client reads "all of it" page by page).
    started, url, rows, page_times = time.perf_counter(), base + "answers/?cursor=", 0, []
    while url:
        took, body = timed(url)
        page_times.append(took * 1000)
        page = json.loads(body)
        rows += len(page["results"])
        url = page["next"]
    all_pages = time.perf_counter() - started
    stream_s = median(timed(base + "answers.jsonl")[0] for _ in range(runs))
    _, body = timed(base + "answers.jsonl")
    assert rows == count == body.count(b"\n"), (rows, count)
    question = "overall"
    disagreements_s = median(timed(base + f"disagreements/?question={question}")[0] for _ in range(runs))
    summaries = f"/api/studies/{study.slug}/summaries/"
    n_summaries = json.loads(timed(summaries)[1])["count"]
    summaries_last = (n_summaries + 49) // 50
    summaries_last_ms = median(timed(summaries + f"?page={summaries_last}")[0] for _ in range(runs)) * 1000
    print(f"\nReading the {count:,} answers of one batch through the API (admin), SQLite, in process")
    print(f"  page numbers: first page (50 rows) {first_ms:.0f} ms; last page ({last_page}) {last_ms:.0f} ms")
    print(f"  ratio last page / first page: {last_ms / first_ms:.2f}")
    print(
        f"  cursor pages, all {len(page_times)} in turn: {all_pages:.1f} s; median page {median(page_times):.0f} ms,"
        f" first {page_times[0]:.0f} ms, last {page_times[-1]:.0f} ms, slowest {max(page_times):.0f} ms"
        f", 95th percentile {sorted(page_times)[int(len(page_times) * 0.95)]:.0f} ms"
    )
    print(f"  the stream (answers.jsonl): {stream_s:.1f} s; cursor pages / stream: {all_pages / stream_s:.1f}x")
    print(f"  disagreements on '{question}' ({count // 2:,} items compared): {disagreements_s:.2f} s")
    print(f"  summaries list, last page ({summaries_last}) of {n_summaries:,}: {summaries_last_ms:.0f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[500, 50_000])
    parser.add_argument("--answers", type=int, default=50_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--memory-sizes", type=int, nargs="+", default=[5_000, 50_000])
    args = parser.parse_args()
    setup_django()
    bench_import(args.sizes, args.runs)
    bench_memory(args.memory_sizes)
    bench_answers(args.answers, args.runs)


if __name__ == "__main__":
    main()
