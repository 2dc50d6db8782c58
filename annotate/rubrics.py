"""Rubric definitions: parsing a definition and validating answers against it.

Pure code (no ORM): a definition is a dict read from YAML/JSON (see
docs/rubric-format.md); `RubricDefinition.validate` turns raw answers into clean ones
or raises `AnswerValidationError` with one message per question key. Text that cannot
be stored (core.text_validation) is refused anywhere in the answers, keys included.
"""

from __future__ import annotations

import difflib
import hashlib
import json
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

from django.utils.translation import gettext_noop

from annotate.rubric_translations import TranslationProblem, parse_translations, translate
from core.exceptions import ApplicationError
from core.text_validation import MAX_RATIONALE_CHARS, find_problem

QUESTION_KINDS = ("scale", "checkboxes", "choice", "text", "per_finding", "per_claim", "span", "preference")
# A preference between the summaries of a comparison (docs/pairwise.md): the stored value
# names the preferred summary by its uuid (never by its side on screen, so raters who saw
# the two orders give comparable answers; the side is kept on the revision), or TIE.
TIE = "tie"
STRENGTHS = ("much", "slightly")
# The values a per-claim question's analysis reads as the rater's verdict on a claim
# (stats.claims); other options (e.g. "cannot tell") are kept but not counted.
CLAIM_SUPPORTED, CLAIM_NOT_SUPPORTED = "supported", "not_supported"
RATIONALE_MODES = ("none", "optional", "required")
SPAN_TARGETS = ("summary", "source", "linked", "compared")
NA_ANALYSIS = ("missing", "category")
NA = "na"
MAX_TEXT_LENGTH = MAX_RATIONALE_CHARS  # text answers, rationales, span rationales (docs/security.md)
MAX_SPANS = 200


class RubricDefinitionError(ApplicationError):
    """The rubric file itself is invalid."""


class AnswerValidationError(ApplicationError):
    """Answers do not satisfy the rubric; `errors` maps question key -> message. For a
    question asked per part (finding, claim), `parts` also lists its problems one by one:
    question key -> [(part id, message)], each message naming its part as the page does
    ("Result 2: an answer is required"); `errors` holds them joined."""

    def __init__(self, errors: dict[str, str], parts: dict[str, list[tuple[str, str]]] | None = None):
        self.errors = errors
        self.parts = parts or {}
        keys = ", ".join(sorted(errors))
        super().__init__(f"Some answers need attention: {keys}.", extra={"fields": errors})


@dataclass(frozen=True)
class Option:
    value: Any
    label: str
    description: str = ""


@dataclass(frozen=True)
class NotApplicable:
    """An optional N/A answer of a scale: its label, whether it needs a rationale,
    and how analysis treats it (as a missing rating or as a category of its own)."""

    label: str = "N/A"
    rationale_required: bool = True
    analysis: str = "missing"


