"""Reading a rubric definition (a dict from YAML/JSON, docs/rubric-format.md): every level's
known keys, its questions, options, scales and rules, or `RubricDefinitionError` naming
the problem."""

from __future__ import annotations

import difflib
from typing import Any

from annotate.rubrics.questions import (
    CLAIM_NOT_SUPPORTED,
    CLAIM_SUPPORTED,
    NA,
    NA_ANALYSIS,
    QUESTION_KINDS,
    RATIONALE_MODES,
    SPAN_TARGETS,
    NotApplicable,
    Option,
    Question,
    RubricDefinitionError,
    Rule,
    SubQuestion,
)


def require(condition: bool, where: str, message: str) -> None:
    if not condition:
        raise RubricDefinitionError(f"{where}: {message}")


# The keys each level of a rubric file may hold (docs/rubric-format.md). Any other key is
# refused, naming the closest known one: a misspelt `requird: true` would otherwise leave
# the question quietly optional.
TOP_KEYS = ("key", "title", "questions", "rules", "translations")
QUESTION_KEYS = (
    "key",
    "kind",
    "prompt",
    "help",
    "required",
    "rationale",
    "options",
    "scale",
    "shortcut_digits",
    "na",
    "target",
    "span_questions",
    "finding_label",
    "claim_label",
    "strength",
    "criterion",
)
OPTION_KEYS = ("value", "label", "description")
SCALE_KEYS = ("from", "to", "labels", "descriptions")
NA_KEYS = ("label", "rationale_required", "analysis")
SUB_QUESTION_KEYS = ("key", "kind", "prompt", "required", "options")
RULE_KEYS = ("when", "then", "message")
CONDITION_KEYS = ("question", "includes", "in", "not_in", "span_answer")


