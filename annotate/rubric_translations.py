"""A rubric's texts in other languages (docs/rubric-format.md#translations).

A rubric file may carry a top-level `translations:` mapping: language code -> the texts
of that language, keyed as in the rubric (questions by key, options by value, rules by
number). Only texts are translated; keys, values, kinds and rules are the rubric's own,
so an answer means the same whatever language it was given in. The translations are part
of the definition (and of its content hash): a changed translation is a new version, as a
changed prompt is.

Pure code over the parsed definition (annotate.rubrics), which calls `parse_translations`
when it reads a file and `translate` when a page asks for a language.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

# "es", "de", "pt-br", "zh-hans": Django's language codes (settings.LANGUAGES).
LANGUAGE_CODE = re.compile(r"^[a-z]{2,3}(-[a-z0-9]{2,8})*$")
TRANSLATION_KEYS = ("title", "questions", "rules")
QUESTION_TEXT_KEYS = ("prompt", "help", "finding_label", "claim_label", "na", "options", "span_questions")
OPTION_TEXT_KEYS = ("label", "description")
NA_TEXT_KEYS = ("label",)
SUB_QUESTION_TEXT_KEYS = ("prompt", "options")


class TranslationProblem(ValueError):
    """A translations mapping that does not fit its rubric: `where` and what is wrong."""

    def __init__(self, where: str, message: str):
        super().__init__(f"{where}: {message}")


def _mapping(raw: Any, where: str, known: tuple[str, ...] | None = None) -> dict:
    if not isinstance(raw, dict):
        raise TranslationProblem(where, "must be a mapping")
    if known is not None:
        unknown = [k for k in raw if k not in known]
        if unknown:
            raise TranslationProblem(where, f"unknown key {unknown[0]!r} (known keys: {', '.join(known)})")
    return raw


def _text(raw: Any, where: str) -> str:
    if not isinstance(raw, str) or not raw.strip():
        raise TranslationProblem(where, "must be non-empty text")
    return raw


def _check_options(raw: Any, options, where: str) -> None:
    values = {str(o.value) for o in options}
    for value, texts in _mapping(raw, f"{where}, options").items():
        if str(value) not in values:
            raise TranslationProblem(f"{where}, options", f"{value!r} is not an option of the question")
        for name, text in _mapping(texts, f"{where}, option {value!r}", OPTION_TEXT_KEYS).items():
            _text(text, f"{where}, option {value!r}, {name}")


def _check_question(raw: Any, question, where: str) -> None:
    for name, given in _mapping(raw, where, QUESTION_TEXT_KEYS).items():
        if name == "options":
            _check_options(given, question.options, where)
        elif name == "na":
            if question.na is None:
                raise TranslationProblem(where, "na: the question offers no N/A")
            _text(_mapping(given, f"{where}, na", NA_TEXT_KEYS).get("label"), f"{where}, na, label")
        elif name == "span_questions":
            subs = {s.key: s for s in question.span_questions}
            for key, texts in _mapping(given, f"{where}, span_questions").items():
                if key not in subs:
                    raise TranslationProblem(f"{where}, span_questions", f"{key!r} is not a span question")
                here = f"{where}, span question {key!r}"
                for sub_name, sub_given in _mapping(texts, here, SUB_QUESTION_TEXT_KEYS).items():
                    if sub_name == "options":
                        _check_options(sub_given, subs[key].options, here)
                    else:
                        _text(sub_given, f"{here}, {sub_name}")
        else:
            _text(given, f"{where}, {name}")


def parse_translations(raw: Any, questions, rules) -> dict[str, dict]:
    """The checked `translations:` of a rubric file (language -> its texts, as written),
    or TranslationProblem naming the first text that does not fit the rubric: an unknown
    language code, question key, option value or key, or a text that is empty."""
    if raw is None:
        return {}
    by_key = {q.key: q for q in questions}
    for language, texts in _mapping(raw, "translations").items():
        where = f"translations, {language!r}"
        if not isinstance(language, str) or not LANGUAGE_CODE.match(language):
            raise TranslationProblem(where, "a language code is lower case, such as es, de or pt-br")
        texts = _mapping(texts, where, TRANSLATION_KEYS)
        if "title" in texts:
            _text(texts["title"], f"{where}, title")
        for key, given in _mapping(texts.get("questions", {}), f"{where}, questions").items():
            if key not in by_key:
                raise TranslationProblem(f"{where}, questions", f"{key!r} is not a question of the rubric")
            _check_question(given, by_key[key], f"{where}, question {key!r}")
        for number, message in _mapping(texts.get("rules", {}), f"{where}, rules").items():
            if str(number) not in {str(n) for n in range(1, len(rules) + 1)}:
                raise TranslationProblem(f"{where}, rules", f"rules are numbered 1 to {len(rules)}, got {number!r}")
            _text(message, f"{where}, rule {number}")
    return dict(raw)


def texts_for(translations: dict[str, dict], language: str) -> dict | None:
    """The texts for `language` ("es-mx" falls back to "es"), else None."""
    language = (language or "").lower()
    for code in (language, language.split("-")[0]):
        if code in translations:
            return translations[code]
    return None


def _by_text_key(given: dict) -> dict:
    # A scale's option values and the rules' numbers are integers in the YAML file and
    # text in the stored JSON copy of it: both are looked up as text.
    return {str(key): value for key, value in given.items()}


def _options(options, given: dict) -> tuple:
    given = _by_text_key(given)
    return tuple(
        dataclasses.replace(
            o,
            label=given.get(str(o.value), {}).get("label", o.label),
            description=given.get(str(o.value), {}).get("description", o.description),
        )
        for o in options
    )


def _question(q, given: dict):
    subs = given.get("span_questions", {})
    return dataclasses.replace(
        q,
        prompt=given.get("prompt", q.prompt),
        help=given.get("help", q.help),
        finding_label=given.get("finding_label", q.finding_label),
        claim_label=given.get("claim_label", q.claim_label),
        options=_options(q.options, given.get("options", {})),
        na=dataclasses.replace(q.na, label=given["na"]["label"]) if q.na is not None and "na" in given else q.na,
        span_questions=tuple(
            dataclasses.replace(
                s,
                prompt=subs.get(s.key, {}).get("prompt", s.prompt),
                options=_options(s.options, subs.get(s.key, {}).get("options", {})),
            )
            for s in q.span_questions
        ),
    )


def translate(definition, language: str):
    """The definition with its texts in `language` where the rubric translates them (each
    text without a translation stays as written); the same definition when it has none.
    Keys, values, rules and `raw` (hence the content hash) are unchanged."""
    texts = texts_for(definition.translations, language)
    if texts is None:
        return definition
    questions = texts.get("questions", {})
    rules = _by_text_key(texts.get("rules", {}))
    return dataclasses.replace(
        definition,
        title=texts.get("title", definition.title),
        questions=tuple(_question(q, questions.get(q.key, {})) for q in definition.questions),
        rules=tuple(
            dataclasses.replace(rule, message=rules.get(str(i), rule.message))
            for i, rule in enumerate(definition.rules, start=1)
        ),
    )