@dataclass(frozen=True)
class SubQuestion:
    """A question asked about each highlighted span (choice or text)."""

    key: str
    kind: str
    prompt: str
    required: bool = False
    options: tuple[Option, ...] = ()

    @property
    def values(self) -> tuple[Any, ...]:
        return tuple(option.value for option in self.options)

    @property
    def choice(self) -> bool:
        """Answered by picking one option (else by free text)."""
        return self.kind == "choice"


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
    na: NotApplicable | None = None
    target: str = ""
    span_questions: tuple[SubQuestion, ...] = ()
    finding_label: str = ""
    claim_label: str = ""
    strength: bool = False
    criterion: str = ""

    @property
    def values(self) -> tuple[Any, ...]:
        return tuple(option.value for option in self.options)

    @property
    def preference(self) -> bool:
        """Asked of a comparison: which of its summaries is better (or a tie); the value is
        {"preferred": <summary uuid> or "tie", "strength": "much"/"slightly" when asked}."""
        return self.kind == "preference"

    @property
    def in_compared(self) -> bool:
        """A span question whose highlights fall in either summary of a comparison."""
        return self.kind == "span" and self.target == "compared"

    # What a question is, asked of the question: callers never compare `kind` strings.

    @property
    def is_scale(self) -> bool:
        """Scale-valued: a scale, or a scale asked once per finding."""
        return self.kind in ("scale", "per_finding")

    @property
    def plain_scale(self) -> bool:
        """One score on the scale for the whole summary (not per finding)."""
        return self.kind == "scale"

    @property
    def per_finding(self) -> bool:
        """Asked once per finding of the source; the answer maps finding ids to scores."""
        return self.kind == "per_finding"

    @property
    def per_claim(self) -> bool:
        """Asked once per claim of the summary (the claims a pipeline recorded, else its
        sentences); the answer maps claim ids to one option each, with a rationale each."""
        return self.kind == "per_claim"

    def answer_text(self, value: Any) -> str:
        """A stored answer as the rater reads it: "3 — Adequate", "All outcome measures
        mentioned", labels joined for checkboxes, the text itself. Empty when there is
        nothing to show in one line (unanswered, per-finding, per-claim, highlights)."""
        if value is None or self.per_finding or self.per_claim or self.highlights:
            return ""
        if self.preference:
            if value.get("preferred") == TIE:
                return "Tie"
            strength = f" ({value['strength']})" if value.get("strength") else ""
            return f"Summary {str(value.get('preferred'))[:8]} preferred{strength}"
        labels = {option.value: option.label for option in self.options}
        if self.is_scale:
            if self.na is not None and value == NA:
                return self.na.label
            label = labels.get(value, "")
            return f"{value} — {label}" if label and label != str(value) else str(value)
        if isinstance(value, list):
            return ", ".join(labels.get(v, str(v)) for v in value)
        return str(labels.get(value, value))

    def asked(self, *, has_findings: bool, has_claims: bool = True, comparison: bool | None = None) -> bool:
        """Whether the question is asked about a summary. A per-finding question is
        asked once per finding of the source, so about a source without findings it is
        not asked at all: not applicable, and a required one is satisfied by no answer
        (docs/rubric-format.md). Likewise a per-claim question about a summary without
        claims (an empty text). Every other question is always asked."""
        if comparison is not None and comparison != self.about_comparisons:
            # A rubric may mix both: preferences are asked of comparison items only, the
            # other questions of summaries rated one at a time only.
            return False
        if self.per_claim:
            return has_claims
        return has_findings or not self.per_finding

    @property
    def about_comparisons(self) -> bool:
        """Asked of comparison items (preferences, highlights in the compared summaries)."""
        return self.preference or self.in_compared

    @property
    def highlights(self) -> bool:
        """Answered by highlighting spans (stored as spans, not as ratings)."""
        return self.kind == "span"

    @property
    def several_options(self) -> bool:
        """Answered by ticking any number of options (the answer is a list)."""
        return self.kind == "checkboxes"

    @property
    def free_text(self) -> bool:
        return self.kind == "text"

    @property
    def counts_options(self) -> bool:
        """Answered with options whose counts summarise it (one choice or tickboxes)."""
        return self.kind in ("choice", "checkboxes")

    @property
    def comparable(self) -> bool:
        """Raters' answers can be compared for disagreement (free text cannot; per-claim
        answers are compared claim by claim)."""
        return not self.free_text

    @property
    def adjudicable(self) -> bool:
        """An admin can record one consensus answer for it: a single value (scale,
        choice, tickboxes or text). Per-finding and span answers are adjudicated by
        discussion notes and the re-rating round instead (docs/batches.md)."""
        return self.kind in ("scale", "choice", "checkboxes", "text", "preference")

    @property
    def has_sub_questions(self) -> bool:
        """Each highlighted span asks its own sub-questions."""
        return bool(self.span_questions)

    @property
    def template(self) -> str:
        """The rating page's template for this kind of question."""
        if self.in_compared:
            return "annotate/questions/compared_span.html"
        return f"annotate/questions/{self.kind}.html"

    @property
    def scale_bounds(self) -> tuple[int, int] | None:
        if not self.is_scale:
            return None
        return min(self.values), max(self.values)

    @property
    def allowed_values(self) -> tuple[Any, ...]:
        return self.values + ((NA,) if self.na else ())

    @property
    def na_code(self) -> int | None:
        """The number that stands for N/A in analysis when the scale counts N/A as a
        category (`na.analysis: category`): one past the top of the scale. None when N/A
        is a missing rating (or not offered)."""
        if self.is_scale and self.na is not None and self.na.analysis == "category":
            return max(self.values) + 1
        return None

    @property
    def analysis_scale(self) -> tuple[Any, ...]:
        """The scale agreement is computed over: the values, and N/A's code where N/A
        is a category."""
        code = self.na_code
        return self.values if code is None else (*self.values, code)


