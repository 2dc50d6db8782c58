"""A parsed rubric (`RubricDefinition`): built by `from_dict`, it validates answers
(`validate`) and reports its consistency rules' problems."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

from django.utils.translation import gettext

from annotate.rubric_translations import TranslationProblem, parse_translations, translate
from annotate.rubrics.answers import (
    PartProblems,
    check_answer_text,
    clean_answer,
    number_from_text,
    unasked_problem,
)
from annotate.rubrics.parsing import check_known_keys, parse_question, parse_rules, require
from annotate.rubrics.questions import (
    AnswerContext,
    AnswerValidationError,
    CleanAnswers,
    Question,
    RubricDefinitionError,
)


@dataclass(frozen=True)
class RubricDefinition:
    key: str
    title: str
    questions: tuple[Question, ...]
    raw: dict
    rules: tuple = ()
    # Language -> the rubric's texts in it (annotate.rubric_translations).
    translations: dict = field(default_factory=dict)

    @classmethod
    def from_dict(cls, raw: Any, *, known_keys_only: bool = False) -> RubricDefinition:
        """The parsed definition, or RubricDefinitionError naming the problem.
        `known_keys_only`: refuse keys the format does not have (check_known_keys), as
        every new definition is (an upload, a built-in file, `load_rubric`); a stored
        version is read as it was stored."""
        if known_keys_only:
            check_known_keys(raw)
        require(isinstance(raw, dict), "rubric", "must be a mapping")
        key = raw.get("key")
        require(isinstance(key, str) and key.replace("-", "_").isidentifier(), "rubric", "key must be a slug")
        title = raw.get("title")
        require(isinstance(title, str) and title.strip() != "", "rubric", "title is required")
        raw_questions = raw.get("questions")
        require(isinstance(raw_questions, list) and raw_questions, "rubric", "questions must be a non-empty list")
        questions = tuple(parse_question(q, i) for i, q in enumerate(raw_questions))
        keys = [q.key for q in questions]
        duplicates = sorted({k for k in keys if keys.count(k) > 1})
        require(not duplicates, "rubric", f"duplicate question keys: {', '.join(duplicates)}")
        require(sum(q.shortcut_digits for q in questions) <= 1, "rubric", "only one question may take digit shortcuts")
        rules = parse_rules(raw.get("rules"), questions)
        try:
            translations = parse_translations(raw.get("translations"), questions, rules)
        except TranslationProblem as exc:
            raise RubricDefinitionError(str(exc)) from None
        return cls(key=key, title=title, questions=questions, raw=raw, rules=rules, translations=translations)

    def translated(self, language: str) -> RubricDefinition:
        """This definition with its texts in `language` where the rubric translates them
        (docs/rubric-format.md#translations); keys, values and the content hash unchanged."""
        return translate(self, language)

    @property
    def content_hash(self) -> str:
        canonical = json.dumps(self.raw, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
        return hashlib.sha256(canonical.encode("utf-8")).hexdigest()

    @property
    def compares(self) -> bool:
        """A rubric for comparison items: it asks preferences (or highlights in either
        compared summary), so it is shown with the comparison page."""
        return any(q.about_comparisons for q in self.questions)

    @property
    def asks_claims(self) -> bool:
        """Some question is asked once per claim of the summary (its answers are checked
        against the summary's claims, which cost a query to read)."""
        return any(q.per_claim for q in self.questions)

    @property
    def na_codes(self) -> dict[str, int]:
        """Question key -> the code of N/A, for the scales that count N/A as a category
        (Question.na_code); the statistics give those answers this code (stats.frames)."""
        return {q.key: q.na_code for q in self.questions if q.na_code is not None}

    def question(self, key: str) -> Question:
        for q in self.questions:
            if q.key == key:
                return q
        raise KeyError(key)

    def validate(
        self,
        answers: Any,
        rationales: Any = None,
        *,
        final: bool,
        context: AnswerContext | None = None,
        only: Collection[str] | None = None,
    ) -> CleanAnswers:
        """Check answers against the rubric.

        Drafts (`final=False`) may be incomplete but every given value must be
        allowed; a final submission must also answer every required question, give
        every required rationale and satisfy the rubric's consistency rules. Unknown
        keys are errors, never silently dropped. Span offsets are checked against the
        texts in `context` (character offsets, counted in code points).

        `only`: a final answer to these questions alone (an automatic judge is not asked
        the span questions): the others are checked as a draft's, and need no answer.
        """
        context = context or AnswerContext()
        rationales = {} if rationales is None else rationales
        errors = self._unknown_keys(answers, rationales)
        values: dict[str, Any] = {}
        clean_rationales: dict[str, Any] = {}
        parts: dict[str, list[tuple[str, str]]] = {}
        for q in self.questions:
            final_here = final and (only is None or q.key in only)
            try:
                value, rationale = clean_answer(q, answers.get(q.key), rationales.get(q.key), final_here, context)
            except PartProblems as exc:
                errors[q.key], parts[q.key] = str(exc), exc.problems
                continue
            except ValueError as exc:
                errors[q.key] = str(exc)
                continue
            problem = unasked_problem(q, value, final_here, context)
            if problem:
                errors[q.key] = problem
                continue
            if value is not None:
                values[q.key] = value
            if rationale:
                clean_rationales[q.key] = rationale
        if final:
            # Every problem at once: a rule whose questions are themselves wrong waits
            # for those to be fixed, the others are reported alongside them.
            for key, message in self.rule_problems(values):
                if key not in errors and self._rule_questions_clean(key, errors):
                    errors[key] = message
        if errors:
            raise AnswerValidationError(errors, parts)
        return CleanAnswers(values=values, rationales=clean_rationales)

    def _unknown_keys(self, answers: Any, rationales: Any) -> dict[str, str]:
        """The answers' and rationales' keys that are no question of the rubric, each with
        its error; AnswerValidationError at once for anything but two mappings, or for text
        that cannot be stored."""
        if not isinstance(answers, dict):
            raise AnswerValidationError({"answers": "must be an object mapping question keys to answers"})
        if not isinstance(rationales, dict):
            raise AnswerValidationError({"rationales": "must be an object mapping question keys to text"})
        known = {q.key for q in self.questions}
        check_answer_text(answers, rationales, known)
        errors: dict[str, str] = {}
        for key in sorted(set(answers) - known):
            errors[str(key)] = gettext("is not a question of this rubric")
        for key in sorted(set(rationales) - known):
            errors[str(key)] = gettext("is not a question of this rubric")
        return errors

    def numbers_from_text(self, answers: Any) -> Any:
        """`answers` with the scale answers given as digits ("3", as an HTML form posts them,
        or a model writes them) turned into numbers; everything else as given. For the
        callers that read text; validate() itself refuses a string where a number belongs."""
        if not isinstance(answers, dict):
            return answers
        converted = dict(answers)
        for q in self.questions:
            if not q.is_scale or q.key not in converted:
                continue
            raw = converted[q.key]
            if isinstance(raw, dict) and (q.per_finding or q.per_claim):
                converted[q.key] = {part: number_from_text(v) for part, v in raw.items()}
            else:
                converted[q.key] = number_from_text(raw)
        return converted

    def rule_problems(self, values: dict) -> list[tuple[str, str]]:
        """Every consistency rule broken by `values`, as (question key, message) pairs,
        one per question (the first rule on a question is the one reported)."""
        problems: list[tuple[str, str]] = []
        seen: set[str] = set()
        for rule in self.rules:
            if rule.then_question in seen:
                continue
            if rule.applies(values) and not rule.satisfied(values):
                problems.append((rule.then_question, rule.message))
                seen.add(rule.then_question)
        return problems

    def _rule_questions_clean(self, key: str, errors: dict) -> bool:
        return not any(r.when_question in errors for r in self.rules if r.then_question == key)

    def draft_hints(self, clean: CleanAnswers) -> dict[str, str]:
        """The rule problems of a draft, shown as hints while drafting: never a refusal."""
        return dict(self.rule_problems(clean.values))
