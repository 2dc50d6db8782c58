"""Rubric definitions: parsing a definition and validating answers against it.

Pure code (no ORM): a definition is a dict read from YAML/JSON (see
docs/rubric-format.md); `RubricDefinition.validate` turns raw answers into clean ones
or raises `AnswerValidationError` with one message per question key.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from annotate.exceptions import ApplicationError

QUESTION_KINDS = ("scale", "checkboxes", "choice", "text")
RATIONALE_MODES = ("none", "optional", "required")
MAX_TEXT_LENGTH = 20_000


class RubricDefinitionError(ApplicationError):
    """The rubric file itself is invalid."""


class AnswerValidationError(ApplicationError):
    """Answers do not satisfy the rubric; `errors` maps question key -> message."""

    def __init__(self, errors: dict[str, str]):
        self.errors = errors
        keys = ", ".join(sorted(errors))
        super().__init__(f"Some answers need attention: {keys}.", extra={"fields": errors})


@dataclass(frozen=True)
class Option:
    value: Any
    label: str
    description: str = ""


@dataclass(frozen=True)
class Question:
    key: str
    kind: str
    prompt: str
    help: str = ""
    required: bool = False
    rationale: str = "none"
    options: tuple[Option, ...] = ()
    shortcut_digits: bool = False

    @property
    def values(self) -> tuple[Any, ...]:
        return tuple(option.value for option in self.options)

    @property
    def scale_bounds(self) -> tuple[int, int] | None:
        if self.kind != "scale":
            return None
        return min(self.values), max(self.values)


@dataclass(frozen=True)
class CleanAnswers:
    """Validated answers: question key -> value, and question key -> rationale text."""

    values: dict[str, Any] = field(default_factory=dict)
    rationales: dict[str, str] = field(default_factory=dict)


def _require(condition: bool, where: str, message: str) -> None:
    if not condition:
        raise RubricDefinitionError(f"{where}: {message}")


def _parse_option(raw: Any, where: str, kind: str) -> Option:
    _require(isinstance(raw, dict), where, "each option must be a mapping with value and label")
    _require("value" in raw, where, "option has no value")
    value = raw["value"]
    if kind == "scale":
        _require(isinstance(value, int) and not isinstance(value, bool), where, "scale values must be integers")
    else:
        _require(isinstance(value, str) and value != "", where, "option values must be non-empty strings")
    label = raw.get("label")
    _require(isinstance(label, str) and label.strip() != "", where, f"option {value!r} has no label")
    return Option(value=value, label=label, description=str(raw.get("description", "")))


def _parse_question(raw: Any, index: int) -> Question:
    where = f"question {index + 1}"
    _require(isinstance(raw, dict), where, "must be a mapping")
    key = raw.get("key")
    _require(isinstance(key, str) and key.isidentifier(), where, "key must be an identifier such as overall_score")
    where = f"question {key!r}"
    kind = raw.get("kind")
    _require(kind in QUESTION_KINDS, where, f"kind must be one of {', '.join(QUESTION_KINDS)}, got {kind!r}")
    prompt = raw.get("prompt")
    _require(isinstance(prompt, str) and prompt.strip() != "", where, "prompt is required")
    rationale = raw.get("rationale", "none")
    _require(rationale in RATIONALE_MODES, where, f"rationale must be one of {', '.join(RATIONALE_MODES)}")
    required = raw.get("required", False)
    _require(isinstance(required, bool), where, "required must be true or false")
    options: tuple[Option, ...] = ()
    if kind in ("scale", "checkboxes", "choice"):
        raw_options = raw.get("options")
        _require(isinstance(raw_options, list) and len(raw_options) >= 2, where, "needs at least two options")
        options = tuple(_parse_option(o, where, kind) for o in raw_options)
        values = [o.value for o in options]
        _require(len(set(values)) == len(values), where, "option values must be unique")
        if kind == "scale":
            _require(values == sorted(values), where, "scale options must be in increasing order")
    else:
        _require("options" not in raw, where, "text questions take no options")
    shortcut_digits = bool(raw.get("shortcut_digits", False))
    if shortcut_digits:
        _require(
            kind == "scale" and all(0 <= v <= 9 for v in (o.value for o in options)),
            where,
            "shortcut_digits needs a scale of single digits",
        )
    return Question(
        key=key,
        kind=kind,
        prompt=prompt,
        help=str(raw.get("help", "")),
        required=required,
        rationale=rationale,
        options=options,
        shortcut_digits=shortcut_digits,
    )


@dataclass(frozen=True)
class RubricDefinition:
    key: str
    title: str
    questions: tuple[Question, ...]
    raw: dict

    @classmethod
    def from_dict(cls, raw: Any) -> RubricDefinition:
        _require(isinstance(raw, dict), "rubric", "must be a mapping")
        key = raw.get("key")
        _require(isinstance(key, str) and key.replace("-", "_").isidentifier(), "rubric", "key must be a slug")
        title = raw.get("title")
        _require(isinstance(title, str) and title.strip() != "", "rubric", "title is required")
        raw_questions = raw.get("questions")
        _require(isinstance(raw_questions, list) and raw_questions, "rubric", "questions must be a non-empty list")
        questions = tuple(_parse_question(q, i) for i, q in enumerate(raw_questions))
        keys = [q.key for q in questions]
        duplicates = sorted({k for k in keys if keys.count(k) > 1})
        _require(not duplicates, "rubric", f"duplicate question keys: {', '.join(duplicates)}")
        _require(sum(q.shortcut_digits for q in questions) <= 1, "rubric", "only one question may take digit shortcuts")
        return cls(key=key, title=title, questions=questions, raw=raw)

    @property
    def content_hash(self) -> str:
        canonical = json.dumps(self.raw, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
        return hashlib.sha256(canonical.encode("utf-8")).hexdigest()

    def question(self, key: str) -> Question:
        for q in self.questions:
            if q.key == key:
                return q
        raise KeyError(key)

    def validate(self, answers: Any, rationales: Any = None, *, final: bool) -> CleanAnswers:
        """Check answers against the rubric.

        Drafts (`final=False`) may be incomplete but every given value must be
        allowed; a final submission must also answer every required question and give
        every required rationale. Unknown keys are errors, never silently dropped.
        """
        if not isinstance(answers, dict):
            raise AnswerValidationError({"answers": "must be an object mapping question keys to answers"})
        rationales = {} if rationales is None else rationales
        if not isinstance(rationales, dict):
            raise AnswerValidationError({"rationales": "must be an object mapping question keys to text"})
        known = {q.key for q in self.questions}
        errors: dict[str, str] = {}
        for key in sorted(set(answers) - known):
            errors[str(key)] = "is not a question of this rubric"
        for key in sorted(set(rationales) - known):
            errors[str(key)] = "is not a question of this rubric"

        values: dict[str, Any] = {}
        clean_rationales: dict[str, str] = {}
        for q in self.questions:
            raw = answers.get(q.key)
            try:
                value = self._clean_value(q, raw)
            except ValueError as exc:
                errors[q.key] = str(exc)
                continue
            if value is not None:
                values[q.key] = value
            elif final and q.required:
                errors[q.key] = "an answer is required"
                continue

            text = rationales.get(q.key)
            if text is not None and not isinstance(text, str):
                errors[q.key] = "the rationale must be text"
                continue
            text = (text or "").strip()
            if text and q.rationale == "none":
                errors[q.key] = "this question takes no rationale"
                continue
            if len(text) > MAX_TEXT_LENGTH:
                errors[q.key] = f"the rationale is longer than {MAX_TEXT_LENGTH} characters"
                continue
            if text and value is None:
                errors[q.key] = "a rationale needs an answer to go with it"
                continue
            if final and q.rationale == "required" and value is not None and not text:
                errors[q.key] = "a rationale is required"
                continue
            if text:
                clean_rationales[q.key] = text
        if errors:
            raise AnswerValidationError(errors)
        return CleanAnswers(values=values, rationales=clean_rationales)

    @staticmethod
    def _clean_value(q: Question, raw: Any) -> Any:
        """Return the clean value, None for "not answered", or raise ValueError."""
        if raw is None or raw == "" or (q.kind == "checkboxes" and raw == []):
            return None
        if q.kind == "scale":
            if isinstance(raw, str) and raw.strip().lstrip("-").isdigit():
                raw = int(raw)
            if not isinstance(raw, int) or isinstance(raw, bool) or raw not in q.values:
                allowed = ", ".join(str(v) for v in q.values)
                raise ValueError(f"must be one of {allowed}")
            return raw
        if q.kind == "choice":
            if raw not in q.values:
                raise ValueError(f"must be one of {', '.join(q.values)}")
            return raw
        if q.kind == "checkboxes":
            if not isinstance(raw, list) or not all(isinstance(v, str) for v in raw):
                raise ValueError("must be a list of option values")
            unknown = [v for v in raw if v not in q.values]
            if unknown:
                raise ValueError(f"unknown option(s): {', '.join(unknown)}")
            # Stored in rubric order, without duplicates, so equal answers compare equal.
            return [v for v in q.values if v in raw]
        if q.kind == "text":
            if not isinstance(raw, str):
                raise ValueError("must be text")
            text = raw.strip()
            if len(text) > MAX_TEXT_LENGTH:
                raise ValueError(f"is longer than {MAX_TEXT_LENGTH} characters")
            return text or None
        raise ValueError(f"unsupported question kind {q.kind}")