@dataclass(frozen=True)
class CleanAnswers:
    """Validated answers: question key -> value, and question key -> rationale text."""

    values: dict[str, Any] = field(default_factory=dict)
    rationales: dict[str, str] = field(default_factory=dict)


def _require(condition: bool, where: str, message: str) -> None:
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
    if "scale" in raw:
        _require(kind in ("scale", "per_finding"), where, "only scale questions take scale: {from, to, labels}")
        _require("options" not in raw, where, "give either options or scale, not both")
        options = _parse_scale_range(raw["scale"], where)
    elif kind in ("scale", "checkboxes", "choice", "per_finding", "per_claim"):
        parsed_as = {"per_finding": "scale", "per_claim": "choice"}.get(kind, kind)
        options = _parse_options(raw.get("options"), where, parsed_as)
        if kind == "per_claim":
            _require(
                {CLAIM_SUPPORTED, CLAIM_NOT_SUPPORTED} <= {o.value for o in options},
                where,
                f"a per-claim question needs the options {CLAIM_SUPPORTED!r} and {CLAIM_NOT_SUPPORTED!r}",
            )
    if kind in ("scale", "per_finding"):
        values = [o.value for o in options]
        _require(values == sorted(values), where, "scale options must be in increasing order")
    if kind not in ("scale", "checkboxes", "choice", "per_finding", "per_claim"):
        _require("options" not in raw, where, f"{kind} questions take no options")
    na = None
    if "na" in raw and raw["na"] not in (None, False):
        _require(kind in ("scale", "per_finding"), where, "only scale questions can offer N/A")
        raw_na = raw["na"] if isinstance(raw["na"], dict) else {}
        analysis = raw_na.get("analysis", "missing")
        _require(analysis in NA_ANALYSIS, where, f"na.analysis must be one of {', '.join(NA_ANALYSIS)}")
        na = NotApplicable(
            label=str(raw_na.get("label", "N/A")),
            rationale_required=bool(raw_na.get("rationale_required", True)),
            analysis=analysis,
        )
        _require(
            rationale != "none" or not na.rationale_required,
            where,
            "an N/A that requires a rationale needs rationale: optional or required",
        )
    target, span_questions = "", ()
    if kind == "span":
        target = raw.get("target", "summary")
        _require(target in SPAN_TARGETS, where, f"target must be one of {', '.join(SPAN_TARGETS)}")
        span_questions = tuple(_parse_sub_question(q, where, i) for i, q in enumerate(raw.get("span_questions", [])))
        keys = [q.key for q in span_questions]
        _require(len(set(keys)) == len(keys), where, "span question keys must be unique")
    else:
        _require("span_questions" not in raw, where, "only span questions take span_questions")
    strength = raw.get("strength", False)
    _require(isinstance(strength, bool), where, "strength must be true or false")
    _require(not strength or kind == "preference", where, "only preference questions take strength")
    criterion = raw.get("criterion", "")
    _require(isinstance(criterion, str), where, "criterion must be text")
    _require(not criterion or kind == "preference", where, "only preference questions name a criterion")
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
        na=na,
        target=target,
        span_questions=span_questions,
        finding_label=str(raw.get("finding_label", "")),
        claim_label=str(raw.get("claim_label", "")),
        strength=strength,
        criterion=criterion,
    )


