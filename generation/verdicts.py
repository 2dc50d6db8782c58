"""Reading verdicts out of LLM answers: JSON when the model kept to it, line by
line when it did not. A statement never gets a verdict from a word elsewhere in the
answer (the LitSumm authors' code failed a summary when "False" appeared anywhere).
"""

from __future__ import annotations

import bisect
import itertools
import math
import re
from dataclasses import dataclass

from generation.answer_text import as_text, parse_json_object

SUPPORTED = "supported"
NOT_SUPPORTED = "not_supported"
UNVERIFIED = "unverified"

_NEGATIVE = re.compile(r"\b(not\s+supported|unsupported|false|no|incorrect|inaccurate)\b", re.IGNORECASE)
_POSITIVE = re.compile(r"\b(supported|true|yes|correct|accurate)\b", re.IGNORECASE)
_NUMBERED = re.compile(r"^\W*(?:statement|claim|bullet)?\s*#?(\d+)\s*[).:\-–—]?\s*(.*)$", re.IGNORECASE)
_SUPPORTED_FIELD = re.compile(r"supported\W{0,4}(yes|no|true|false)\b", re.IGNORECASE)


@dataclass(frozen=True)
class Verdict:
    verdict: str
    explanation: str
    probability: float | None = None


def _word_verdict(value) -> str:
    """A verdict from a JSON value: true/false, "yes"/"no", "supported"/"not supported"."""
    if isinstance(value, bool):
        return SUPPORTED if value else NOT_SUPPORTED
    if isinstance(value, str):
        text = re.sub(r"[_\-]+", " ", value.strip())
        if _NEGATIVE.search(text):
            return NOT_SUPPORTED
        if _POSITIVE.search(text):
            return SUPPORTED
    return UNVERIFIED


def parse_statement_verdicts(text: str, count: int) -> list[Verdict]:
    """Verdicts for statements 1..count from a self-consistency answer."""
    found: dict[int, Verdict] = {}
    data = parse_json_object(text)
    items = data.get("verdicts") if isinstance(data, dict) else None
    if isinstance(items, list):
        for position, item in enumerate(items, start=1):
            if not isinstance(item, dict):
                continue
            number = item.get("statement", item.get("index", item.get("id", position)))
            try:
                number = int(number)
            except (TypeError, ValueError, OverflowError):  # a list, null, "one", Infinity, NaN
                number = position
            raw = item.get("supported", item.get("verdict"))
            found[number] = Verdict(_word_verdict(raw), as_text(item.get("explanation")))
    else:
        for line in text.splitlines():
            match = _NUMBERED.match(line.strip())
            if not match:
                continue
            number, rest = int(match.group(1)), match.group(2)
            verdict = _line_verdict(rest)
            if verdict != UNVERIFIED and number not in found:
                found[number] = Verdict(verdict, rest.strip())
    return [
        found.get(i, Verdict(UNVERIFIED, "The checker gave no verdict for this statement."))
        for i in range(1, count + 1)
    ]


# A verdict phrase standing on its own: followed by the end of the line or by
# punctuation, never by more words ("No deaths occurred" is a statement, "No." a verdict).
_VERDICT_WORDS = r"(not[\s_-]+supported|unsupported|supported|true|false|yes|no|correct|incorrect|accurate|inaccurate)"
_VERDICT_PHRASE = _VERDICT_WORDS + r"(?=\s*(?:$|[-–—:.,;!?()\[\]\"'*]))"
_VERDICT_HEAD = re.compile(r"[\s\"'*(\[]*" + _VERDICT_PHRASE, re.IGNORECASE)
# A verdict closing the line after a break: "No deaths occurred. True.", "[...] False".
_VERDICT_TAIL = re.compile(r"(?:^|[.;:!?)\]|>→*–—-])[\s\"'*(\[]*" + _VERDICT_WORDS + r"[\s\"'*.!)\]]*$", re.IGNORECASE)
# An explicit label: "Verdict: True", "supported: no", "Answer = not supported".
_VERDICT_LABEL = re.compile(
    r"\b(?<!not )(?<!not_)(?:verdict|supported|answer|judg(?:e)?ment)\W{0,3}[:=]\s*" + _VERDICT_PHRASE,
    re.IGNORECASE,
)
# Where a line echoing the statement hands over to the verdict.
_SEPARATOR = re.compile(r":|\s[-–—]\s|[–—]")


def _phrase_verdict(phrase: str) -> str:
    return _word_verdict(re.sub(r"[\s_-]+", " ", phrase))


