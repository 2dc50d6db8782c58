"""What a rubric is made of: its questions, options, rules and the errors it raises, and
what answers are checked against (`AnswerContext`) and become (`CleanAnswers`). Ask a
question what it is (`question.adjudicable`, `question.highlights`, ...): code outside this
package never compares `kind` strings."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.utils.translation import gettext

from core.exceptions import ApplicationError
from core.text_validation import MAX_RATIONALE_CHARS

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
        super().__init__(gettext("Some answers need attention: %(keys)s.") % {"keys": keys}, extra={"fields": errors})


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