def _parse_options(raw_options: Any, where: str, kind: str) -> tuple[Option, ...]:
    _require(isinstance(raw_options, list) and len(raw_options) >= 2, where, "needs at least two options")
    options = tuple(_parse_option(o, where, kind) for o in raw_options)
    values = [o.value for o in options]
    _require(len(set(values)) == len(values), where, "option values must be unique")
    _require(NA not in values, where, f"{NA!r} is reserved for N/A: declare it with na:")
    return options


MAX_SCALE_POINTS = 101


def _parse_scale_range(raw: Any, where: str) -> tuple[Option, ...]:
    """`scale: {from: 1, to: 5, labels: [...], descriptions: [...]}`: the options from..to,
    each labelled by its place in `labels` (else by its number) and described by its place
    in `descriptions` (optional, "" for none)."""
    _require(isinstance(raw, dict), where, "scale must be a mapping: {from: 1, to: 5, labels: [...]}")
    low, high = raw.get("from"), raw.get("to")
    _require(
        all(isinstance(v, int) and not isinstance(v, bool) for v in (low, high)) and low < high,
        where,
        "scale needs whole numbers from and to, from below to",
    )
    n = high - low + 1
    _require(n <= MAX_SCALE_POINTS, where, f"a scale has at most {MAX_SCALE_POINTS} points")
    labels, descriptions = raw.get("labels"), raw.get("descriptions", [])
    if labels is None:
        labels = [str(v) for v in range(low, high + 1)]
    for name, given in (("labels", labels), ("descriptions", descriptions)):
        _require(
            isinstance(given, list) and all(isinstance(t, str) for t in given),
            where,
            f"scale {name} must be a list of text",
        )
    _require(len(labels) == n, where, f"scale labels: {len(labels)} given for the {n} points {low}-{high}")
    _require(
        len(descriptions) in (0, n),
        where,
        f"scale descriptions: {len(descriptions)} given for the {n} points {low}-{high}",
    )
    _require(all(label.strip() for label in labels), where, "scale labels must not be empty")
    return tuple(
        Option(value=value, label=label, description=descriptions[i] if descriptions else "")
        for i, (value, label) in enumerate(zip(range(low, high + 1), labels, strict=True))
    )


