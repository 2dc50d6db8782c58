"""What names an evaluator run's version, without the evaluators themselves.

generation.evaluators imports the LLM gateway (openai, tiktoken, pydantic, httpx: about a
second of imports); the study report only needs to know which stored run of the
`reference` evaluator is today's (generation.selectors.stored_reference_metrics) and what
the rubric judge's columns are called, so it asks this module instead.
"""

from __future__ import annotations

import hashlib
import json

REFERENCE_EVALUATOR = "reference"
JUDGE_NAME = "rubric_judge"  # as the evaluators page and the report's columns name it (generation.judging)


def config_version(config: dict) -> str:
    return hashlib.sha256(json.dumps(config, sort_keys=True).encode()).hexdigest()[:12]


def reference_config() -> dict:
    """The `reference` evaluator's config (ReferenceMetrics.config): its name and the
    metrics' definition and package versions (stats.metrics.reference_config)."""
    from stats.metrics import reference_config as metrics_config

    return {"evaluator": REFERENCE_EVALUATOR, **metrics_config()}
