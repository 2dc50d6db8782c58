"""Benchmark: the rating page at the documented size limits.

Run:  .venv/bin/python tests/bench/bench_rating_page.py [--runs 7]

Not collected by pytest. Builds a fresh SQLite database (var/bench-rating.sqlite3) with one
LitSumm study holding three summaries, imported through import_jsonl as a study admin
would: a typical one (a 5,000-word source, a 200-word summary) and one at each limit of
core.text_validation (a 200,000-character source of ~2,000 sentences with reference
ids; a 20,000-character summary). It then renders each rating page through Django's test
client as the rater (the whole request: middleware, queries, template) and prints the
median time over --runs runs and the bytes sent.

Then, in Debian's Chromium (Playwright, as the browser tests drive it) against this
process's own threaded server: the time until the rating page of a summary that is one
200,000-character line of bracketed citations (and a source that is one 200,000-character
word) is interactive, i.e. loaded with its deferred script run and its Feedback box filled
(tests/browser/test_long_text_browser.py checks that it gets there; this is its figure).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from statistics import median

ROOT = Path(__file__).resolve().parents[2]
DB = ROOT / "var" / "bench-rating.sqlite3"
BENCH_PASSWORD = "bench-only-password"


def setup_django() -> None:
    sys.path.insert(0, str(ROOT))
    if DB.exists():
        DB.unlink()
    os.environ["DATABASE_URL"] = f"sqlite:///{DB}"
    os.environ.setdefault("SECRET_KEY", "bench-only-not-a-secret")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    os.environ.setdefault("ALLOWED_HOSTS", "testserver")
    import django

    django.setup()


def sentences(n_chars: int, words_per_sentence: int = 14) -> list[dict]:
    """Plain sentences of ~100 characters with PubMed-like refs, n_chars in all."""
    out, total, i = [], 0, 0
    while True:
        text = " ".join(f"word{(i * 7 + j) % 997}" for j in range(words_per_sentence)) + "."
        if total + len(text) + 1 > n_chars:
            break
        out.append({"text": text, "ref": f"PMC{100000 + i}"})
        total += len(text) + 1
        i += 1
    return out


def build() -> dict[str, str]:
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    from annotate.models import Study, Summary
    from annotate.services.assignments import assign_summaries
    from core.text_validation import MAX_SOURCE_CHARS, MAX_SUMMARY_CHARS

    call_command("migrate", verbosity=0)
    typical_source = sentences(5_000 * 7)  # ~5,000 words
    harness_source = sentences(300 * 7)  # ~300 words: the peers harness's task (tests/bench/peers/gen_tasks.py)
    big_source = sentences(MAX_SOURCE_CHARS)
    short_sentences = sentences(MAX_SOURCE_CHARS, words_per_sentence=3)  # ~8,000 sentences
    summary_words = " ".join(f"claim{j}" for j in range(200))
    big_summary = ("A long summary sentence that cites [PMC100001]. " * 1000)[:MAX_SUMMARY_CHARS]
    records = [
        {"type": "study", "slug": "bench", "title": "Bench", "rubric": "litsumm"},
        {"type": "source", "study": "bench", "key": "typical", "sentences": typical_source},
        {"type": "source", "study": "bench", "key": "big", "sentences": big_source},
        {"type": "source", "study": "bench", "key": "harness", "sentences": harness_source},
        {"type": "source", "study": "bench", "key": "short", "sentences": short_sentences},
        {
            "type": "summary",
            "study": "bench",
            "source": "typical",
            "key": "typical",
            "text": summary_words,
            "generator": "g",
        },
        {
            "type": "summary",
            "study": "bench",
            "source": "harness",
            "key": "harness-size",
            "text": " ".join(f"claim{j}" for j in range(150)),
            "generator": "g",
        },
        {
            "type": "summary",
            "study": "bench",
            "source": "big",
            "key": "big-source",
            "text": summary_words,
            "generator": "g",
        },
        {
            "type": "summary",
            "study": "bench",
            "source": "short",
            "key": "8k-sentences",
            "text": summary_words,
            "generator": "g",
        },
        {
            "type": "summary",
            "study": "bench",
            "source": "big",
            "key": "both-at-limit",
            "text": big_summary,
            "generator": "g",
        },
    ]
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as handle:
        handle.write("".join(json.dumps(r) + "\n" for r in records))
    call_command("import_jsonl", handle.name, verbosity=0)
    # The browser test's page (tests/browser/test_long_text_browser.py), past the import limits
    # (so written with the ORM, as that test's factories do): one 200,000-character line.
    from annotate.models import Source

    study = Study.objects.get(slug="bench")
    text = "Start. " + "x" * 200_000 + "."
    source = Source.objects.create(
        study=study, key="PMC1", text=text, sentence_spans=[[0, 6, "PMC1"], [7, len(text), "PMC1"]]
    )
    citations = ("[PMC1]" * (200_000 // 6 + 1))[:200_000]
    Summary.objects.create(study=study, source=source, key="long-line", text=citations, generator="g")
    rater = get_user_model().objects.create_user("bench-rater", password=BENCH_PASSWORD)
    study = Study.objects.get(slug="bench")
    assign_summaries(study=study, raters=[rater], per_item=1, seed=0)
    return {s.key: str(s.assignments.get().uuid) for s in Summary.objects.filter(study=study)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    setup_django()
    from django.contrib.auth import get_user_model
    from django.test import Client

    pages = build()
    client = Client()
    client.force_login(get_user_model().objects.get(username="bench-rater"))
    print(f"rating page, median of {args.runs} runs (after one warm-up), SQLite, DEBUG={os.environ.get('DEBUG', '0')}")
    print(f"{'page':<16} {'source chars':>12} {'summary chars':>13} {'median s':>9} {'KiB':>7}")
    from annotate.models import Summary

    for key, assignment in pages.items():
        summary = Summary.objects.select_related("source").get(key=key)
        url = f"/rate/{assignment}/"
        response = client.get(url)
        assert response.status_code == 200, (url, response.status_code)
        times = []
        for _ in range(args.runs):
            start = time.perf_counter()
            response = client.get(url)
            times.append(time.perf_counter() - start)
        print(
            f"{key:<16} {len(summary.source.text):>12,} {len(summary.text):>13,} "
            f"{median(times):>9.3f} {len(response.content) / 1024:>7.0f}"
        )
    browser_interactive(pages["long-line"], pages["harness-size"], args.runs)


def browser_interactive(assignment: str, small: str, runs: int) -> None:
    """Median seconds from navigation to the long-line rating page being interactive; then
    the harness-size page (a 300-word source, a 150-word summary) as a rater's browser
    first gets it (tests/bench/peers/browser_load.py, the peers harness's own measure: a
    fresh context with an empty cache each run): time until the summary and the source
    are on screen, bytes on the wire, requests."""
    import threading

    from django.core.handlers.wsgi import WSGIHandler
    from django.core.servers.basehttp import ThreadedWSGIServer, WSGIRequestHandler
    from playwright.sync_api import sync_playwright

    from tests.browser.conftest import CHROMIUM_ARGS, chromium_path, log_in

    class Quiet(WSGIRequestHandler):
        def log_message(self, *args):
            pass

    from django.conf import settings

    settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, "127.0.0.1"]
    server = ThreadedWSGIServer(("127.0.0.1", 0), Quiet)
    server.set_app(WSGIHandler())
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    times = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS, headless=True)
        page = browser.new_page(base_url=base)
        page.set_default_timeout(600_000)
        log_in(page, "bench-rater", BENCH_PASSWORD)
        for i in range(runs + 1):
            started = time.perf_counter()
            page.goto(f"/rate/{assignment}/")  # waits for "load": the deferred script has run
            page.get_by_label("Feedback").fill("Far too long.")
            if i:  # the first is a warm-up
                times.append(time.perf_counter() - started)
        browser.close()
    print(f"long line in Chromium: interactive after a median of {median(times):.2f} s over {runs} runs")
    sys.path.insert(0, str(ROOT / "tests" / "bench" / "peers"))
    import browser_load

    figures = browser_load.measure(
        base, f"{base}/rate/{small}/", "ours", "bench-rater", BENCH_PASSWORD, ["claim149", "word6"], runs=runs
    )
    print(
        "harness-size page in Chromium, fresh cache: text on screen after a median of "
        f"{figures['ready_ms_median']:.0f} ms; "
        f"{figures['kib_total_median']:.1f} KiB on the wire in {figures['requests_median']:.0f} requests "
        f"(goals: 100 ms, 30 KiB)"
    )
    server.shutdown()


if __name__ == "__main__":
    main()