def _parse_sub_question(raw: Any, where: str, index: int) -> SubQuestion:
    here = f"{where}, span question {index + 1}"
    _require(isinstance(raw, dict), here, "must be a mapping")
    key = raw.get("key")
    _require(isinstance(key, str) and key.isidentifier(), here, "key must be an identifier")
    kind = raw.get("kind")
    _require(kind in ("choice", "text"), here, "kind must be choice or text")
    prompt = raw.get("prompt")
    _require(isinstance(prompt, str) and prompt.strip() != "", here, "prompt is required")
    options = _parse_options(raw.get("options"), here, "choice") if kind == "choice" else ()
    return SubQuestion(key=key, kind=kind, prompt=prompt, required=bool(raw.get("required", False)), options=options)


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
        rules = _parse_rules(raw.get("rules"), questions)
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
        if not isinstance(answers, dict):
            raise AnswerValidationError({"answers": "must be an object mapping question keys to answers"})
        rationales = {} if rationales is None else rationales
        if not isinstance(rationales, dict):
            raise AnswerValidationError({"rationales": "must be an object mapping question keys to text"})
        known = {q.key for q in self.questions}
        _check_answer_text(answers, rationales, known)
        errors: dict[str, str] = {}
        for key in sorted(set(answers) - known):
            errors[str(key)] = "is not a question of this rubric"
        for key in sorted(set(rationales) - known):
            errors[str(key)] = "is not a question of this rubric"

        values: dict[str, Any] = {}
        clean_rationales: dict[str, Any] = {}
        parts: dict[str, list[tuple[str, str]]] = {}
        for q in self.questions:
            final_here = final and (only is None or q.key in only)
            try:
                if q.per_finding:
                    value, rationale = _clean_per_finding(
                        q, answers.get(q.key), rationales.get(q.key), final_here, context
                    )
                elif q.per_claim:
                    value, rationale = _clean_per_claim(
                        q, answers.get(q.key), rationales.get(q.key), final_here, context
                    )
                elif q.highlights:
                    if rationales.get(q.key):
                        raise ValueError("give each span's rationale inside the span")
                    value, rationale = _clean_spans(q, answers.get(q.key), final_here, context), None
                elif q.preference:
                    value = _clean_preference(q, answers.get(q.key), context)
                    rationale = _clean_rationale(q, value, rationales.get(q.key), final_here)
                else:
                    value = self._clean_value(q, answers.get(q.key))
                    rationale = _clean_rationale(q, value, rationales.get(q.key), final_here)
            except PartProblems as exc:
                errors[q.key], parts[q.key] = str(exc), exc.problems
                continue
            except ValueError as exc:
                errors[q.key] = str(exc)
                continue
            asked = q.asked(
                has_findings=bool(context.finding_ids),
                has_claims=bool(context.claim_ids),
                comparison=bool(context.compared),
            )
            if value is not None and not asked and q.about_comparisons != bool(context.compared):
                errors[q.key] = "is asked of comparisons only" if q.about_comparisons else "is not asked of comparisons"
                continue
            if value is None and final_here and q.required and asked:
                # Marked for the catalogue: the rating page shows it in the page's language.
                errors[q.key] = gettext_noop("an answer is required")
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
                converted[q.key] = {part: _number_from_text(v) for part, v in raw.items()}
            else:
                converted[q.key] = _number_from_text(raw)
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

    @staticmethod
    def _clean_value(q: Question, raw: Any) -> Any:
        """Return the clean value, None for "not answered", or raise ValueError."""
        if raw is None or raw == "" or (q.kind == "checkboxes" and raw == []):
            return None
        if q.kind == "scale":
            return _clean_scale_value(q, raw)
        if q.kind == "choice":
            return _clean_choice_value(q, raw)
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


def _check_answer_text(answers: dict, rationales: dict, known: set[str]) -> None:
    """Refuse text that cannot be stored (a lone surrogate, a NUL) anywhere in the answers
    or rationales, keys included, before anything else reads them: later messages quote
    what was given. The error sits on the question, or on answers/rationales for a key."""
    for name, given in (("answers", answers), ("rationales", rationales)):
        found = find_problem(given)
        if found is None:
            continue
        where, problem = found
        key = where.split(".", 1)[0].split("[", 1)[0]
        if key in known:
            raise AnswerValidationError({key: problem if where == key else f"{where}: {problem}"})
        raise AnswerValidationError({name: problem})


@dataclass(frozen=True)
class AnswerContext:
    """What answers are checked against: the texts spans point into, and the ids of
    the source's findings (for per-finding questions) and of the summary's claims (for
    per-claim questions: annotate.selectors.claims.claim_units)."""

    summary_text: str = ""
    source_text: str = ""
    finding_ids: tuple[str, ...] = ()
    claim_ids: tuple[str, ...] = ()
    # A comparison's summaries: (uuid, text) of each, in the comparison's own order.
    compared: tuple[tuple[str, str], ...] = ()


def _clean_preference(q: Question, raw: Any, context: AnswerContext) -> dict | None:
    """{"preferred": uuid or "tie", "strength": ...}; a bare string is the preferred one."""
    if raw is None or raw == "" or raw == {}:
        return None
    if isinstance(raw, str):
        raw = {"preferred": raw}
    if not isinstance(raw, dict):
        raise ValueError("must be an object with preferred (a summary of the comparison, or tie) and strength")
    extra = sorted(set(raw) - {"preferred", "strength"})
    if extra:
        raise ValueError(f"unknown field {extra[0]}")
    preferred = raw.get("preferred")
    if preferred in (None, ""):
        if raw.get("strength"):
            # A draft may hold a strength typed before the choice; it has no meaning alone.
            return None
        return None
    ids = [uuid for uuid, _text in context.compared]
    if preferred != TIE and preferred not in ids:
        raise ValueError("preferred must be one of the compared summaries or tie")
    clean: dict[str, Any] = {"preferred": preferred}
    strength = raw.get("strength")
    if strength not in (None, ""):
        if not q.strength:
            raise ValueError("this question takes no strength")
        if preferred == TIE:
            raise ValueError("a tie has no strength")
        if strength not in STRENGTHS:
            raise ValueError(f"strength must be one of {', '.join(STRENGTHS)}")
        clean["strength"] = strength
    return clean


