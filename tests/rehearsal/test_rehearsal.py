"""The rehearsal of the production shape: two gunicorn web servers and two
Celery workers, each in a working directory of its own with no shared disk, on
PostgreSQL, Redis and an S3-compatible server (moto in server mode, a separate process),
with the NCBI E-utilities and the LLM endpoint as scripted servers.

Marked `rehearsal`: it needs PostgreSQL and Redis running, so the default run leaves it
out; `.ci/run` runs it once (`pytest -m rehearsal`). Settings:
- REHEARSAL_DATABASE_URL: a PostgreSQL database the rehearsal drops and creates afresh
  (default postgres://postgres@127.0.0.1:5432/ratings_rehearsal);
- REHEARSAL_REDIS_URL: a Redis database of its own, emptied first (default
  redis://127.0.0.1:6379/14): the broker, and the shared limits through it.

Its figures (requests, errors, seconds per step) are written to
`var/rehearsal/figures.json` and printed; docs/deployment.md records a run's.

The scenario, each step against the running processes over HTTP:
1. a report asked for on web 1 is computed by a worker and read on web 1 and web 2, by
   token on the API and by one session cookie on both pages (no sticky sessions);
2. twelve clinical questions answered from PubMed by the two workers at once: at the
   scripted E-utilities server never more than 3 requests (NCBI's limit without a key) in
   any second, and at the scripted LLM server never more than GENERATION_CONCURRENCY (1)
   requests at once, though each worker alone would respect its own limit only;
3. an import uploaded on web 1 (3,000 sources, each with a summary) is processed by a
   worker and its status read on web 2;
4. an export started on web 2 is downloaded on web 1, its rows those of the study;
5. a worker killed with SIGKILL (its whole process group) in the middle of an export leaves
   the run to the other worker once its lease (RUN_LEASE, 5 s here) has run out and the
   sweep (`manage.py sweep_runs`, as cron runs it) has queued it again; the export it
   finishes holds every row once.
"""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import time
import zipfile

import httpx2
import pytest
import redis

from tests.generation.scripted_server import Reply as LLMReply
from tests.generation.scripted_server import ScriptedServer as LLMServer
from tests.literature.ncbi_server import NcbiServer, esearch_xml
from tests.literature.ncbi_server import Reply as NcbiReply
from tests.literature.test_pubmed import library
from tests.rehearsal.harness import PROXY_HEADERS, ROOT, Cluster, fresh_database, wait_until

pytestmark = pytest.mark.rehearsal

DATABASE_URL = os.environ.get("REHEARSAL_DATABASE_URL") or "postgres://postgres@127.0.0.1:5432/ratings_rehearsal"
REDIS_URL = os.environ.get("REHEARSAL_REDIS_URL") or "redis://127.0.0.1:6379/14"
REPORT_STUDY = "demo-litsumm"
QUESTION_STUDY = "demo-questions"
IMPORTED_SOURCES = 3000  # enough for an export to take seconds, to be killed in the middle
NCBI_RATE = 3  # NCBI's requests per second without a key
LLM_CONCURRENCY = 1
FIGURES = ROOT / "var" / "rehearsal" / "figures.json"

VERIFY = [LLMReply(json.dumps({"claims": []}))]


def max_in_any_second(times: list[float]) -> int:
    """The most arrivals in any half-open window [t, t + 1 s) (tests/core/test_ratelimit.py)."""
    times = sorted(times)
    return max((sum(1 for t in times if start <= t < start + 1.0) for start in times), default=0)


def llm_steps() -> dict:
    return {
        "factored_verify": VERIFY,
        "question_queries": [LLMReply(json.dumps({"queries": ["aspirin[tiab] AND stroke[tiab]"]}))],
        "question_relevance": [
            lambda r: LLMReply(json.dumps({"reason": "r", "relevant": "yes" if "Aspirin after" in r.prompt else "no"}))
        ],
        "question_article": [LLMReply("RCT, adults, aspirin reduced recurrence; bias not reported.")],
        "question_synthesis": [LLMReply(json.dumps({"synthesis": "Aspirin helps [1].", "tldr": "Yes [1]."}))],
    }


class Figures:
    """Requests, errors and seconds of each step, for docs/deployment.md."""

    def __init__(self) -> None:
        self.steps: dict[str, dict] = {}

    def record(self, step: str, **values) -> None:
        self.steps.setdefault(step, {}).update(values)

    def write(self) -> None:
        FIGURES.parent.mkdir(parents=True, exist_ok=True)
        FIGURES.write_text(json.dumps(self.steps, indent=2) + "\n")
        print("\nrehearsal figures:\n" + json.dumps(self.steps, indent=2))


