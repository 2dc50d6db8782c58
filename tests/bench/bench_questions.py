"""Time per answer of `answer_questions` at a given LLM latency (not collected by pytest).

    .venv/bin/python tests/bench/bench_questions.py [--latency 0.5] [--questions 6] [--runs 3]

The demo's question study (150 Evidence Inference abstracts, local BM25 engine) on a fresh
SQLite file; the real openai client against the scripted server, in a process of its own,
where every call takes `latency` seconds. The scripted model writes one query, judges an
article relevant when it is the question's own trial, summarises it, and answers citing
[1]; Factored Verification checks each cited sentence. The floor is the number of LLM
calls a question made times the latency (the steps of one question run one after another;
questions run in parallel as jobs, GENERATION_CONCURRENCY at a time). Prints medians.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import sys
import tempfile
import time
from pathlib import Path
from statistics import median

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


def script(request):
    from tests.generation.scripted_server import Reply

    if request.step == "question_queries":
        question = request.section("Question")
        return Reply(json.dumps({"queries": [question]}))
    if request.step == "question_relevance":
        # The demo's questions name their trial's intervention: relevant when it is in the article.
        question, article = request.section("Question"), request.prompt.split("Article:\n", 1)[1]
        intervention = question.removeprefix("How does ").split(" compare with ")[0]
        return Reply(json.dumps({"reason": "r", "relevant": "yes" if intervention in article else "no"}))
    if request.step == "question_article":
        return Reply("Randomised trial; adults; the result as reported; risk of bias not reported.")
    if request.step == "question_synthesis":
        return Reply(json.dumps({"synthesis": "One trial answers the question [1].", "tldr": "See the trial [1]."}))
    if request.step == "factored_verify":
        return Reply(json.dumps({"critique": "ok", "quotes": [], "revised_claim": "N/A", "supported": "yes"}))
    return Reply(status=500, content=f"no script for {request.step}")


def serve(latency: float, conn) -> None:
    os.environ.update(DJANGO_SETTINGS_MODULE="config.settings", DEBUG="1", DATABASE_URL="sqlite:///:memory:")
    import django

    django.setup()
    from tests.generation.scripted_server import ScriptedServer

    with ScriptedServer(script, latency=latency) as server:
        conn.send(server.base_url)
        conn.recv()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--latency", type=float, default=0.5)
    parser.add_argument("--questions", type=int, default=6)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    parent, child = multiprocessing.Pipe()
    server = multiprocessing.Process(target=serve, args=(args.latency, child), daemon=True)
    server.start()
    base_url = parent.recv()
    tmp = tempfile.mkdtemp()
    os.environ.update(
        DJANGO_SETTINGS_MODULE="config.settings",
        DEBUG="1",
        DATABASE_URL=f"sqlite:///{tmp}/bench.sqlite3",
        OPENAI_BASE_URL=base_url,
        OPENAI_API_KEY="bench",
        GENERATION_MODEL="scripted-model",
        QUESTIONS_QUERIES="1",
        GENERATION_CONCURRENCY="1",
    )
    import django

    django.setup()
    from django.core.management import call_command

    from annotate.models import Study
    from generation.models import AnswerJob, LLMCall
    from generation.services import start_answer_run
    from generation.tasks import answer_question_task
    from literature.demo import QUESTION_STUDY, load_question_demo

    call_command("migrate", verbosity=0)
    load_question_demo(password="bench-only")
    study = Study.objects.get(slug=QUESTION_STUDY)
    per_answer, floors, calls = [], [], []
    for run in range(args.runs):
        os.environ["QUESTIONS_ARTICLE_CHARS"] = str(6000 + run)  # a new pipeline version: new jobs
        started = time.perf_counter()
        jobs = start_answer_run(
            study=study, engine="local", regime="unrestricted", limit=args.questions, enqueue=answer_question_task.delay
        )
        elapsed = time.perf_counter() - started
        done = AnswerJob.objects.filter(pk__in=[j.pk for j in jobs])
        assert all(j.status in ("ok", "skipped") for j in done), [(j.status, j.error) for j in done]
        n_calls = LLMCall.objects.filter(answer_job__in=done).count()
        per_answer.append(elapsed / len(jobs))
        calls.append(n_calls / len(jobs))
        floors.append(n_calls / len(jobs) * args.latency)
    parent.send("stop")
    print(f"answer_questions, local engine, {args.questions} demo questions, one at a time, latency {args.latency} s")
    print(
        f"  LLM calls per question: {median(calls):.1f} (1 query, 10 relevance, 1 article, 1 synthesis, verification)"
    )
    print(
        f"  time per answer: {median(per_answer):.2f} s; floor (calls x latency) {median(floors):.2f} s; "
        f"ratio {median(per_answer) / median(floors):.2f}"
    )


if __name__ == "__main__":
    main()