def _clean_scale_value(q: Question, raw: Any) -> Any:
    if q.na and raw == NA:
        return NA
    allowed = ", ".join(str(v) for v in q.allowed_values)
    if isinstance(raw, str):
        # A JSON client sends the number, not its text: "3" is refused, naming the question
        # (the rating page's form posts text; annotate.forms turns it into numbers first).
        raise ValueError(f"must be a number, one of {allowed} (not the text {raw[:20]!r})")
    if not isinstance(raw, int) or isinstance(raw, bool) or raw not in q.values:
        raise ValueError(f"must be one of {allowed}")
    return raw


def _number_from_text(raw: Any) -> Any:
    if isinstance(raw, str) and raw.strip().lstrip("-").isdigit() and len(raw.strip()) < 12:
        return int(raw)
    return raw


def _clean_text(raw: Any, what: str) -> str:
    if raw is None:
        return ""
    if not isinstance(raw, str):
        raise ValueError(f"{what} must be text")
    text = raw.strip()
    if len(text) > MAX_TEXT_LENGTH:
        raise ValueError(f"{what} is longer than {MAX_TEXT_LENGTH} characters")
    return text


def _rationale_needed(q: Question, value: Any) -> bool:
    return q.rationale == "required" or (value == NA and q.na is not None and q.na.rationale_required)


def _clean_rationale(q: Question, value: Any, raw: Any, final: bool, prefix: str = "") -> str:
    text = _clean_text(raw, f"{prefix}the rationale")
    if text and q.rationale == "none" and value != NA:
        raise ValueError(f"{prefix}this question takes no rationale")
    if text and value is None and final:
        # A draft keeps a rationale typed before its answer; only a submit needs both.
        raise ValueError(f"{prefix}a rationale needs an answer to go with it")
    if final and value is not None and not text and _rationale_needed(q, value):
        raise ValueError(f"{prefix}a rationale is required" + (" for N/A" if value == NA else ""))
    return text


def _clean_per_finding(q: Question, raw: Any, raw_rationales: Any, final: bool, context: AnswerContext):
    return _clean_per_part(q, raw, raw_rationales, final, context.finding_ids, "finding", q.finding_label or "Finding")


def _clean_per_claim(q: Question, raw: Any, raw_rationales: Any, final: bool, context: AnswerContext):
    return _clean_per_part(q, raw, raw_rationales, final, context.claim_ids, "claim", q.claim_label or "Claim")


def _clean_choice_value(q: Question, raw: Any) -> Any:
    if raw not in q.values:
        raise ValueError(f"must be one of {', '.join(q.values)}")
    return raw


