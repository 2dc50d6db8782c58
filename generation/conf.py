"""Generation settings, read from the environment when asked for, never at import.

config/settings.py belongs to the whole platform; the LLM settings live here so that
a test (or a long-running worker) that changes the environment sees the change on
the next call. Every variable is listed in docs/generation.md and .env.example.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field

from django.core.exceptions import ImproperlyConfigured

DEFAULT_MODEL = "gpt-4o-mini"
PIPELINES = ("litsumm", "factored")


def _str(name: str, default: str = "") -> str:
    return os.environ.get(name, "").strip() or default


def _float(name: str, default: float) -> float:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        return float(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be a number, got {raw!r}") from None


def _int(name: str, default: int, minimum: int = 0) -> int:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be a whole number, got {raw!r}") from None
    if value < minimum:
        raise ImproperlyConfigured(f"{name} must be at least {minimum}, got {value}")
    return value


def _bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name, "").strip().lower()
    if not raw:
        return default
    if raw in {"1", "true", "yes", "on"}:
        return True
    if raw in {"0", "false", "no", "off"}:
        return False
    raise ImproperlyConfigured(f"{name} must be a boolean (1/0), got {raw!r}")


def _prices() -> dict[str, tuple[float, float]]:
    """GENERATION_PRICES: JSON {"model": [USD per 1M input tokens, USD per 1M output tokens]}."""
    raw = os.environ.get("GENERATION_PRICES", "").strip()
    if not raw:
        return {}
    try:
        table = json.loads(raw)
        return {str(model): (float(pair[0]), float(pair[1])) for model, pair in table.items()}
    except (ValueError, TypeError, IndexError, AttributeError):
        raise ImproperlyConfigured(
            'GENERATION_PRICES must be JSON like {"gpt-4o-mini": [0.15, 0.6]} (USD per million tokens in, out)'
        ) from None


@dataclass(frozen=True)
class LLMSettings:
    base_url: str
    api_key: str
    timeout: float
    max_retries: int
    backoff_base: float
    backoff_max: float
    concurrency: int
    json_mode: bool
    logprobs: bool
    prices: dict[str, tuple[float, float]] = field(default_factory=dict)


@dataclass(frozen=True)
class PipelineSettings:
    model: str
    temperature: float
    presence_penalty: float
    frequency_penalty: float
    context_budget: int
    min_sentences: int
    max_attempts: int
    factored_threshold: float
    seed: int
    max_tokens: int


def llm_settings() -> LLMSettings:
    return LLMSettings(
        base_url=_str("OPENAI_BASE_URL", "https://api.openai.com/v1"),
        api_key=_str("OPENAI_API_KEY"),
        timeout=_float("GENERATION_TIMEOUT", 60.0),
        max_retries=_int("GENERATION_MAX_RETRIES", 4),
        backoff_base=_float("GENERATION_BACKOFF_BASE", 1.0),
        backoff_max=_float("GENERATION_BACKOFF_MAX", 60.0),
        concurrency=_int("GENERATION_CONCURRENCY", 4, minimum=1),
        json_mode=_bool("GENERATION_JSON_MODE", True),
        logprobs=_bool("GENERATION_LOGPROBS", True),
        prices=_prices(),
    )


def job_lease_seconds() -> int:
    """GENERATION_JOB_LEASE: seconds a running job may go without an LLM call before
    another worker may take it over (see generation.services.job_lease)."""
    return _int("GENERATION_JOB_LEASE", 600, minimum=1)


def pipeline_settings(pipeline: str) -> PipelineSettings:
    """Settings of one pipeline; GENERATION_MODEL_<PIPELINE> overrides GENERATION_MODEL."""
    if pipeline not in PIPELINES:
        raise ImproperlyConfigured(f"unknown pipeline {pipeline!r}")
    return PipelineSettings(
        model=_str(f"GENERATION_MODEL_{pipeline.upper()}", _str("GENERATION_MODEL", DEFAULT_MODEL)),
        # LitSumm's generation call: T=0.1, presence -2 (reuse the context's words),
        # frequency 1 (but do not repeat yourself).
        temperature=_float("GENERATION_TEMPERATURE", 0.1),
        presence_penalty=_float("GENERATION_PRESENCE_PENALTY", -2.0),
        frequency_penalty=_float("GENERATION_FREQUENCY_PENALTY", 1.0),
        context_budget=_int("GENERATION_CONTEXT_BUDGET", 2560, minimum=1),
        min_sentences=_int("GENERATION_MIN_SENTENCES", 5, minimum=1),
        max_attempts=_int("GENERATION_MAX_ATTEMPTS", 4, minimum=1),
        factored_threshold=_float("GENERATION_FACTORED_THRESHOLD", 0.5),
        seed=_int("GENERATION_SEED", 0),
        # A cap per answer: a summary or a set of verdicts is a few hundred tokens, and a
        # model that does not stop would otherwise write until its context is full.
        max_tokens=_int("GENERATION_MAX_TOKENS", 1024, minimum=1),
    )
