"""Generation settings, read from the environment when asked for, never at import.

config/settings.py belongs to the whole platform; the LLM settings live here so that
a test (or a long-running worker) that changes the environment sees the change on
the next call. Both read the environment through core/env.py. Every variable is
listed in docs/generation.md and .env.example.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from django.core.exceptions import ImproperlyConfigured

from core.env import env_bool, env_float, env_int, env_str

DEFAULT_MODEL = "gpt-4o-mini"
PIPELINES = ("litsumm", "factored", "selfcorrect")
# Factored Verification's claims: the summary's sentences (the default), or the claims an
# LLM decomposes each cited sentence into (the paper's appendix A.1.1).
CLAIM_MODES = ("sentences", "decomposed")


def _prices() -> dict[str, tuple[float, float]]:
    """GENERATION_PRICES: JSON {"model": [USD per 1M input tokens, USD per 1M output tokens]}."""
    raw = env_str("GENERATION_PRICES")
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
    json_schema: bool = True
    api_version: str = ""
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
        base_url=env_str("OPENAI_BASE_URL", "https://api.openai.com/v1"),
        api_key=env_str("OPENAI_API_KEY"),
        timeout=env_float("GENERATION_TIMEOUT", 60.0),
        max_retries=env_int("GENERATION_MAX_RETRIES", 4, minimum=0),
        backoff_base=env_float("GENERATION_BACKOFF_BASE", 1.0),
        backoff_max=env_float("GENERATION_BACKOFF_MAX", 60.0),
        concurrency=env_int("GENERATION_CONCURRENCY", 4, minimum=1),
        json_mode=env_bool("GENERATION_JSON_MODE", True),
        logprobs=env_bool("GENERATION_LOGPROBS", True),
        json_schema=env_bool("GENERATION_JSON_SCHEMA", True),
        # Azure OpenAI's deployment API (the openai library's own variable name).
        api_version=env_str("OPENAI_API_VERSION"),
        prices=_prices(),
    )


def job_lease_seconds() -> int:
    """GENERATION_JOB_LEASE: seconds a running job may go without an LLM call before
    another worker may take it over (see generation.services.job_lease)."""
    return env_int("GENERATION_JOB_LEASE", 600, minimum=1)


def pipeline_settings(pipeline: str) -> PipelineSettings:
    """Settings of one pipeline; GENERATION_MODEL_<PIPELINE> overrides GENERATION_MODEL."""
    if pipeline not in PIPELINES:
        raise ImproperlyConfigured(f"unknown pipeline {pipeline!r}")
    return PipelineSettings(
        model=env_str(f"GENERATION_MODEL_{pipeline.upper()}", env_str("GENERATION_MODEL", DEFAULT_MODEL)),
        # LitSumm's generation call: T=0.1, presence -2 (reuse the context's words),
        # frequency 1 (but do not repeat yourself).
        temperature=env_float("GENERATION_TEMPERATURE", 0.1),
        presence_penalty=env_float("GENERATION_PRESENCE_PENALTY", -2.0),
        frequency_penalty=env_float("GENERATION_FREQUENCY_PENALTY", 1.0),
        context_budget=env_int("GENERATION_CONTEXT_BUDGET", 2560, minimum=1),
        min_sentences=env_int("GENERATION_MIN_SENTENCES", 5, minimum=1),
        max_attempts=env_int("GENERATION_MAX_ATTEMPTS", 4, minimum=1),
        factored_threshold=env_float("GENERATION_FACTORED_THRESHOLD", 0.5),
        seed=env_int("GENERATION_SEED", 0, minimum=0),
        # A cap per answer: a summary or a set of verdicts is a few hundred tokens, and a
        # model that does not stop would otherwise write until its context is full.
        max_tokens=env_int("GENERATION_MAX_TOKENS", 1024, minimum=1),
    )


def factored_models(s: PipelineSettings) -> tuple[str, str]:
    """(judge, critique) models of Factored Verification (the paper's Table 3 sets them
    apart): the judge gives each claim's verdict and P(supported), the hallucinations
    counted and P(summary); the critique model writes the claim-wise critiques a revision
    is made from. GENERATION_MODEL_FACTORED_JUDGE defaults to the factored pipeline's model,
    GENERATION_MODEL_FACTORED_CRITIQUE to the judge."""
    judge = env_str("GENERATION_MODEL_FACTORED_JUDGE", s.model)
    return judge, env_str("GENERATION_MODEL_FACTORED_CRITIQUE", judge)


# Factored Verification's claim check: "zero_shot" (reasoning with quotes, then yes/no: the
# summaries' prompt) or "few_shot" (the paper's appendix A.1.2, four worked examples).
CHECK_MODES = ("zero_shot", "few_shot")
# What an LLM decomposes into claims: the whole summary (the paper's A.1.1) or each cited sentence.
DECOMPOSE_OVER = ("summary", "sentences")


def _choice(value: str | None, name: str, default: str, allowed: tuple[str, ...]) -> str:
    chosen = (value or env_str(name, default)).strip().lower().replace("-", "_")
    if chosen not in allowed:
        raise ImproperlyConfigured(f"{name} must be one of {', '.join(allowed)}, not {chosen!r}")
    return chosen


def check_mode(value: str | None = None) -> str:
    """`value`, else GENERATION_FACTORED_CHECK (default "zero_shot"), checked."""
    return _choice(value, "GENERATION_FACTORED_CHECK", "zero_shot", CHECK_MODES)


def decompose_over(value: str | None = None) -> str:
    """`value`, else GENERATION_FACTORED_DECOMPOSE (default "summary", as the paper), checked."""
    return _choice(value, "GENERATION_FACTORED_DECOMPOSE", "summary", DECOMPOSE_OVER)


def claim_mode(value: str | None = None) -> str:
    """`value`, else GENERATION_FACTORED_CLAIMS (default "sentences"), checked."""
    mode = (value or env_str("GENERATION_FACTORED_CLAIMS", "sentences")).strip().lower()
    if mode not in CLAIM_MODES:
        raise ImproperlyConfigured(f"claims must be one of {', '.join(CLAIM_MODES)}, not {mode!r}")
    return mode
