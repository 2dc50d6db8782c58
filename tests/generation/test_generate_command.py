"""`manage.py generate`: the run end to end, its --json shape, idempotency under
redelivery, resuming, and failing early without an API key."""

import json
import threading
from datetime import timedelta

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from annotate.models import Summary
from generation.models import GenerationJob, GenerationRun, LLMCall
from generation.services import run_generation_job
from generation.tasks import generate_summary_task
from tests.factories import StudyFactory
from tests.generation.conftest import TRIAL, held_job, honest_model, make_source
from tests.generation.scripted_server import Reply

pytestmark = pytest.mark.django_db(transaction=True)

SUMMARY_KEYS = {
    "source",
    "summary",
    "status",
    "attempts",
    "reference_checks",
    "flags",
    "claims",
    "llm_calls",
    "tokens",
    "cost",
}


@pytest.fixture
def sources():
    study = StudyFactory(slug="trials")
    return [
        make_source(study, "a-trial", TRIAL, title="Drug A"),
        make_source(study, "b-trial", TRIAL, title="Drug B"),
        make_source(study, "c-short", TRIAL[:3], title="Drug C"),
    ]


def generate(capsys, *args):
    call_command("generate", "--study", "trials", *args, "--json")
    return json.loads(capsys.readouterr().out)


def test_generate_json_end_to_end(serve, sources, capsys, monkeypatch):
    monkeypatch.setenv("GENERATION_PRICES", json.dumps({"scripted-model": [1.0, 2.0]}))
    serve(honest_model)
    out = generate(capsys, "--pipeline", "litsumm")

    run = GenerationRun.objects.get()
    assert out["run"] == str(run.uuid)
    assert [s["source"] for s in out["summaries"]] == ["a-trial", "b-trial", "c-short"]
    first = out["summaries"][0]
    assert set(first) == SUMMARY_KEYS
    assert first["status"] == "ok" and first["attempts"] == 1 and first["flags"] == []
    assert first["reference_checks"] == {k: True for k in ("adequate", "format", "real", "location", "max_share")}
    assert first["summary"] == Summary.objects.get(source__key="a-trial").text
    assert first["claims"][0] == {
        "text": first["claims"][0]["text"],
        "verdict": "supported",
        "explanation": "The context says so.",
        "probability": None,
    }
    calls = LLMCall.objects.filter(job__source__key="a-trial")
    assert first["llm_calls"] == 2 == calls.count()
    assert first["tokens"] == sum(c.tokens_in + c.tokens_out for c in calls)
    assert first["cost"] == pytest.approx(sum(c.tokens_in * 1 + c.tokens_out * 2 for c in calls) / 1e6, abs=2e-6)
    skipped = out["summaries"][2]
    assert (skipped["status"], skipped["summary"], skipped["flags"]) == ("skipped", None, ["too_few_sentences"])
    assert skipped["llm_calls"] == 0 and skipped["cost"] is None


def test_a_missing_api_key_fails_at_start(serve, sources, monkeypatch):
    server = serve(honest_model)
    monkeypatch.delenv("OPENAI_API_KEY")
    with pytest.raises(CommandError, match="OPENAI_API_KEY is not set"):
        call_command("generate", "--study", "trials", "--pipeline", "litsumm")
    assert not GenerationRun.objects.exists() and not GenerationJob.objects.exists()
    assert server.requests == []


def test_running_again_generates_nothing_new(serve, sources, capsys):
    server = serve(honest_model)
    first = generate(capsys, "--pipeline", "litsumm", "--source", "a-trial")
    seen = len(server.requests)
    second = generate(capsys, "--pipeline", "litsumm", "--source", "a-trial")
    assert len(server.requests) == seen
    assert first["summaries"] == second["summaries"]
    assert first["run"] != second["run"]
    assert Summary.objects.count() == 1