class Browser:
    """An HTTP client of the load balancer's view: any request may go to either web
    server. It counts what it sent and every 5xx it got."""

    def __init__(self, token: str = "") -> None:
        headers = dict(PROXY_HEADERS)
        if token:
            headers["Authorization"] = f"Token {token}"
        self.http = httpx2.Client(headers=headers, timeout=60, follow_redirects=False)
        self.requests = 0
        self.errors = 0

    def send(self, method: str, url: str, **kwargs) -> httpx2.Response:
        response = self.http.request(method, url, **kwargs)
        self.requests += 1
        self.errors += response.status_code >= 500
        return response

    def get(self, url: str, **kwargs) -> httpx2.Response:
        return self.send("GET", url, **kwargs)

    def post(self, url: str, **kwargs) -> httpx2.Response:
        return self.send("POST", url, **kwargs)

    def login(self, web: str, username: str, password: str) -> None:
        page = self.get(f"{web}/accounts/login/")
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text).group(1)
        answer = self.post(
            f"{web}/accounts/login/",
            data={"username": username, "password": password, "csrfmiddlewaretoken": token},
        )
        assert answer.status_code == 302, answer.text[:500]


@pytest.fixture(scope="module")
def scripted():
    with (
        NcbiServer(replies={"esearch.fcgi": [NcbiReply(esearch_xml(["103", "101"]))]}, **library()) as ncbi,
        LLMServer(steps=llm_steps(), latency=0.05) as llm,
    ):
        yield ncbi, llm


@pytest.fixture(scope="module")
def cluster(scripted, tmp_path_factory):
    ncbi, llm = scripted
    client = redis.Redis.from_url(REDIS_URL)
    client.flushdb()
    base = tmp_path_factory.mktemp("machines")
    started = time.monotonic()
    figures = Figures()
    cluster = Cluster(
        base,
        database_url=fresh_database(DATABASE_URL),
        redis_url=REDIS_URL,
        extra_env={
            "NCBI_EUTILS_URL": ncbi.base_url,
            "OPENAI_BASE_URL": llm.base_url,
            "OPENAI_API_KEY": "rehearsal-key",
            "GENERATION_CONCURRENCY": str(LLM_CONCURRENCY),
            "RUN_LEASE": "5",
        },
    )
    try:
        cluster.start_s3()
        cluster.manage("release", "migrate", "--noinput")
        cluster.manage("release", "collectstatic", "--noinput")
        cluster.manage("release", "load_demo", "--with-answers")
        cluster.manage("release", "load_question_demo")
        cluster.token = cluster.manage("release", "create_api_token", "admin").strip().splitlines()[-1]
        for name in ("web1", "web2"):
            cluster.start_web(name)
        for name in ("worker1", "worker2"):
            cluster.start_worker(name)
        figures.record("start", seconds=round(time.monotonic() - started, 1))
        cluster.figures = figures
        yield cluster
    finally:
        cluster.stop()
        figures.write()
        shutil.rmtree(base, ignore_errors=True)


def web(cluster: Cluster, n: int) -> str:
    return next(s.url for s in cluster.services if s.name == f"web{n}")


def worker_logs(cluster: Cluster) -> dict[str, str]:
    return {s.name: s.output() for s in cluster.services if s.name.startswith("worker")}


