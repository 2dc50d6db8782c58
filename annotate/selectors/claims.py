"""The claims of a summary that a per-claim question asks about (docs/rubric-format.md).

A summary's claims are the ones a pipeline recorded (Claim rows: Factored Verification's
claims, with their verdicts), in their order; a summary without recorded claims is asked
about its sentences (core.sentences.split_spans). Claim ids are the Claim's uuid, or
`sentence-<n>` (1-based) for sentences: stable, since a summary's text never changes
once it is in a study.
"""

from __future__ import annotations

from dataclasses import dataclass

from annotate.models import Claim, Summary
from annotate.rubrics import RubricDefinition
from core.sentences import split_spans

SENTENCE_PREFIX = "sentence-"


@dataclass(frozen=True)
class ClaimUnit:
    id: str
    number: int
    text: str
    start: int | None
    end: int | None
    recorded: bool  # a Claim row (with a verdict), not a sentence


def claim_units(summary: Summary) -> list[ClaimUnit]:
    """The summary's recorded claims in order, else its sentences."""
    claims = list(Claim.objects.filter(summary=summary).order_by("index").values_list("uuid", "text", "start", "end"))
    if claims:
        return [
            ClaimUnit(str(uuid), number, text, start, end, True)
            for number, (uuid, text, start, end) in enumerate(claims, start=1)
        ]
    return [
        ClaimUnit(f"{SENTENCE_PREFIX}{number}", number, summary.text[start:end], start, end, False)
        for number, (start, end) in enumerate(split_spans(summary.text), start=1)
    ]


def claims_asked(definition: RubricDefinition, summary: Summary) -> list[ClaimUnit]:
    """The summary's claim units when the rubric asks per-claim questions (else none, and
    no query): their text only, never a pipeline's verdict on them."""
    return claim_units(summary) if definition.asks_claims else []


def claim_ids(summary: Summary) -> tuple[str, ...]:
    return tuple(unit.id for unit in claim_units(summary))