def test_a_redelivered_task_does_no_harm(serve, sources, capsys):
    server = serve(honest_model)
    generate(capsys, "--pipeline", "litsumm", "--source", "a-trial")
    job = GenerationJob.objects.get()
    seen = len(server.requests)
    assert generate_summary_task.apply(args=[job.pk]).successful()
    job.refresh_from_db()
    assert job.status == "ok"
    assert len(server.requests) == seen
    assert Summary.objects.count() == 1


def test_two_deliveries_at_once_write_one_summary(serve, sources):
    from generation.pipelines import pipeline_spec

    server = serve(honest_model, latency=0.2)
    spec = pipeline_spec("litsumm")
    job = GenerationJob.objects.create(
        source=sources[0], pipeline=spec.name, pipeline_version=spec.version, config=spec.config
    )
    results = []

    def deliver():
        results.append(run_generation_job(job_id=job.pk).status)

    threads = [threading.Thread(target=deliver) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(results) == ["ok", "running"]
    assert server.steps_seen() == ["generate", "self_consistency"]
    assert Summary.objects.count() == 1


def test_a_failed_run_is_resumed_by_the_next(serve, sources, capsys, monkeypatch):
    monkeypatch.setenv("GENERATION_MAX_RETRIES", "1")
    serve(steps={"generate": [Reply(status=500)]})
    with pytest.raises(CommandError, match="2 jobs failed"):
        call_command("generate", "--study", "trials", "--pipeline", "litsumm")
    capsys.readouterr()
    assert set(GenerationJob.objects.values_list("status", flat=True)) == {"failed", "skipped"}
    assert "500" in GenerationJob.objects.filter(status="failed").first().error

    serve(honest_model)
    out = generate(capsys, "--pipeline", "litsumm")
    assert [s["status"] for s in out["summaries"]] == ["ok", "ok", "skipped"]


def test_a_job_abandoned_by_a_dead_worker_is_resumed(serve, sources, capsys):
    server = serve(honest_model)
    # A worker claimed the job two hours ago and died before storing anything.
    job = held_job(sources[0], claimed_at=timezone.now() - timedelta(hours=2))
    out = generate(capsys, "--pipeline", "litsumm", "--source", "a-trial")
    assert out["summaries"][0]["status"] == "ok"
    assert server.steps_seen() == ["generate", "self_consistency"]
    job.refresh_from_db()
    assert job.tries == 2 and job.summary is not None


def test_a_long_claimed_job_that_still_calls_the_llm_is_left_alone(serve, sources, capsys):
    server = serve(honest_model)
    # Claimed two hours ago, but its worker recorded an LLM attempt a minute ago (an
    # endpoint that keeps answering 429): it is alive, and taking it over would pay twice.
    job = held_job(sources[0], claimed_at=timezone.now() - timedelta(hours=2))
    call = LLMCall.objects.create(
        job=job, step="generate", prompt_id="generate", prompt_version="v", messages=[], latency=1
    )
    LLMCall.objects.filter(pk=call.pk).update(created_at=timezone.now() - timedelta(minutes=1))
    out = generate(capsys, "--pipeline", "litsumm", "--source", "a-trial")
    assert out["summaries"][0]["status"] == "running"
    assert server.requests == []

    # Once the lease has passed with no call at all, the next run takes it over.
    LLMCall.objects.filter(pk=call.pk).update(created_at=timezone.now() - timedelta(hours=1))
    out = generate(capsys, "--pipeline", "litsumm", "--source", "a-trial")
    assert out["summaries"][0]["status"] == "ok"
    job.refresh_from_db()
    assert job.tries == 2


def test_the_lease_is_never_shorter_than_three_gaps_between_attempts(monkeypatch):
    from generation.services import job_lease

    monkeypatch.setenv("GENERATION_JOB_LEASE", "10")
    monkeypatch.setenv("GENERATION_TIMEOUT", "60")
    monkeypatch.setenv("GENERATION_BACKOFF_MAX", "60")
    assert job_lease() == timedelta(seconds=360)
    monkeypatch.setenv("GENERATION_JOB_LEASE", "900")
    assert job_lease() == timedelta(seconds=900)


def test_a_job_held_by_a_live_worker_is_left_alone(serve, sources, capsys):
    server = serve(honest_model)
    generate(capsys, "--pipeline", "litsumm", "--source", "a-trial")
    GenerationJob.objects.update(status="running", claimed_at=timezone.now())
    seen = len(server.requests)
    out = generate(capsys, "--pipeline", "litsumm", "--source", "a-trial")
    assert out["summaries"][0]["status"] == "running"
    assert len(server.requests) == seen


def test_source_and_limit_choose_the_sources(serve, sources, capsys):
    serve(honest_model)
    out = generate(capsys, "--pipeline", "factored", "--limit", "1")
    assert [s["source"] for s in out["summaries"]] == ["a-trial"]
    out = generate(capsys, "--pipeline", "factored", "--source", "b-trial", "--source", "c-short")
    assert [s["source"] for s in out["summaries"]] == ["b-trial", "c-short"]
    with pytest.raises(CommandError, match="No source nope"):
        call_command("generate", "--study", "trials", "--pipeline", "factored", "--source", "nope")


def test_a_changed_prompt_parameter_is_a_new_pipeline_version(serve, sources, capsys, monkeypatch):
    serve(honest_model)
    generate(capsys, "--pipeline", "litsumm", "--source", "a-trial")
    monkeypatch.setenv("GENERATION_TEMPERATURE", "0.3")
    generate(capsys, "--pipeline", "litsumm", "--source", "a-trial")
    assert GenerationJob.objects.count() == 2
    assert Summary.objects.filter(source__key="a-trial").count() == 2


@pytest.fixture
def console():
    """What the console handler of config/settings.py LOGGING would print, as text."""
    import io
    import logging

    from core.logs import LibraryChatter, show_library_logs

    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.addFilter(LibraryChatter())
    root = logging.getLogger()
    root.addHandler(handler)
    yield stream
    root.removeHandler(handler)
    show_library_logs(1)


def test_the_summary_line_and_the_reason_for_each_skip(serve, sources, capsys, console):
    serve(honest_model)
    call_command("generate", "--study", "trials", "--pipeline", "litsumm")
    captured = capsys.readouterr()
    first, *rest = captured.out.strip().splitlines()
    assert first.endswith("2 ok, 1 skipped")
    assert rest == ["  c-short: skipped: only 3 sentences in the source; at least 5 are needed"]
    # Quiet: no line per HTTP request, no Celery task line ("succeeded ... None"), no library chatter.
    assert console.getvalue() == ""


def test_verbosity_2_shows_the_libraries_lines(serve, sources, console):
    serve(honest_model)
    call_command("generate", "--study", "trials", "--pipeline", "litsumm", "--source", "a-trial", verbosity=2)
    assert "HTTP Request: POST" in console.getvalue()


def test_abandoned_jobs_of_a_run_are_queued_again(serve, sources):
    """A killed worker process has its message acknowledged: `generate` waiting on the
    run hands such jobs to the workers again (here, without a broker, they run now)."""
    from generation.services import abandoned_jobs, requeue_abandoned_jobs

    server = serve(honest_model)
    two_hours_ago = timezone.now() - timedelta(hours=2)
    dead, alive = (held_job(source, claimed_at=two_hours_ago) for source in sources[:2])
    LLMCall.objects.create(job=alive, step="generate", prompt_id="generate", prompt_version="v", messages=[], latency=1)
    run = GenerationRun.objects.create(
        study=sources[0].study, pipeline="litsumm", pipeline_version=dead.pipeline_version
    )
    run.jobs.set([dead, alive])

    assert abandoned_jobs(run=run) == [dead.pk]
    assert requeue_abandoned_jobs(run=run, enqueue=generate_summary_task.delay) == [dead.pk]
    dead.refresh_from_db()
    alive.refresh_from_db()
    assert (dead.status, dead.tries) == ("ok", 2)
    assert alive.status == "running"
    assert server.steps_seen() == ["generate", "self_consistency"]
    assert abandoned_jobs(run=run) == []
