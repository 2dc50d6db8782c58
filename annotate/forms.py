"""Turning the rating form's POST data into the answers a rubric validates.

Field names: `<key>` for a question's value, `<key>__rationale` for its rationale,
`<key>__<finding id>` (+ `__rationale`) for per-finding questions, and
`<key>__json` for a span question's highlights (a JSON list, kept up to date by
static/js/rate.js).
"""

from __future__ import annotations

import json
from typing import Any

from django.http import QueryDict

from annotate.rubrics import AnswerValidationError, RubricDefinition


def rationale_field(question_key: str) -> str:
    return f"{question_key}__rationale"


def finding_field(question_key: str, finding_id: str) -> str:
    return f"{question_key}__{finding_id}"


def spans_field(question_key: str) -> str:
    return f"{question_key}__json"


def answers_from_post(
    definition: RubricDefinition, data: QueryDict, finding_ids: tuple[str, ...] = ()
) -> tuple[dict[str, Any], dict[str, Any]]:
    answers: dict[str, Any] = {}
    rationales: dict[str, Any] = {}
    for q in definition.questions:
        if q.kind == "per_finding":
            answers[q.key] = {
                f: data.get(finding_field(q.key, f)) for f in finding_ids if data.get(finding_field(q.key, f))
            }
            rationales[q.key] = {
                f: data.get(rationale_field(finding_field(q.key, f)))
                for f in finding_ids
                if data.get(rationale_field(finding_field(q.key, f)))
            }
            continue
        if q.kind == "span":
            raw = data.get(spans_field(q.key)) or "[]"
            try:
                answers[q.key] = json.loads(raw)
            except json.JSONDecodeError:
                raise AnswerValidationError({q.key: "the highlights could not be read; reload the page"}) from None
            continue
        if q.kind == "checkboxes":
            answers[q.key] = data.getlist(q.key)
        else:
            answers[q.key] = data.get(q.key)
        if q.rationale != "none" or q.na:
            rationales[q.key] = data.get(rationale_field(q.key), "")
    return answers, rationales