def _check_keys(raw: Any, known: tuple[str, ...], where: str) -> None:
    """Refuse a key of the mapping `raw` that is not in `known`, naming the closest one."""
    if not isinstance(raw, dict):
        return
    for name in raw:
        if name in known:
            continue
        close = difflib.get_close_matches(str(name), known, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else f" (known keys: {', '.join(known)})"
        if raw[name] is None and " " in str(name).strip():
            # `{label: Good, description: All main results, most secondary}`: the comma
            # ended the value, and the rest became a key without a value.
            hint += "; a comma inside {…} ends a value: quote text that holds a comma"
        raise RubricDefinitionError(f"unknown key {name!r} in {where}{hint}")


def check_known_keys(raw: Any) -> None:
    """Refuse any key a rubric file may not hold, at every level (TOP_KEYS and the rest):
    RubricDefinitionError "unknown key 'requird' in question 'x' (did you mean 'required'?)".
    Shapes are RubricDefinition.from_dict's to check; this only reads the mappings it finds."""
    _check_keys(raw, TOP_KEYS, "the rubric")
    if not isinstance(raw, dict):
        return
    questions = raw.get("questions")
    for i, question in enumerate(questions if isinstance(questions, list) else []):
        if not isinstance(question, dict):
            continue
        key = question.get("key")
        where = f"question {key!r}" if isinstance(key, str) else f"question {i + 1}"
        _check_keys(question, QUESTION_KEYS, where)
        _check_option_keys(question.get("options"), where)
        _check_keys(question.get("scale"), SCALE_KEYS, f"{where}, scale")
        _check_keys(question.get("na"), NA_KEYS, f"{where}, na")
        subs = question.get("span_questions")
        for j, sub in enumerate(subs if isinstance(subs, list) else []):
            if not isinstance(sub, dict):
                continue
            sub_key = sub.get("key")
            named = repr(sub_key) if isinstance(sub_key, str) else str(j + 1)
            here = f"{where}, span question {named}"
            _check_keys(sub, SUB_QUESTION_KEYS, here)
            _check_option_keys(sub.get("options"), here)
    rules = raw.get("rules")
    for i, rule in enumerate(rules if isinstance(rules, list) else [], start=1):
        _check_keys(rule, RULE_KEYS, f"rule {i}")
        if isinstance(rule, dict):
            for part in ("when", "then"):
                _check_keys(rule.get(part), CONDITION_KEYS, f"rule {i}, {part}")


def _check_option_keys(options: Any, where: str) -> None:
    for i, option in enumerate(options if isinstance(options, list) else [], start=1):
        value = option.get("value") if isinstance(option, dict) else None
        _check_keys(option, OPTION_KEYS, f"{where}, option {value!r}" if value is not None else f"{where}, option {i}")


def _parse_option(raw: Any, where: str, kind: str) -> Option:
    require(isinstance(raw, dict), where, "each option must be a mapping with value and label")
    require("value" in raw, where, "option has no value")
    value = raw["value"]
    if kind == "scale":
        require(isinstance(value, int) and not isinstance(value, bool), where, "scale values must be integers")
    else:
        require(isinstance(value, str) and value != "", where, "option values must be non-empty strings")
    label = raw.get("label")
    require(isinstance(label, str) and label.strip() != "", where, f"option {value!r} has no label")
    return Option(value=value, label=label, description=str(raw.get("description", "")))


def parse_question(raw: Any, index: int) -> Question:
    where = f"question {index + 1}"
    require(isinstance(raw, dict), where, "must be a mapping")
    key = raw.get("key")
    require(isinstance(key, str) and key.isidentifier(), where, "key must be an identifier such as overall_score")
    where = f"question {key!r}"
    kind = raw.get("kind")
    require(kind in QUESTION_KINDS, where, f"kind must be one of {', '.join(QUESTION_KINDS)}, got {kind!r}")
    prompt = raw.get("prompt")
    require(isinstance(prompt, str) and prompt.strip() != "", where, "prompt is required")
    rationale = raw.get("rationale", "none")
    require(rationale in RATIONALE_MODES, where, f"rationale must be one of {', '.join(RATIONALE_MODES)}")
    required = raw.get("required", False)
    require(isinstance(required, bool), where, "required must be true or false")
    options = _parse_question_options(raw, kind, where)
    na = _parse_na(raw, kind, rationale, where)
    target, span_questions = _parse_span_target(raw, kind, where)
    strength = raw.get("strength", False)
    require(isinstance(strength, bool), where, "strength must be true or false")
    require(not strength or kind == "preference", where, "only preference questions take strength")
    criterion = raw.get("criterion", "")
    require(isinstance(criterion, str), where, "criterion must be text")
    require(not criterion or kind == "preference", where, "only preference questions name a criterion")
    shortcut_digits = bool(raw.get("shortcut_digits", False))
    if shortcut_digits:
        require(
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
        na=na,
        target=target,
        span_questions=span_questions,
        finding_label=str(raw.get("finding_label", "")),
        claim_label=str(raw.get("claim_label", "")),
        strength=strength,
        criterion=criterion,
    )


def _parse_question_options(raw: dict, kind: str, where: str) -> tuple[Option, ...]:
    """A question's options: listed, or a scale's range; none for the kinds without."""
    options: tuple[Option, ...] = ()
    if "scale" in raw:
        require(kind in ("scale", "per_finding"), where, "only scale questions take scale: {from, to, labels}")
        require("options" not in raw, where, "give either options or scale, not both")
        options = _parse_scale_range(raw["scale"], where)
    elif kind in ("scale", "checkboxes", "choice", "per_finding", "per_claim"):
        parsed_as = {"per_finding": "scale", "per_claim": "choice"}.get(kind, kind)
        options = _parse_options(raw.get("options"), where, parsed_as)
        if kind == "per_claim":
            require(
                {CLAIM_SUPPORTED, CLAIM_NOT_SUPPORTED} <= {o.value for o in options},
                where,
                f"a per-claim question needs the options {CLAIM_SUPPORTED!r} and {CLAIM_NOT_SUPPORTED!r}",
            )
    if kind in ("scale", "per_finding"):
        values = [o.value for o in options]
        require(values == sorted(values), where, "scale options must be in increasing order")
    if kind not in ("scale", "checkboxes", "choice", "per_finding", "per_claim"):
        require("options" not in raw, where, f"{kind} questions take no options")
    return options


def _parse_na(raw: dict, kind: str, rationale: str, where: str) -> NotApplicable | None:
    """A scale's N/A answer, if it offers one."""
    na = None
    if "na" in raw and raw["na"] not in (None, False):
        require(kind in ("scale", "per_finding"), where, "only scale questions can offer N/A")
        raw_na = raw["na"] if isinstance(raw["na"], dict) else {}
        analysis = raw_na.get("analysis", "missing")
        require(analysis in NA_ANALYSIS, where, f"na.analysis must be one of {', '.join(NA_ANALYSIS)}")
        na = NotApplicable(
            label=str(raw_na.get("label", "N/A")),
            rationale_required=bool(raw_na.get("rationale_required", True)),
            analysis=analysis,
        )
        require(
            rationale != "none" or not na.rationale_required,
            where,
            "an N/A that requires a rationale needs rationale: optional or required",
        )
    return na


def _parse_span_target(raw: dict, kind: str, where: str) -> tuple[str, tuple[SubQuestion, ...]]:
    """A span question's target text and its questions about each span."""
    target, span_questions = "", ()
    if kind == "span":
        target = raw.get("target", "summary")
        require(target in SPAN_TARGETS, where, f"target must be one of {', '.join(SPAN_TARGETS)}")
        span_questions = tuple(_parse_sub_question(q, where, i) for i, q in enumerate(raw.get("span_questions", [])))
        keys = [q.key for q in span_questions]
        require(len(set(keys)) == len(keys), where, "span question keys must be unique")
    else:
        require("span_questions" not in raw, where, "only span questions take span_questions")
    return target, span_questions


def _parse_options(raw_options: Any, where: str, kind: str) -> tuple[Option, ...]:
    require(isinstance(raw_options, list) and len(raw_options) >= 2, where, "needs at least two options")
    options = tuple(_parse_option(o, where, kind) for o in raw_options)
    values = [o.value for o in options]
    require(len(set(values)) == len(values), where, "option values must be unique")
    require(NA not in values, where, f"{NA!r} is reserved for N/A: declare it with na:")
    return options


MAX_SCALE_POINTS = 101


def _parse_scale_range(raw: Any, where: str) -> tuple[Option, ...]:
    """`scale: {from: 1, to: 5, labels: [...], descriptions: [...]}`: the options from..to,
    each labelled by its place in `labels` (else by its number) and described by its place
    in `descriptions` (optional, "" for none)."""
    require(isinstance(raw, dict), where, "scale must be a mapping: {from: 1, to: 5, labels: [...]}")
    low, high = raw.get("from"), raw.get("to")
    require(
        all(isinstance(v, int) and not isinstance(v, bool) for v in (low, high)) and low < high,
        where,
        "scale needs whole numbers from and to, from below to",
    )
    n = high - low + 1
    require(n <= MAX_SCALE_POINTS, where, f"a scale has at most {MAX_SCALE_POINTS} points")
    labels, descriptions = raw.get("labels"), raw.get("descriptions", [])
    if labels is None:
        labels = [str(v) for v in range(low, high + 1)]
    for name, given in (("labels", labels), ("descriptions", descriptions)):
        require(
            isinstance(given, list) and all(isinstance(t, str) for t in given),
            where,
            f"scale {name} must be a list of text",
        )
    require(len(labels) == n, where, f"scale labels: {len(labels)} given for the {n} points {low}-{high}")
    require(
        len(descriptions) in (0, n),
        where,
        f"scale descriptions: {len(descriptions)} given for the {n} points {low}-{high}",
    )
    require(all(label.strip() for label in labels), where, "scale labels must not be empty")
    return tuple(
        Option(value=value, label=label, description=descriptions[i] if descriptions else "")
        for i, (value, label) in enumerate(zip(range(low, high + 1), labels, strict=True))
    )


def _parse_sub_question(raw: Any, where: str, index: int) -> SubQuestion:
    here = f"{where}, span question {index + 1}"
    require(isinstance(raw, dict), here, "must be a mapping")
    key = raw.get("key")
    require(isinstance(key, str) and key.isidentifier(), here, "key must be an identifier")
    kind = raw.get("kind")
    require(kind in ("choice", "text"), here, "kind must be choice or text")
    prompt = raw.get("prompt")
    require(isinstance(prompt, str) and prompt.strip() != "", here, "prompt is required")
    options = _parse_options(raw.get("options"), here, "choice") if kind == "choice" else ()
    return SubQuestion(key=key, kind=kind, prompt=prompt, required=bool(raw.get("required", False)), options=options)


def parse_rules(raw_rules: Any, questions: tuple[Question, ...]) -> tuple[Rule, ...]:
    if raw_rules is None:
        return ()
    require(isinstance(raw_rules, list), "rubric", "rules must be a list")
    by_key = {q.key: q for q in questions}
    rules = []
    for i, raw in enumerate(raw_rules, start=1):
        where = f"rule {i}"
        require(isinstance(raw, dict), where, "must be a mapping with when, then and message")
        message = raw.get("message")
        require(isinstance(message, str) and message.strip(), where, "message is required")
        parts = {}
        for part, allowed in (("when", ("includes", "in", "span_answer")), ("then", ("includes", "in", "not_in"))):
            cond = raw.get(part)
            require(isinstance(cond, dict) and "question" in cond, where, f"{part} must name a question")
            question = by_key.get(cond["question"])
            require(question is not None, where, f"{part} names unknown question {cond['question']!r}")
            tests = [k for k in cond if k != "question"]
            require(len(tests) == 1 and tests[0] in allowed, where, f"{part} takes one of {', '.join(allowed)}")
            test = tests[0]
            if test == "includes":
                require(
                    question.several_options and cond[test] in question.values,
                    where,
                    f"{part}: includes needs a checkbox option of {question.key!r}",
                )
            elif test in ("in", "not_in"):
                require(
                    isinstance(cond[test], list) and all(v in question.allowed_values for v in cond[test]),
                    where,
                    f"{part}: {test} needs a list of values of {question.key!r}",
                )
            else:
                require(
                    question.highlights and isinstance(cond[test], dict),
                    where,
                    f"{part}: span_answer needs a span question",
                )
            parts[part] = (question.key, {test: cond[test]})
        rules.append(Rule(parts["when"][0], parts["when"][1], parts["then"][0], parts["then"][1], message))
    return tuple(rules)
