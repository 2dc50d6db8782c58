"""Reading verdicts out of LLM answers: JSON when the model kept to it, line by
line when it did not. A statement never gets a verdict from a word elsewhere in the
answer (the LitSumm authors' code failed a summary when "False" appeared anywhere).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from generation.llm import parse_json_object

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
            except (TypeError, ValueError):
                number = position
            raw = item.get("supported", item.get("verdict"))
            found[number] = Verdict(_word_verdict(raw), str(item.get("explanation", "")).strip())
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


def _line_verdict(rest: str) -> str:
    """The verdict a sloppy line states first: "True - ...", "Not supported: ..."."""
    negative, positive = _NEGATIVE.search(rest), _POSITIVE.search(rest)
    if negative and (not positive or negative.start() <= positive.start()):
        return NOT_SUPPORTED
    if positive:
        return SUPPORTED
    return UNVERIFIED


def parse_claim_verdict(text: str) -> tuple[str, str]:
    """(verdict, critique) from a factored verification answer."""
    data = parse_json_object(text)
    if isinstance(data, dict) and "supported" in data:
        critique = str(data.get("critique", "")).strip()
        revised = str(data.get("revised_claim", "")).strip()
        if revised and revised.upper() != "N/A":
            critique = f"{critique} Suggested revision: {revised}".strip()
        return _word_verdict(data["supported"]), critique
    matches = list(_SUPPORTED_FIELD.finditer(text))
    if matches:
        # The last "Supported: yes/no" is the conclusion; earlier ones may be quoted.
        return _word_verdict(matches[-1].group(1)), text.strip()
    return UNVERIFIED, text.strip()


def _normal(token: str) -> str:
    return token.strip().strip("\"':,.").lower()


def yes_probability(logprobs: list[dict] | None, verdict: str) -> float | None:
    """P(supported) for a yes/no answer.

    From the logprobs of the last yes/no token (normalised over the yes and no
    alternatives among its top logprobs) when the endpoint returned them;
    otherwise 1 or 0 from the verdict (Factored Verification's fallback for models
    without token probabilities); None for an unverified claim.
    """
    if logprobs:
        for item in reversed(logprobs):
            if _normal(item["token"]) not in {"yes", "no"}:
                continue
            p_yes = p_no = 0.0
            for token, logprob in item.get("top") or [[item["token"], item["logprob"]]]:
                if _normal(token) == "yes":
                    p_yes += math.exp(logprob)
                elif _normal(token) == "no":
                    p_no += math.exp(logprob)
            if p_yes + p_no > 0:
                return p_yes / (p_yes + p_no)
            chosen = math.exp(item["logprob"])
            return chosen if _normal(item["token"]) == "yes" else 1 - chosen
    if verdict == SUPPORTED:
        return 1.0
    if verdict == NOT_SUPPORTED:
        return 0.0
    return None