def test_the_production_shape_across_machines_that_share_no_disk(cluster, scripted):
    ncbi, llm = scripted
    web1, web2 = web(cluster, 1), web(cluster, 2)
    logs = cluster.services

    # 1. A report asked for on web 1, computed by a worker, read on both.
    started = time.monotonic()
    api = Browser(cluster.token)
    asked = api.post(f"{web1}/api/studies/{REPORT_STUDY}/analysis/", json={"phase": "all"})
    assert asked.status_code == 202, asked.text[:500]

    def report_on_web2():
        answer = api.get(f"{web2}/api/studies/{REPORT_STUDY}/analysis/?phase=all")
        return answer if answer.status_code == 200 else None

    on_web2 = wait_until(report_on_web2, what="the report on web 2", every=0.5, logs=logs)
    assert on_web2.json()["status"] == "done", on_web2.text[:500]
    on_web1 = api.get(f"{web1}/api/studies/{REPORT_STUDY}/analysis/?phase=all")
    assert on_web1.status_code == 200 and on_web1.json()["result"] == on_web2.json()["result"]
    # The numbers are stored before the worker draws the plots: its task ends a little later.
    wait_until(
        lambda: re.search(r"run_study_report_task\[[^\]]+\] succeeded", "".join(worker_logs(cluster).values())),
        what="the report task to end",
        logs=logs,
    )

    person = Browser()
    person.login(web1, "admin", "rehearsal-password")
    for server in (web1, web2):  # the session made on web 1 is good on web 2: no sticky sessions
        page = person.get(f"{server}/analysis/{REPORT_STUDY}/")
        assert page.status_code == 200, page.text[:300]
        assert "Agreement" in page.text or "agreement" in page.text
        # The page's style sheet under its hashed name, gzipped, cached for good.
        sheet = re.search(r'href="(/static/css/app\.[0-9a-f]{12}\.css)"', page.text)
        assert sheet, page.text[:1000]
        css = person.get(server + sheet.group(1), headers={"Accept-Encoding": "gzip"})
        assert css.status_code == 200 and css.headers["Content-Encoding"] == "gzip"
        assert "immutable" in css.headers["Cache-Control"]
    cluster.figures.record(
        "report",
        requests=api.requests + person.requests,
        errors=api.errors + person.errors,
        seconds=round(time.monotonic() - started, 1),
    )

    # 2. Questions answered from PubMed by both workers at once, within the shared limits.
    started = time.monotonic()
    before_ncbi, before_llm = len(ncbi.requests), len(llm.requests)
    output = cluster.manage("cli", "answer_questions", "--study", QUESTION_STUDY, "--engine", "pubmed")
    assert re.search(r"12 questions.*12 ok", output), output
    arrivals = [r.received_at for r in ncbi.requests[before_ncbi:]]

    def answered_by_worker():
        done = {
            name: len(re.findall(r"answer_question_task\[[^\]]+\] succeeded", log))
            for name, log in worker_logs(cluster).items()
        }
        return done if sum(done.values()) == 12 else None

    ran_on = wait_until(answered_by_worker, what="the workers' logs of twelve answers", logs=logs)
    assert all(ran_on.values()), f"both workers should have answered questions: {ran_on}"
    assert len(arrivals) >= 24  # an esearch and an efetch per question at least
    busiest = max_in_any_second(arrivals)
    assert busiest <= NCBI_RATE, f"{busiest} NCBI requests in one second"
    assert llm.max_in_flight <= LLM_CONCURRENCY
    cluster.figures.record(
        "ncbi",
        questions=12,
        tasks_per_worker=ran_on,
        ncbi_requests=len(arrivals),
        ncbi_busiest_second=busiest,
        ncbi_requests_per_second=round(len(arrivals) / (max(arrivals) - min(arrivals)), 2),
        llm_requests=len(llm.requests) - before_llm,
        llm_most_at_once=llm.max_in_flight,
        errors=len(re.findall(r"answer_question_task\[[^\]]+\] (?:raised|failed)", str(worker_logs(cluster)))),
        seconds=round(time.monotonic() - started, 1),
    )

    # 3-5: files through the object store, run state in the database.
    check_file_steps(cluster)


def import_file(slug: str) -> bytes:
    lines = []
    for i in range(IMPORTED_SOURCES):
        key = f"rehearsal-{i:05d}"
        lines.append(
            {
                "type": "source",
                "study": slug,
                "key": key,
                "title": f"Rehearsal source {i}",
                "licence": "CC BY 4.0",
                "licence_url": "https://creativecommons.org/licenses/by/4.0/",
                "text": f"Sentence one of source {i} says something. Sentence two of source {i} says more.",
            }
        )
        lines.append(
            {
                "type": "summary",
                "study": slug,
                "source": key,
                "key": f"{key}-s",
                "text": f"Source {i} says something and more.",
                "generator": "rehearsal",
            }
        )
    return "".join(json.dumps(line) + "\n" for line in lines).encode()


def table_rows(archive: bytes, table: str) -> list[dict]:
    with zipfile.ZipFile(io.BytesIO(archive)) as zipped:
        name = next(n for n in zipped.namelist() if n.endswith(f"jsonl/{table}.jsonl"))
        return [json.loads(line) for line in zipped.read(name).decode().splitlines() if line.strip()]


def download(api: Browser, url: str) -> bytes:
    """The archive, streamed by the web server or from the presigned URL it redirects to."""
    answer = api.get(url)
    if answer.status_code in (301, 302, 303, 307):
        answer = httpx2.get(answer.headers["location"], timeout=60)
    assert answer.status_code == 200, answer.text[:300]
    return answer.content


