"""The gateway over the real openai client, against the scripted HTTP server."""

import json
import math
import threading
import time
from decimal import Decimal

import pytest

from generation.answer_text import parse_json_object
from generation.conf import llm_settings
from generation.llm import Gateway, LLMError, backoff_delay
from generation.models import LLMCall
from generation.prompting import get_prompt
from tests.generation.scripted_server import Reply
from tests.generation.test_litsumm_pipeline import run_job

pytestmark = pytest.mark.django_db

VARIABLES = {"entity": "Drug A", "context": "Drug A lowered pressure [PMC100]."}


def complete(**options):
    return Gateway().complete(
        step="generate",
        prompt="generate",
        variables=VARIABLES,
        model="scripted-model",
        params={"temperature": 0.1},
        **options,
    )


def test_a_call_is_recorded_with_prompt_version_params_tokens_and_cost(serve, monkeypatch):
    monkeypatch.setenv("GENERATION_PRICES", json.dumps({"scripted-model": [2.0, 8.0]}))
    server = serve(steps={"generate": [Reply(content="Drug A lowered pressure [PMC100].")]})

    result = complete()

    call = LLMCall.objects.get()
    assert result.text == call.response_text == "Drug A lowered pressure [PMC100]."
    assert (call.step, call.attempt, call.prompt_id) == ("generate", 1, "generate")
    assert call.prompt_version == get_prompt("generate").version and len(call.prompt_version) == 16
    assert call.params == {"temperature": 0.1}
    assert call.messages == server.requests[0].body["messages"]
    assert "Drug A lowered pressure [PMC100]." in call.messages[1]["content"]
    # The scripted server counts prompt characters // 4 and completion characters // 4 + 1.
    prompt_chars = sum(len(m["content"]) for m in call.messages)
    assert call.tokens_in == prompt_chars // 4
    assert call.tokens_out == len(call.response_text) // 4 + 1
    expected = (Decimal(2) * call.tokens_in + Decimal(8) * call.tokens_out) / Decimal(1_000_000)
    assert call.cost == expected.quantize(Decimal("0.000001"))
    assert call.latency > 0 and call.error == ""


def test_a_model_without_a_price_has_no_cost(serve):
    serve(steps={"generate": [Reply(content="x")]})
    complete()
    assert LLMCall.objects.get().cost is None


def test_429_is_retried_after_the_servers_retry_after(serve, monkeypatch):
    # Our own backoff would wait 30-60 s here: the wait must be the server's 0.4 s.
    monkeypatch.setenv("GENERATION_BACKOFF_BASE", "60")
    monkeypatch.setenv("GENERATION_BACKOFF_MAX", "60")
    waits, me, real_sleep = [], threading.get_ident(), time.sleep

    def sleep(seconds):  # the gateway's waits, as it asks for them (other threads' not counted)
        if threading.get_ident() == me:
            waits.append(seconds)
        real_sleep(seconds)

    monkeypatch.setattr(time, "sleep", sleep)
    server = serve(
        steps={"generate": [Reply(status=429, headers={"retry-after": "0.4"}), Reply(content="ok [PMC100].")]}
    )
    result = complete()
    assert result.text == "ok [PMC100]."
    assert waits == [pytest.approx(0.4)]
    gap = server.requests[1].received_at - server.requests[0].received_at
    assert gap >= 0.4
    first, second = LLMCall.objects.order_by("attempt")
    assert (first.attempt, first.status_code) == (1, 429)
    assert "RateLimitError" in first.error
    assert (second.attempt, second.status_code, second.error) == (2, 200, "")


@pytest.mark.parametrize("header", ["soon", "-3", "nan", "Wed, 99 Foo 2015 25:61:00 GMT"])
def test_an_unreadable_retry_after_falls_back_to_our_own_backoff(serve, header):
    server = serve(steps={"generate": [Reply(status=429, headers={"retry-after": header}), Reply(content="ok")]})
    assert complete().text == "ok"
    assert len(server.requests) == 2
    # GENERATION_BACKOFF_BASE is 0.01 in the tests: the first wait is 5-10 ms.
    assert server.requests[1].received_at - server.requests[0].received_at < 1
    assert [c.status_code for c in LLMCall.objects.order_by("attempt")] == [429, 200]


@pytest.fixture
def tokyo_local_time(monkeypatch):
    """The process's local time nine hours ahead of UTC (Django sets TZ=UTC)."""
    monkeypatch.setenv("TZ", "Asia/Tokyo")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def test_a_retry_after_date_without_a_zone_is_read_as_gmt(serve, tokyo_local_time):
    # Two whole seconds ahead in GMT, written without a zone. Read as Tokyo time it
    # would lie nine hours in the past, and the retry would come at once.
    target = math.ceil(time.time()) + 2
    header = time.strftime("%a, %d %b %Y %H:%M:%S", time.gmtime(target))
    server = serve(steps={"generate": [Reply(status=429, headers={"retry-after": header}), Reply(content="ok")]})
    assert complete().text == "ok"
    gap = server.requests[1].received_at - server.requests[0].received_at
    assert 0.9 <= gap <= 2.5  # capped at GENERATION_BACKOFF_MAX = 2