def _line_verdict(rest: str) -> str:
    """The verdict a sloppy line gives for its statement.

    Models write "True - the context says so" as often as they echo the statement
    first ("No deaths occurred: True"), and a statement may itself hold "no", "not"
    or "false". So, in order: an explicit label ("Verdict: ...", "Supported: ...");
    else a verdict that closes the line on its own ("... occurred. True."); else a
    verdict standing at the start of the text after a separator (':', ' - ', '—'),
    trying the last separator first and the line's own start last; else the last
    verdict word on the line.
    """
    labels = list(_VERDICT_LABEL.finditer(rest))
    if labels:
        return _phrase_verdict(labels[-1].group(1))
    tail = _VERDICT_TAIL.search(rest.rstrip())
    if tail:
        return _phrase_verdict(tail.group(1))
    starts = [0, *(m.end() for m in _SEPARATOR.finditer(rest))]
    for start in reversed(starts):
        head = _VERDICT_HEAD.match(rest, start)
        if head:
            return _phrase_verdict(head.group(1))
    words = [*_NEGATIVE.finditer(rest), *_POSITIVE.finditer(rest)]
    if not words:
        return UNVERIFIED
    # The last one by where it ends; "not supported" wins over its own "supported".
    last = max(words, key=lambda m: (m.end(), m.end() - m.start()))
    return _phrase_verdict(last.group(0))


def parse_claim_verdict(text: str) -> tuple[str, str]:
    """(verdict, critique) from a factored verification answer."""
    data = parse_json_object(text)
    if isinstance(data, dict) and "supported" in data:
        critique = as_text(data.get("critique"))
        revised = as_text(data.get("revised_claim"))
        if revised and revised.upper() != "N/A":
            critique = f"{critique} Suggested revision: {revised}".strip()
        return _word_verdict(data["supported"]), critique
    matches = list(_SUPPORTED_FIELD.finditer(text))
    if matches:
        # The last "Supported: yes/no" is the conclusion; earlier ones may be quoted.
        return _word_verdict(matches[-1].group(1)), text.strip()
    return UNVERIFIED, text.strip()


# The value of the "supported" field: JSON first (`"supported": "yes"`, `"supported": true`);
# for a model that ignored the JSON instruction, the same loose form parse_claim_verdict reads.
_SUPPORTED_JSON_VALUE = re.compile(r'"supported"\s*:\s*"?(yes|no|true|false)\b', re.IGNORECASE)
_ANSWER_TOKEN = re.compile(r"\W*(yes|no|true|false)\W*", re.IGNORECASE)
_YES = {"yes", "true"}


def _answer(token: str) -> str | None:
    """The answer a token reads: "yes" for yes/true, "no" for no/false, else None."""
    match = _ANSWER_TOKEN.fullmatch(token.strip())
    if not match:
        return None
    return "yes" if match.group(1).lower() in _YES else "no"


def _verdict_token(logprobs: list[dict]) -> dict | None:
    """The token that carries the value of the "supported" field.

    The token texts are joined, the field's value is located in the joined text, and
    the token covering its first character is the one whose alternatives hold P(yes).
    A "no" in the critique or the quotes is never read as the verdict.
    """
    tokens = [item["token"] for item in logprobs]
    text = "".join(tokens)
    starts = [0, *itertools.accumulate(len(token) for token in tokens)][:-1]
    values = list(_SUPPORTED_JSON_VALUE.finditer(text)) or list(_SUPPORTED_FIELD.finditer(text))
    if not values:
        return None
    offset = values[-1].start(1)
    index = bisect.bisect_right(starts, offset) - 1
    item = logprobs[index]
    # The value must be that token's own answer: a value split over several tokens
    # ("tr" + "ue") has no yes/no alternatives to compare.
    return item if _answer(item["token"]) is not None else None


def yes_probability(logprobs: list[dict] | None, verdict: str) -> float | None:
    """P(supported) for a yes/no answer.

    From the logprobs of the token that carries the "supported" field's value,
    normalised over the yes/true and no/false alternatives among its top logprobs
    (Factored Verification's claim probability); otherwise, when the endpoint gave
    no logprobs or they do not cover that value, 1 or 0 from the verdict (the
    paper's fallback for models without token probabilities). None for an
    unverified claim.
    """
    item = _verdict_token(logprobs) if logprobs else None
    if item is not None:
        alternatives = {token: logprob for token, logprob in item.get("top") or []}
        # The sampled token is not always among the top alternatives.
        alternatives.setdefault(item["token"], item["logprob"])
        mass = {"yes": 0.0, "no": 0.0}
        for token, logprob in alternatives.items():
            answer = _answer(token)
            if answer is not None:
                mass[answer] += math.exp(logprob)
        if mass["yes"] + mass["no"] > 0:  # a logprob of -inf (or -9999) underflows to 0
            return mass["yes"] / (mass["yes"] + mass["no"])
    if verdict == SUPPORTED:
        return 1.0
    if verdict == NOT_SUPPORTED:
        return 0.0
    return None
