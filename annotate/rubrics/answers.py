"""Cleaning one question's answer: a value per kind, rationales, spans (offsets counted in
code points against the texts in `AnswerContext`), per-finding and per-claim parts; a
problem is a ValueError (or `PartProblems`, one per part) that validate() reports on the
question. Also the stored form of a per-claim answer (one rating per question), read and
written here."""

from __future__ import annotations

from typing import Any

from django.utils.translation import gettext

from annotate.rubrics.questions import (
    MAX_SPANS,
    MAX_TEXT_LENGTH,
    NA,
    STRENGTHS,
    TIE,
    AnswerContext,
    AnswerValidationError,
    Question,
)
from core.text_validation import find_problem


def check_answer_text(answers: dict, rationales: dict, known: set[str]) -> None:
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


def clean_preference(q: Question, raw: Any, context: AnswerContext) -> dict | None:
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


def clean_scale_value(q: Question, raw: Any) -> Any:
    if q.na and raw == NA:
        return NA
    allowed = ", ".join(str(v) for v in q.allowed_values)
    if isinstance(raw, str):
        # A JSON client sends the number, not its text: "3" is refused, naming the question
        # (the rating page's form posts text; annotate.forms turns it into numbers first).
        raise ValueError(
            gettext("must be a number, one of %(allowed)s (not the text %(text)s)")
            % {"allowed": allowed, "text": repr(raw[:20])}
        )
    if not isinstance(raw, int) or isinstance(raw, bool) or raw not in q.values:
        raise ValueError(gettext("must be one of %(allowed)s") % {"allowed": allowed})
    return raw


def number_from_text(raw: Any) -> Any:
    if isinstance(raw, str) and raw.strip().lstrip("-").isdigit() and len(raw.strip()) < 12:
        return int(raw)
    return raw


def _clean_text(raw: Any, what: str) -> str:
    if raw is None:
        return ""
    if not isinstance(raw, str):
        raise ValueError(gettext("%(what)s must be text") % {"what": what})
    text = raw.strip()
    if len(text) > MAX_TEXT_LENGTH:
        raise ValueError(
            gettext("%(what)s is longer than %(limit)s characters") % {"what": what, "limit": MAX_TEXT_LENGTH}
        )
    return text


def _rationale_needed(q: Question, value: Any) -> bool:
    return q.rationale == "required" or (value == NA and q.na is not None and q.na.rationale_required)


def clean_rationale(q: Question, value: Any, raw: Any, final: bool, prefix: str = "") -> str:
    # The messages a rater reads on the rating page are in the request's language.
    text = _clean_text(raw, prefix + gettext("the rationale"))
    if text and q.rationale == "none" and value != NA:
        raise ValueError(prefix + gettext("this question takes no rationale"))
    if text and value is None and final:
        # A draft keeps a rationale typed before its answer; only a submit needs both.
        raise ValueError(prefix + gettext("a rationale needs an answer to go with it"))
    if final and value is not None and not text and _rationale_needed(q, value):
        needed = gettext("a rationale is required for N/A") if value == NA else gettext("a rationale is required")
        raise ValueError(prefix + needed)
    return text


def clean_per_finding(q: Question, raw: Any, raw_rationales: Any, final: bool, context: AnswerContext):
    return _clean_per_part(
        q, raw, raw_rationales, final, context.finding_ids, "finding", q.finding_label or gettext("Finding")
    )


def clean_per_claim(q: Question, raw: Any, raw_rationales: Any, final: bool, context: AnswerContext):
    return _clean_per_part(q, raw, raw_rationales, final, context.claim_ids, "claim", q.claim_label or gettext("Claim"))


def clean_choice_value(q: Question, raw: Any) -> Any:
    if raw not in q.values:
        raise ValueError(gettext("must be one of %(allowed)s") % {"allowed": ", ".join(q.values)})
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
    clean_one = clean_scale_value if q.is_scale else clean_choice_value
    values: dict[str, Any] = {}
    rationales: dict[str, str] = {}
    problems: list[tuple[str, str]] = []
    # Every part's problem at once: fixing "Result 1" must not reveal "Result 2" only then.
    for number, finding in enumerate(ids, start=1):
        prefix = f"{label} {number}: "  # the page's words: "Result 2", "Claim 3"
        answer = raw.get(finding)
        try:
            value = None if answer in (None, "") else clean_one(q, answer)
        except ValueError as exc:
            problems.append((finding, f"{prefix}{exc}"))
            continue
        if value is None and final and q.required:
            problems.append((finding, prefix + gettext("an answer is required")))
            continue
        try:
            text = clean_rationale(q, value, raw_rationales.get(finding), final, prefix)
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