def _clean_per_part(
    q: Question, raw: Any, raw_rationales: Any, final: bool, ids: tuple[str, ...], part: str, label: str
):
    """A question asked once per part (a finding of the source, a claim of the summary):
    (values by part id, rationales by part id), each None when empty."""
    raw = raw or {}
    raw_rationales = raw_rationales or {}
    if not isinstance(raw, dict) or not isinstance(raw_rationales, dict):
        raise ValueError(f"must be an object mapping {part} ids to answers")
    unknown = sorted(str(k) for k in set(raw) | set(raw_rationales) if k not in ids)
    if unknown:
        raise ValueError(f"unknown {part}(s): {', '.join(unknown)}")
    clean_value = _clean_scale_value if q.is_scale else _clean_choice_value
    values: dict[str, Any] = {}
    rationales: dict[str, str] = {}
    problems: list[tuple[str, str]] = []
    # Every part's problem at once: fixing "Result 1" must not reveal "Result 2" only then.
    for number, finding in enumerate(ids, start=1):
        prefix = f"{label} {number}: "  # the page's words: "Result 2", "Claim 3"
        answer = raw.get(finding)
        try:
            value = None if answer in (None, "") else clean_value(q, answer)
        except ValueError as exc:
            problems.append((finding, f"{prefix}{exc}"))
            continue
        if value is None and final and q.required:
            problems.append((finding, f"{prefix}an answer is required"))
            continue
        try:
            text = _clean_rationale(q, value, raw_rationales.get(finding), final, prefix)
        except ValueError as exc:
            problems.append((finding, str(exc)))
            continue
        if value is not None:
            values[finding] = value
        if text:
            rationales[finding] = text
    if problems:
        raise PartProblems(problems)
    return (values or None), (rationales or None)


class PartProblems(ValueError):
    """The problems of a question asked per part, [(part id, message)], all at once."""

    def __init__(self, problems: list[tuple[str, str]]):
        self.problems = problems
        super().__init__("; ".join(message for _, message in problems))


def _clean_offsets(raw: Any, text: str, where: str) -> tuple[int, int, str]:
    if not isinstance(raw, dict):
        raise ValueError(f"{where} must be an object with start, end and text")
    start, end, quoted = raw.get("start"), raw.get("end"), raw.get("text")
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in (start, end)):
        raise ValueError(f"{where}: start and end must be whole numbers")
    if not 0 <= start < end <= len(text):
        raise ValueError(f"{where}: offsets {start}-{end} are outside the text (0-{len(text)})")
    if text[start:end] != quoted:
        raise ValueError(f"{where}: the quoted text does not match the text at {start}-{end}")
    return start, end, quoted


def _clean_spans(q: Question, raw: Any, final: bool, context: AnswerContext) -> list[dict] | None:
    if raw is None or raw == []:
        return None
    if not isinstance(raw, list):
        raise ValueError("must be a list of spans")
    if len(raw) > MAX_SPANS:
        raise ValueError(f"at most {MAX_SPANS} spans")
    texts = {"summary": context.summary_text, "source": context.source_text}
    compared = dict(context.compared)
    clean = []
    for number, item in enumerate(raw, start=1):
        where = f"span {number}"
        if not isinstance(item, dict):
            raise ValueError(f"{where} must be an object")
        extra = sorted(set(item) - {"target", "start", "end", "text", "answers", "rationale", "link", "summary"})
        if extra:
            raise ValueError(f"{where}: unknown field {extra[0]}")
        target = "summary" if q.target in ("linked", "compared") else q.target
        if item.get("target", target) != target:
            raise ValueError(f"{where}: target must be {target}")
        if q.in_compared:
            # Offsets into one of the compared summaries, named by its uuid.
            if item.get("summary") not in compared:
                raise ValueError(f"{where}: summary must be one of the compared summaries")
            start, end, quoted = _clean_offsets(item, compared[item["summary"]], where)
        elif "summary" in item:
            raise ValueError(f"{where}: only spans in compared summaries name their summary")
        else:
            start, end, quoted = _clean_offsets(item, texts[target], where)
        span = {"target": target, "start": start, "end": end, "text": quoted}
        if q.in_compared:
            span["summary"] = item["summary"]
        if q.target == "linked":
            if final and "link" not in item:
                raise ValueError(f"{where}: a linked span needs its source part")
            if "link" in item:
                ls, le, lt = _clean_offsets(item["link"], texts["source"], f"{where} (source part)")
                span["link"] = {"target": "source", "start": ls, "end": le, "text": lt}
        elif "link" in item:
            raise ValueError(f"{where}: only linked spans take a link")
        sub_raw = item.get("answers") or {}
        if not isinstance(sub_raw, dict):
            raise ValueError(f"{where}: answers must be an object")
        known = {sq.key for sq in q.span_questions}
        unknown = sorted(set(sub_raw) - known)
        if unknown:
            raise ValueError(f"{where}: unknown span question {unknown[0]}")
        answers = {}
        for sq in q.span_questions:
            value = sub_raw.get(sq.key)
            if value in (None, ""):
                if final and sq.required:
                    raise ValueError(f"{where}: {sq.prompt} needs an answer")
                continue
            if sq.choice and value not in sq.values:
                raise ValueError(f"{where}: {sq.key} must be one of {', '.join(sq.values)}")
            answers[sq.key] = value if sq.choice else _clean_text(value, f"{where}: {sq.key}")
        span["answers"] = answers
        rationale = _clean_text(item.get("rationale"), f"{where}: the rationale")
        if rationale and q.rationale == "none":
            raise ValueError(f"{where}: this question takes no rationale")
        if final and q.rationale == "required" and not rationale:
            raise ValueError(f"{where}: a rationale is required")
        span["rationale"] = rationale
        clean.append(span)
    return clean


