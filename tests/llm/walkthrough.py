"""`make test-llm`: every LLM command, end to end, against the local model (`make local-llm`).

Not part of CI (it takes tens of minutes on 2 cores). It starts the local server when none
answers on --port, prepares a fresh SQLite database under var/test-llm/ with the demo
studies, then runs as a user would, each command in its own process:

    generate --pipeline litsumm+factored, generate --pipeline selfcorrect (the
    self-correction baseline), answer_questions, evaluate with each evaluator and
    factored_verification with decomposed claims (on the demo's cited answers),
    judge_rubric, judge_rubric on the demo's pairwise study (each comparison asked in
    both orders), benchmark_detector on fixtures/halueval/sample.jsonl

and prints, per command: the LLM calls made, the answers that were well-formed (the
shape asked for) and usable (the step could use them), the failures with their reasons,
whether it printed a traceback, and its time. `--no-schema` runs the same with
GENERATION_JSON_SCHEMA=0 (plain JSON mode, as before structured output), for comparison.
The table goes to stdout and to var/test-llm/report-<mode>.md (`--work` for another
directory). Any OpenAI-compatible server already answering on --port is used instead of
the local model (the tests run it against the scripted server).
"""

from __future__ import annotations

import argparse
import collections
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PYTHON = ROOT / ".venv" / "bin" / "python"
LLM_PYTHON = ROOT / ".venv-llm" / "bin" / "python"


def commands(limit: int) -> list[tuple[str, list[str]]]:
    n = str(limit)
    halueval = str(ROOT / "fixtures" / "halueval" / "sample.jsonl")
    return [
        (
            "generate litsumm+factored",
            ["generate", "--study", "demo-litsumm", "--pipeline", "litsumm+factored", "--limit", n],
        ),
        ("generate selfcorrect", ["generate", "--study", "demo-litsumm", "--pipeline", "selfcorrect", "--limit", n]),
        ("answer_questions", ["answer_questions", "--study", "demo-questions", "--limit", n]),
        *[
            (f"evaluate {name}", ["evaluate", "--study", "demo-factpico", "--evaluator", name, "--limit", n])
            for name in ("factpico_fulltext", "factpico_extraction", "factored_verification", "reference")
        ],
        (
            # The demo's template answers cite [n]: the decomposition of the whole answer, then each claim checked.
            "evaluate factored_verification decomposed",
            ["evaluate", "--study", "demo-questions", "--evaluator", "factored_verification"]
            + ["--claims", "decomposed", "--limit", n],
        ),
        ("judge_rubric", ["judge_rubric", "--study", "demo-factpico", "--limit", n]),
        ("judge_rubric pairwise", ["judge_rubric", "--study", PAIRWISE_STUDY, "--limit", n]),
        # 4 records: 2 fit the threshold (few-shot takes its two examples from them), 2 are tested.
        ("benchmark_detector", ["benchmark_detector", halueval, "--limit", "4", "--calibration", "2"]),
    ]


# The demo's comparison study (docs/pairwise.md): the pairwise judge asks each pair in both orders.
PAIRWISE_STUDY = "demo-pairwise"


