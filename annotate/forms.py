"""Turning the rating form's POST data into the answers a rubric validates."""

from __future__ import annotations

from typing import Any

from django.http import QueryDict

from annotate.rubrics import RubricDefinition


def rationale_field(question_key: str) -> str:
    return f"{question_key}__rationale"


def answers_from_post(definition: RubricDefinition, data: QueryDict) -> tuple[dict[str, Any], dict[str, str]]:
    answers: dict[str, Any] = {}
    rationales: dict[str, str] = {}
    for q in definition.questions:
        if q.kind == "checkboxes":
            answers[q.key] = data.getlist(q.key)
        else:
            answers[q.key] = data.get(q.key)
        if q.rationale != "none":
            rationales[q.key] = data.get(rationale_field(q.key), "")
    return answers, rationales