def clean_spans(q: Question, raw: Any, final: bool, context: AnswerContext) -> list[dict] | None:
    if raw is None or raw == []:
        return None
    if not isinstance(raw, list):
        raise ValueError("must be a list of spans")
    if len(raw) > MAX_SPANS:
        raise ValueError(f"at most {MAX_SPANS} spans")
    texts = {"summary": context.summary_text, "source": context.source_text}
    compared = dict(context.compared)
    return [_clean_span(q, item, f"span {number}", final, texts, compared) for number, item in enumerate(raw, start=1)]


def _clean_span(q: Question, item: Any, where: str, final: bool, texts: dict[str, str], compared: dict) -> dict:
    """One span: its offsets checked against the text it points into, its link to the
    source (a linked span), its sub-answers and its rationale."""
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
    span["answers"] = _span_answers(q, item, where, final)
    rationale = _clean_text(item.get("rationale"), f"{where}: the rationale")
    if rationale and q.rationale == "none":
        raise ValueError(f"{where}: this question takes no rationale")
    if final and q.rationale == "required" and not rationale:
        raise ValueError(f"{where}: a rationale is required")
    span["rationale"] = rationale
    return span


def _span_answers(q: Question, item: dict, where: str, final: bool) -> dict[str, Any]:
    """A span's answers to the question's questions about each span."""
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
    return answers


def clean_value(q: Question, raw: Any) -> Any:
    """Return the clean value, None for "not answered", or raise ValueError."""
    if raw is None or raw == "" or (q.kind == "checkboxes" and raw == []):
        return None
    if q.kind == "scale":
        return clean_scale_value(q, raw)
    if q.kind == "choice":
        return clean_choice_value(q, raw)
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


def clean_answer(q: Question, raw: Any, raw_rationale: Any, final: bool, context: AnswerContext) -> tuple[Any, Any]:
    """One question's clean answer and rationale (None for "not answered"), or ValueError
    (PartProblems for a question asked per part)."""
    if q.per_finding:
        return clean_per_finding(q, raw, raw_rationale, final, context)
    if q.per_claim:
        return clean_per_claim(q, raw, raw_rationale, final, context)
    if q.highlights:
        if raw_rationale:
            raise ValueError("give each span's rationale inside the span")
        return clean_spans(q, raw, final, context), None
    value = clean_preference(q, raw, context) if q.preference else clean_value(q, raw)
    return value, clean_rationale(q, value, raw_rationale, final)


def unasked_problem(q: Question, value: Any, final: bool, context: AnswerContext) -> str | None:
    """The error of an answer to a question not asked of this item (a comparison's
    question on a single summary or the reverse), or of a required answer missing."""
    asked = q.asked(
        has_findings=bool(context.finding_ids),
        has_claims=bool(context.claim_ids),
        comparison=bool(context.compared),
    )
    if value is not None and not asked and q.about_comparisons != bool(context.compared):
        return (
            gettext("is asked of comparisons only") if q.about_comparisons else gettext("is not asked of comparisons")
        )
    if value is None and final and q.required and asked:
        # In the request's language, as the rating page and its scripts show it.
        return gettext("an answer is required")
    return None


# How a per-claim answer is stored: one rating whose value is {claim id: {"answer": option
# or None, "rationale": text}}. One row per question, not per claim: a claim is not a row of
# ours (a sentence of the summary has no row), and the answer is read and written whole.


def stored_per_claim(values: dict | None, rationales: dict | None) -> dict | None:
    """The rating value of a per-claim answer (None when empty)."""
    values, rationales = values or {}, rationales or {}
    combined = {
        claim: {"answer": values.get(claim), "rationale": rationales.get(claim, "")}
        for claim in sorted(set(values) | set(rationales))
    }
    return combined or None


def per_claim_parts(stored: dict) -> tuple[dict, dict]:
    """(answers, rationales) by claim id of a stored per-claim value, as validate() takes them."""
    answers = {c: p["answer"] for c, p in stored.items() if p.get("answer") is not None}
    rationales = {c: p["rationale"] for c, p in stored.items() if p.get("rationale")}
    return answers, rationales