def test_server_errors_are_retried_with_growing_waits(serve, monkeypatch):
    monkeypatch.setenv("GENERATION_BACKOFF_BASE", "0.2")
    server = serve(steps={"generate": [Reply(status=503), Reply(status=500), Reply(content="done")]})
    assert complete().text == "done"
    times = [r.received_at for r in server.requests]
    # Equal jitter: wait n is at least half of base * 2**(n-1) (its upper end is the
    # jitter's, which a loaded machine's scheduling can stretch: not asserted).
    assert times[1] - times[0] >= 0.1
    assert times[2] - times[1] >= 0.2
    assert [c.status_code for c in LLMCall.objects.order_by("attempt")] == [503, 500, 200]


def test_a_timeout_is_retried(serve, monkeypatch):
    monkeypatch.setenv("GENERATION_TIMEOUT", "0.3")
    serve(steps={"generate": [Reply(content="late", delay=1.5), Reply(content="on time")]})
    assert complete().text == "on time"
    first = LLMCall.objects.order_by("attempt").first()
    assert "Timeout" in first.error and first.status_code is None


def test_the_gateway_gives_up_after_the_configured_retries(serve, monkeypatch):
    monkeypatch.setenv("GENERATION_MAX_RETRIES", "2")
    server = serve(steps={"generate": [Reply(status=500)]})
    with pytest.raises(LLMError, match="after 3 attempt"):
        complete()
    assert len(server.requests) == 3
    assert LLMCall.objects.filter(status_code=500).count() == 3


def test_a_bad_request_is_not_retried(serve):
    server = serve(steps={"generate": [Reply(status=401, content="bad key")]})
    with pytest.raises(LLMError):
        complete()
    assert len(server.requests) == 1


SECRET_KEY = "sk-proj-Zq81secret"


def test_the_api_key_and_endpoint_credentials_are_never_stored(serve, monkeypatch, trial_source):
    echo = f"Incorrect API key provided: {SECRET_KEY}. Basic auth alice:pa55%2Fword was ignored (pa55/word)."
    server = serve(steps={"generate": [Reply(status=401, content=echo)]})
    monkeypatch.setenv("OPENAI_API_KEY", SECRET_KEY)
    host = server.base_url.removeprefix("http://")
    monkeypatch.setenv("OPENAI_BASE_URL", f"http://alice:pa55%2Fword@{host}")

    job = run_job(trial_source)

    assert len(server.requests) == 1  # the key did reach the server
    call = LLMCall.objects.get()
    assert call.endpoint == server.base_url
    for stored in (call.error, job.error):
        assert "Incorrect API key provided: ***." in stored
        assert "Basic auth *** was ignored (***)." in stored
        assert SECRET_KEY not in stored and "pa55" not in stored
    assert job.status == "failed"


def complete_json(**options):
    """A call of a prompt that declares the JSON Schema of its answer."""
    return Gateway().complete(
        step="relevance:1",
        prompt="question_relevance",
        variables={"question": "Does drug A lower pressure?", "article": "Drug A lowered pressure."},
        model="scripted-model",
        params={"temperature": 0},
        **options,
    )


def test_structured_output_is_dropped_for_an_endpoint_that_refuses_it(serve):
    server = serve(steps={"question_relevance": [Reply(content='{"a": 1}')]}, json_mode=False)
    result = complete_json()
    assert result.text == '{"a": 1}' and not result.json_mode
    asked = [r.body.get("response_format", {}).get("type") for r in server.requests]
    assert asked == ["json_schema", "json_object", "json_object", None]
    # Remembered: the next call does not ask again.
    complete_json()
    assert "response_format" not in server.requests[4].body


@pytest.mark.parametrize("status", [400, 422])
def test_an_error_that_does_not_name_a_feature_drops_nothing(serve, status):
    overflow = "This model's maximum context length is 4096 tokens; your messages resulted in 5000 tokens."
    server = serve(steps={"question_relevance": [Reply(status=status, content=overflow), Reply(content="{}")]})
    with pytest.raises(LLMError, match="maximum context length"):
        complete_json(logprobs=True)
    assert len(server.requests) == 1
    # Nothing was remembered as refused: the next call asks for both again.
    complete_json(logprobs=True)
    body = server.requests[1].body
    assert body["response_format"]["type"] == "json_schema"
    assert body["logprobs"] is True and body["top_logprobs"] == 5


