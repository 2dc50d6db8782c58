"""A summary as the pipelines read it: the summary out of a generation answer (or why
there is none), its sentences as claims (with the references each cites), the claims of a
decomposition answer, and the figures over verified claims (hallucinations, P(summary))."""

from __future__ import annotations

import math
import re
from collections.abc import Collection

from core.sentences import split_spans
from core.text_validation import MAX_SUMMARY_CHARS
from generation.answer_text import parse_json_object
from generation.meaning import meaning_problem
from generation.reference_checks import cited_refs
from generation.verdicts import (
    NOT_SUPPORTED,
    SUPPORTED,
    UNVERIFIED,
)

_LABEL = re.compile(r"^\s*(?:\*\*)?(?:revised |corrected )?summary(?:\*\*)?\s*:\s*", re.IGNORECASE)
_FENCE = re.compile(r"^\s*```[a-z]*\s*|\s*```\s*$")


def summary_problem(text: str, prompt_id: str | None = None) -> str | None:
    """Why a model's answer cannot be a summary, or None: empty, too long, or meaningless
    (a placeholder, a copy of the prompt's example, no content words)."""
    if not text.strip():
        return "the model's answer was empty"
    if len(text) > MAX_SUMMARY_CHARS:
        return f"the model's answer is {len(text):,} characters long; a summary may have at most {MAX_SUMMARY_CHARS:,}"
    return meaning_problem(text, prompt_id=prompt_id, what="model's answer") or None


def clean_summary(text: str) -> str:
    """The summary out of a generation answer (no code fence, no "Summary:" label)."""
    return _LABEL.sub("", _FENCE.sub("", text.strip())).strip()


def sentence_claims(text: str, known: Collection[str] = ()) -> list[dict]:
    """The text's sentences as (not yet verified) claims, with their spans and the
    references they cite (`known`: the context's ids, which count whatever they look
    like, e.g. a source key used as the reference)."""
    claims = []
    for index, (start, end) in enumerate(split_spans(text)):
        sentence = text[start:end]
        claims.append(
            {
                "index": index,
                "text": sentence,
                "start": start,
                "end": end,
                "refs": list(dict.fromkeys(cited_refs(sentence, known))),
                "verdict": UNVERIFIED,
                "explanation": "",
                "probability": None,
            }
        )
    return claims


_CLAIM_LINE = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s+(.+?)\s*$")


def read_claims(text: str) -> tuple[list[str], bool]:
    """(the claims of a decomposition answer, whether it had the JSON shape asked for).
    Tolerant: the paper's own layout ("The claims are:" then "- claim" lines) is read too."""
    parsed = parse_json_object(text)
    raw = parsed.get("claims") if isinstance(parsed, dict) else None
    well_formed = isinstance(raw, list) and all(isinstance(c, str) for c in raw)
    if isinstance(raw, list):
        found = [" ".join(str(c).split()) for c in raw if isinstance(c, str)]
    elif parsed is None:
        found = [m.group(1) for m in map(_CLAIM_LINE.match, text.splitlines()) if m]
    else:
        found = []
    return [c for c in found if c], well_formed


def hallucinations(claims: list[dict]) -> int | None:
    """The claims judged not supported; None ("not checked") when no claim was judged at
    all, which is not the same as none found."""
    if not any(c["verdict"] in (SUPPORTED, NOT_SUPPORTED) for c in claims):
        return None
    return sum(c["verdict"] == NOT_SUPPORTED for c in claims)


def meaningful_claims(found: list[str]) -> tuple[list[str], dict[str, str]]:
    """(the decomposed claims that state something, {claim left out: why}): the prompt's
    placeholder, a copy of its example, or a claim without content words ("PMC1087853",
    "10 dB") is never verified, so it never adds a vacuous "supported" to P(summary)."""
    problems = {c: meaning_problem(c, prompt_id="factored_decompose", what="claim") for c in found}
    return [c for c in found if not problems[c]], {c: p for c, p in problems.items() if p}


def summary_probability(claims: list[dict]) -> float | None:
    """P(summary) = product of the verified claims' probabilities (independence, as
    in the paper); None when no claim was verified."""
    probabilities = [c["probability"] for c in claims if c.get("probability") is not None]
    return math.prod(probabilities) if probabilities else None