@dataclass(frozen=True)
class Rule:
    """A consistency rule across questions: when `when` holds, `then` must hold.

    Conditions: `includes: V` (a checkbox ticked), `in: [..]` (a scale/choice value),
    `span_answer: {sub: value}` (some span has that sub-answer). Requirements:
    `includes: V`, `in: [..]`, `not_in: [..]`.
    """

    when_question: str
    when: dict
    then_question: str
    then: dict
    message: str

    @staticmethod
    def _holds(value: Any, condition: dict) -> bool:
        if "includes" in condition:
            return isinstance(value, list) and condition["includes"] in value
        if "in" in condition:
            return value in condition["in"]
        if "not_in" in condition:
            return value not in condition["not_in"]
        if "span_answer" in condition:
            wanted = condition["span_answer"]
            return any(all(s["answers"].get(k) == v for k, v in wanted.items()) for s in value or [])
        raise ValueError(condition)

    def applies(self, values: dict) -> bool:
        return self._holds(values.get(self.when_question), self.when)

    def satisfied(self, values: dict) -> bool:
        return self._holds(values.get(self.then_question), self.then)


def _parse_rules(raw_rules: Any, questions: tuple[Question, ...]) -> tuple[Rule, ...]:
    if raw_rules is None:
        return ()
    _require(isinstance(raw_rules, list), "rubric", "rules must be a list")
    by_key = {q.key: q for q in questions}
    rules = []
    for i, raw in enumerate(raw_rules, start=1):
        where = f"rule {i}"
        _require(isinstance(raw, dict), where, "must be a mapping with when, then and message")
        message = raw.get("message")
        _require(isinstance(message, str) and message.strip(), where, "message is required")
        parts = {}
        for part, allowed in (("when", ("includes", "in", "span_answer")), ("then", ("includes", "in", "not_in"))):
            cond = raw.get(part)
            _require(isinstance(cond, dict) and "question" in cond, where, f"{part} must name a question")
            question = by_key.get(cond["question"])
            _require(question is not None, where, f"{part} names unknown question {cond['question']!r}")
            tests = [k for k in cond if k != "question"]
            _require(len(tests) == 1 and tests[0] in allowed, where, f"{part} takes one of {', '.join(allowed)}")
            test = tests[0]
            if test == "includes":
                _require(
                    question.several_options and cond[test] in question.values,
                    where,
                    f"{part}: includes needs a checkbox option of {question.key!r}",
                )
            elif test in ("in", "not_in"):
                _require(
                    isinstance(cond[test], list) and all(v in question.allowed_values for v in cond[test]),
                    where,
                    f"{part}: {test} needs a list of values of {question.key!r}",
                )
            else:
                _require(
                    question.highlights and isinstance(cond[test], dict),
                    where,
                    f"{part}: span_answer needs a span question",
                )
            parts[part] = (question.key, {test: cond[test]})
        rules.append(Rule(parts["when"][0], parts["when"][1], parts["then"][0], parts["then"][1], message))
    return tuple(rules)