@pytest.mark.parametrize(
    "message,dropped,kept",
    [
        ("This model does not support JSON mode.", "response_format", "logprobs"),
        ("Invalid value for 'json_schema'.", "response_format", "logprobs"),
        ("Top_LOGPROBS is not allowed for this model.", "logprobs", "response_format"),
    ],
)
def test_the_feature_an_error_names_is_dropped_and_the_other_kept(serve, message, dropped, kept):
    server = serve(steps={"question_relevance": [Reply(status=400, content=message), Reply(content="{}")]})
    complete_json(logprobs=True)
    first, second = (r.body for r in server.requests)
    if dropped == "response_format":  # one step down: the schema inside JSON mode
        assert first[dropped]["type"] == "json_schema"
        assert second[dropped] == {"type": "json_object", "schema": get_prompt("question_relevance").schema}
    else:
        assert dropped in first and dropped not in second
    assert kept in first and kept in second
    assert [c.status_code for c in LLMCall.objects.order_by("attempt")] == [400, 200]


def test_structured_output_and_logprobs_are_requested_where_supported(serve):
    server = serve(
        steps={"question_relevance": [Reply(content="{}", logprobs=[("yes", -0.1, [("yes", -0.1), ("no", -2.4)])])]}
    )
    result = complete_json(logprobs=True)
    body = server.requests[0].body
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {
            "name": "question_relevance",
            "schema": get_prompt("question_relevance").schema,
            "strict": True,
        },
    }
    assert body["logprobs"] is True and body["top_logprobs"] == 5
    assert result.logprobs == [{"token": "yes", "logprob": -0.1, "top": [["yes", -0.1], ["no", -2.4]]}]
    assert LLMCall.objects.get().logprobs == result.logprobs


def test_a_prompt_answered_in_prose_asks_for_no_structured_output(serve):
    server = serve(steps={"generate": [Reply(content="Drug A lowered pressure [PMC100].")]})
    complete()
    assert "response_format" not in server.requests[0].body


@pytest.mark.django_db(transaction=True)
def test_concurrency_is_limited_per_endpoint(serve, monkeypatch):
    monkeypatch.setenv("GENERATION_CONCURRENCY", "2")
    server = serve(steps={"generate": [Reply(content="x", delay=0.2)]})
    threads = [threading.Thread(target=complete) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(server.requests) == 6
    assert server.max_in_flight == 2


def test_a_missing_api_key_is_refused(serve, monkeypatch):
    serve()
    monkeypatch.delenv("OPENAI_API_KEY")
    with pytest.raises(LLMError, match="OPENAI_API_KEY"):
        Gateway()


def test_retry_after_is_capped_and_backoff_grows(monkeypatch):
    monkeypatch.setenv("GENERATION_BACKOFF_BASE", "1")
    monkeypatch.setenv("GENERATION_BACKOFF_MAX", "10")
    conf = llm_settings()
    assert backoff_delay(1, conf, retry_after=120) == 10
    assert backoff_delay(1, conf, retry_after=3) == 3
    for attempt, step in [(1, 1), (2, 2), (3, 4), (6, 10)]:
        delays = [backoff_delay(attempt, conf, None) for _ in range(50)]
        assert all(step / 2 <= d <= step for d in delays)
        assert len(set(delays)) > 1  # jittered


@pytest.mark.parametrize(
    "text",
    [
        '{"verdicts": [1, 2]}',
        '```json\n{"verdicts": [1, 2]}\n```',
        'Sure! Here is the JSON:\n{"verdicts": [1, 2]}\nHope this helps {not json}.',
        '{"verdicts": [1, 2,],}',
    ],
)
def test_tolerant_json_parsing(text):
    assert parse_json_object(text) == {"verdicts": [1, 2]}


def test_unreadable_json_gives_none():
    assert parse_json_object("All statements are true.") is None
    assert parse_json_object('{"verdicts": ') is None
    assert parse_json_object("{") is None
    assert parse_json_object('{"a": 1}}}') == {"a": 1}


@pytest.mark.parametrize(
    "text,kept",
    [
        # Cut off at max_tokens: the complete members are kept, the cut one dropped.
        ('{"verdicts": [1, 2', {"verdicts": [1]}),
        ('{"queries": ["aspirin stroke", "warfarin bleed', {"queries": ["aspirin stroke"]}),
        (
            '{"verdicts": [{"statement": 1, "supported": true}, {"statement": 2, "expl',
            {"verdicts": [{"statement": 1, "supported": True}, {"statement": 2}]},
        ),
        ('```json\n{"a": {"b": [1, 2], "c": "cut', {"a": {"b": [1, 2]}}),
    ],
)
def test_an_answer_cut_off_keeps_its_complete_members(text, kept):
    assert parse_json_object(text) == kept