def server_up(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/models", timeout=3):
            return True
    except OSError:
        return False


def port_open(port: int) -> bool:
    """Something listens on the port (a busy llama.cpp server answers nothing else until
    its current request is done, so asking it for /models could time out)."""
    try:
        socket.create_connection(("127.0.0.1", port), timeout=3).close()
        return True
    except OSError:
        return False


def start_server(port: int, work: Path) -> subprocess.Popen | None:
    url = f"http://127.0.0.1:{port}/v1"
    if port_open(port):
        print(f"Using the server already answering on {url}", flush=True)
        return None
    if not LLM_PYTHON.exists():
        sys.exit("No local model: run `make local-llm-install` (or `make local-llm`) first.")
    log = open(work / "server.log", "w")  # noqa: SIM115 (open for the server's life)
    process = subprocess.Popen(
        ["make", "--no-print-directory", "local-llm", f"LLM_PORT={port}"],
        cwd=ROOT,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    deadline = time.monotonic() + 600
    while not server_up(url):
        if process.poll() is not None or time.monotonic() > deadline:
            sys.exit(f"The local server did not start; see {log.name}")
        time.sleep(2)
    print(f"Started the local server on {url}", flush=True)
    return process


def manage(args: list[str], env: dict) -> tuple[int, str, str, float]:
    started = time.monotonic()
    done = subprocess.run([str(PYTHON), "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True)
    return done.returncode, done.stdout, done.stderr, time.monotonic() - started


def summarise(first_id: int) -> dict:
    from generation.models import LLMCall

    calls = list(LLMCall.objects.filter(pk__gt=first_id).order_by("pk"))
    answered = [c for c in calls if c.status_code == 200]
    judged = [c for c in answered if c.well_formed is not None]
    reasons = collections.Counter()
    for c in calls:
        if c.status_code != 200 and "validation error" in c.error:
            # llama-cpp-python's answer to json_schema, once per process: the gateway steps down.
            reasons[f"json_schema refused (HTTP {c.status_code}), asked again with the schema in JSON mode"] += 1
        elif c.status_code != 200:
            reasons[f"HTTP {c.status_code or 'error'}"] += 1
        elif c.usable is False:
            reasons[short(c.problem)] += 1
    return {
        "calls": len(calls),
        "answers": len(answered),
        "judged": len(judged),
        "well_formed": sum(c.well_formed for c in judged),
        "usable": sum(bool(c.usable) for c in judged),
        "reasons": reasons,
        "last_id": calls[-1].pk if calls else first_id,
    }


def step_table() -> list[str]:
    """Per prompt: the answers, and how many were well-formed and usable."""
    from django.db.models import Count, Q

    from generation.models import LLMCall

    rows = (
        LLMCall.objects.filter(status_code=200, well_formed__isnull=False)
        .values("prompt_id")
        .annotate(n=Count("id"), ok=Count("id", filter=Q(well_formed=True)), used=Count("id", filter=Q(usable=True)))
        .order_by("prompt_id")
    )
    lines = ["| Prompt (step) | Answers | Well-formed | Usable |", "|---|---|---|---|"]
    lines += [
        f"| `{r['prompt_id']}` | {r['n']} | {share(r['ok'], r['n'])} | {share(r['used'], r['n'])} |" for r in rows
    ]
    return lines


def short(problem: str) -> str:
    """A reason without the model's quoted text, so that equal reasons group."""
    head = problem.split(" (")[0].split(": '")[0].split(' ("')[0]
    return head[:90]


def share(part: int, whole: int) -> str:
    return f"{part}/{whole} ({100 * part / whole:.0f} %)" if whole else "–"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=int(os.environ.get("LLM_PORT", "8080")))
    parser.add_argument("--limit", type=int, default=1, help="sources, questions or summaries per command (1)")
    parser.add_argument("--no-schema", action="store_true", help="GENERATION_JSON_SCHEMA=0, for comparison")
    parser.add_argument("--only", action="append", default=[], help="run only the commands whose label has this")
    parser.add_argument("--work", type=Path, default=ROOT / "var" / "test-llm", help="where the databases go")
    options = parser.parse_args()
    mode = "no-schema" if options.no_schema else "schema"

    work = options.work
    shutil.rmtree(work / mode, ignore_errors=True)
    (work / mode).mkdir(parents=True)
    database = f"sqlite:///{work / mode / 'db.sqlite3'}"
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("GENERATION_", "OPENAI_", "QUESTIONS_"))},
        "DATABASE_URL": database,
        "CELERY_BROKER_URL": "",
        "DEBUG": "1",  # the demo's accounts, as `make run` makes them
        "OPENAI_BASE_URL": f"http://127.0.0.1:{options.port}/v1",
        "OPENAI_API_KEY": "local",
        "GENERATION_MODEL": "smollm2",
        "GENERATION_CONCURRENCY": "1",
        "GENERATION_TIMEOUT": "600",
        "GENERATION_MAX_TOKENS": "384",
        "QUESTIONS_RELEVANCE": "top",  # a small local model: judge only the best three
        "QUESTIONS_MAX_ARTICLES": "3",
        "GENERATION_JSON_SCHEMA": "0" if options.no_schema else "1",
    }
    server = start_server(options.port, work)
    try:
        setup = (
            ["migrate", "--noinput"],
            ["load_demo"],
            ["load_question_demo", "--with-answers"],
        )
        for args in setup:
            code, out, err, _ = manage(args, env)
            if code:
                sys.exit(f"manage.py {' '.join(args)} failed:\n{out}\n{err}")
        os.environ.update(DATABASE_URL=database, DJANGO_SETTINGS_MODULE="config.settings")
        sys.path.insert(0, str(ROOT))
        import django

        django.setup()
        rows, last = [], 0
        chosen = [
            (label, args)
            for label, args in commands(options.limit)
            if not options.only or any(o in label for o in options.only)
        ]
        for label, args in chosen:
            print(f"running {label} ...", flush=True)
            code, out, err, seconds = manage(args, env)
            figures = summarise(last)
            last = figures["last_id"]
            traceback = "Traceback" in out or "Traceback" in err
            rows.append((label, code, traceback, seconds, figures))
            (work / mode / f"{label.replace(' ', '_')}.log").write_text(f"$ manage.py {' '.join(args)}\n{out}\n{err}")
            print(f"  exit {code}, {figures['calls']} calls, {seconds:.0f} s", flush=True)
    finally:
        if server is not None and server.poll() is None:
            os.killpg(server.pid, signal.SIGTERM)
            server.wait(timeout=60)

    lines = [
        f"Mode: {mode} (GENERATION_JSON_SCHEMA={env['GENERATION_JSON_SCHEMA']}), smollm2, --limit {options.limit}",
        "",
        "| Command | Exit | Traceback | Calls | Well-formed | Usable | Failures (reasons) | Time |",
        "|---|---|---|---|---|---|---|---|",
    ]
    total = collections.Counter()
    for label, code, traceback, seconds, f in rows:
        reasons = "; ".join(f"{n}× {reason}" for reason, n in f["reasons"].most_common(3)) or "none"
        lines.append(
            f"| `{label}` | {code} | {'yes' if traceback else 'no'} | {f['calls']} | "
            f"{share(f['well_formed'], f['judged'])} | {share(f['usable'], f['judged'])} | {reasons} | "
            f"{seconds / 60:.1f} min |"
        )
        if f["judged"]:
            total.update(judged=f["judged"], well_formed=f["well_formed"], usable=f["usable"], calls=f["calls"])
    lines.append(
        f"| all | | | {total['calls']} | {share(total['well_formed'], total['judged'])} | "
        f"{share(total['usable'], total['judged'])} | | |"
    )
    lines += ["", *step_table()]
    report = "\n".join(lines)
    (work / f"report-{mode}.md").write_text(report + "\n")
    print(report)
    if any(traceback for _, _, traceback, _, _ in rows):
        sys.exit("A command printed a traceback.")


if __name__ == "__main__":
    main()