def wait_for_export(api: Browser, url: str, *, logs) -> dict:
    def finished():
        state = api.get(url).json()
        return state if state["status"] in ("done", "failed") else None

    state = wait_until(finished, what="the export to finish", every=0.5, timeout=600, logs=logs)
    assert state["status"] == "done", state
    return state


def check_file_steps(cluster: Cluster) -> None:
    web1, web2 = web(cluster, 1), web(cluster, 2)
    logs = cluster.services
    api = Browser(cluster.token)
    slug = REPORT_STUDY

    # 3. An import uploaded on web 1, processed by a worker, its status read on web 2.
    started = time.monotonic()
    upload = api.post(
        f"{web1}/api/studies/{slug}/imports/",
        files={"file": ("rehearsal.jsonl", import_file(slug), "application/x-ndjson")},
    )
    assert upload.status_code == 202, upload.text[:500]
    run_id = upload.json()["id"]

    def imported():
        state = api.get(f"{web2}/api/studies/{slug}/imports/{run_id}/").json()
        return state if state["status"] in ("done", "failed") else None

    state = wait_until(imported, what="the import, read on web 2", every=0.5, timeout=600, logs=logs)
    assert state["status"] == "done", state
    assert state["counts"]["source"]["created"] == IMPORTED_SOURCES, state["counts"]
    assert state["counts"]["summary"]["created"] == IMPORTED_SOURCES, state["counts"]
    cluster.figures.record(
        "import", lines=2 * IMPORTED_SOURCES, requests=api.requests, errors=api.errors,
        seconds=round(time.monotonic() - started, 1),
    )  # fmt: skip

    # 4. An export started on web 2, downloaded on web 1.
    started, before = time.monotonic(), api.requests
    asked = api.post(f"{web2}/api/studies/{slug}/exports/", json={"formats": ["jsonl"], "phase": "all"})
    assert asked.status_code == 202, asked.text[:500]
    export_id = asked.json()["id"]
    wait_for_export(api, f"{web1}/api/studies/{slug}/exports/{export_id}/", logs=logs)
    summaries = table_rows(download(api, f"{web1}/api/studies/{slug}/exports/{export_id}/download/"), "summaries")
    keys = [row["summary_key"] for row in summaries]
    assert len(keys) == len(set(keys))
    assert {f"rehearsal-{i:05d}-s" for i in range(IMPORTED_SOURCES)} <= set(keys)
    expected_rows = len(keys)
    cluster.figures.record(
        "export", summaries=expected_rows, requests=api.requests - before, errors=api.errors,
        seconds=round(time.monotonic() - started, 1),
    )  # fmt: skip

    # 5. A worker killed in the middle of an export; the other finishes it, every row once.
    started, before = time.monotonic(), api.requests
    received = {name: log.count("run_api_export_task") for name, log in worker_logs(cluster).items()}
    asked = api.post(f"{web1}/api/studies/{slug}/exports/", json={"formats": ["jsonl"], "phase": "all"})
    assert asked.status_code == 202, asked.text[:500]
    export_id = asked.json()["id"]
    status_url = f"{web2}/api/studies/{slug}/exports/{export_id}/"
    state = wait_until(
        lambda: (lambda s: s if s["status"] != "pending" else None)(api.get(status_url).json()),
        what="a worker to take the export",
        every=0.05,
        logs=logs,
    )
    assert state["status"] == "running", f"the export ended before it could be killed: {state}"

    def holding():
        workers = [s for s in cluster.services if s.name in received]
        return next((s for s in workers if s.output().count("run_api_export_task") > received[s.name]), None)

    holder = wait_until(holding, what="the worker holding the export", logs=logs)
    holder.kill_hard()
    killed = time.monotonic()
    other = next(s for s in cluster.services if s.name in received and s is not holder)

    def taken_over():
        cluster.manage("cron", "sweep_runs")
        state = api.get(status_url).json()
        return state if state["status"] in ("done", "failed") else None

    state = wait_until(taken_over, what="the other worker to finish the export", every=1, timeout=600, logs=logs)
    assert state["status"] == "done", state
    assert other.output().count("run_api_export_task") > received[other.name]
    rows = table_rows(download(api, f"{web1}/api/studies/{slug}/exports/{export_id}/download/"), "summaries")
    keys = [row["summary_key"] for row in rows]
    assert len(keys) == len(set(keys)) == expected_rows
    cluster.figures.record(
        "takeover", requests=api.requests - before, errors=api.errors, summaries=len(keys),
        seconds_from_kill_to_done=round(time.monotonic() - killed, 1),
        seconds=round(time.monotonic() - started, 1),
    )  # fmt: skip
