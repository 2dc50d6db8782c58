"""A rubric judge: an LLM that answers the study's own rubric, like a rater.

The judge answers every scale, choice, checkbox and text question of the rubric, and the
questions asked once per finding of the source or per claim of the summary, with
rationales (span questions need character offsets: not asked). Findings and claims are
shown to it numbered (F1, F2, …; C1, C2, …) and its answers keyed by those numbers are
mapped back to the finding and claim ids a rater's answers use. Its answers are validated
by the rubric exactly as a person's final answer is (`RubricDefinition.validate`),
restricted to the questions it is asked: every required one answered (each finding or
claim of a per-part one), every required rationale given, the consistency rules kept. An
answer outside the scale, a missing required answer, an unknown finding or a broken rule
is stored as *invalid* with the rubric's own message; a refusal, malformed JSON or a
failed call as *failed*. Neither is ever a score.

Judge answers live in their own table (JudgeAnswer), never as a rater's assignment: they
cannot enter the human-only agreement, queues, progress or exports by accident. They are
compared with people on request (`judge_agreement`): Cohen's kappa of the judge with each
rater beside the raters' kappa with each other, per finding for per-finding questions,
and for per-claim questions its "not supported" calls against people's.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from django.db import transaction

from annotate.models import Comparison, Study, Summary
from annotate.rubrics import TIE, AnswerContext, AnswerValidationError, RubricDefinition
from annotate.selectors.contents import rubric_definition
from annotate.services.ratings import compared_texts
from core.exceptions import ApplicationError
from generation.answer_text import excerpt, parse_json_object
from generation.conf import pipeline_settings
from generation.evaluator_versions import JUDGE_NAME  # noqa: F401  (named there, for the report)
from generation.llm import Gateway, LLMError
from generation.models import JudgeAnswer, JudgeRun
from generation.prompting import prompt_versions
from generation.run_records import recording

PROMPT = "rubric_judge"
PAIRWISE_PROMPT = "rubric_judge_pairwise"
JUDGED_KINDS = ("scale", "choice", "checkboxes", "text", "per_finding", "per_claim")
FINDING, CLAIM = "F", "C"  # how the prompt numbers the source's findings and the summary's claims


def judged_questions(definition: RubricDefinition) -> list:
    return [q for q in definition.questions if q.kind in JUDGED_KINDS]


def rubric_text(definition: RubricDefinition) -> str:
    """The rubric as the judge reads it: each question with its key, allowed values and
    whether an answer and a rationale are required."""
    lines = []
    for q in judged_questions(definition):
        needs = ["required" if q.required else "optional"]
        if q.rationale == "required":
            needs.append("rationale required")
        if q.per_finding:
            needs.append("answered once per finding F1, F2, … listed below")
        elif q.per_claim:
            needs.append("answered once per claim C1, C2, … listed below")
        kind = {"per_finding": "scale", "per_claim": "choice"}.get(q.kind, q.kind)
        head = f"- {q.key} ({kind}, {', '.join(needs)}): {q.prompt}"
        if q.help:
            head += f" {q.help.strip()}"
        lines.append(head)
        for option in q.options:
            described = f": {option.description.strip()}" if option.description else ""
            lines.append(f"    {json.dumps(option.value)} = {option.label}{described}")
        if q.na is not None:
            lines.append(f'    "na" = {q.na.label}')
    return "\n".join(lines)


@dataclass(frozen=True)
class Parts:
    """The findings and claims a summary's per-part questions are asked about, in the
    prompt's numbering: label ("F1", "C2") -> the id a rater's answer uses."""

    text: str
    findings: dict[str, str]
    claims: dict[str, str]

    def to_ids(self, definition: RubricDefinition, answers: dict, rationales: dict) -> tuple[dict, dict]:
        """The judge's answers with per-part labels replaced by ids. A label that is not
        listed is kept as it is, so that the rubric names it as an unknown finding or claim."""
        answers, rationales = dict(answers), dict(rationales)
        for q in definition.questions:
            labels = self.findings if q.per_finding else self.claims if q.per_claim else None
            if labels is None:
                continue
            for given in (answers, rationales):
                if isinstance(given.get(q.key), dict):
                    given[q.key] = {labels.get(str(k).strip(), k): v for k, v in given[q.key].items()}
        return answers, rationales


def summary_parts(definition: RubricDefinition, summary: Summary, findings: list) -> Parts:
    lines: list[str] = []
    by_finding: dict[str, str] = {}
    by_claim: dict[str, str] = {}
    if findings and any(q.per_finding for q in definition.questions):
        lines.append("\nFindings of the source (for the questions asked once per finding):")
        for number, f in enumerate(findings, start=1):
            label = f"{FINDING}{number}"
            by_finding[label] = str(f.uuid)
            versus = f" versus {f.comparator}" if f.comparator else ""
            reported = f" (reported: {f.label})" if f.label else ""
            lines.append(f'{label}: {f.intervention}{versus}, on {f.outcome}{reported}. Evidence: "{f.evidence}"')
    if definition.asks_claims:
        from annotate.selectors.claims import claim_units

        units = claim_units(summary)
        if units:
            lines.append("\nClaims of the summary (for the questions asked once per claim):")
        for unit in units:
            label = f"{CLAIM}{unit.number}"
            by_claim[label] = unit.id
            lines.append(f"{label}: {unit.text}")
    return Parts(text="\n".join(lines), findings=by_finding, claims=by_claim)


def _nullable(schema: dict, required: bool) -> dict:
    return schema if required else {"anyOf": [schema, {"type": "null"}]}


def _closed_object(properties: dict) -> dict:
    return {"type": "object", "properties": properties, "required": list(properties), "additionalProperties": False}


def answer_schema(definition: RubricDefinition, parts: Parts) -> dict:
    """The JSON Schema of the judge's answer to this rubric about this summary: every
    judged question with its own allowed values (a list of them for checkboxes, one per
    listed finding or claim for the per-part questions), optional ones nullable, and a
    rationale for each question that takes one. Sent as structured output where the endpoint takes it, so that
    even a small model answers in the rubric's shape; the rubric still checks the answer."""
    answers, rationales = {}, {}
    for q in judged_questions(definition):
        values = list(q.allowed_values)
        one = {"enum": values} if values else {"type": "string"}
        if q.free_text:
            one = {"type": "string"}
        labels = parts.findings if q.per_finding else parts.claims if q.per_claim else None
        if labels is not None:
            if not labels:
                continue
            answers[q.key] = _nullable(_closed_object({label: one for label in labels}), q.required)
            if q.rationale != "none":
                per_part = _closed_object({label: {"type": "string"} for label in labels})
                rationales[q.key] = _nullable(per_part, q.rationale == "required")
            continue
        if q.several_options:
            one = {"type": "array", "items": {"enum": values}}
        answers[q.key] = _nullable(one, q.required)
        if q.rationale != "none":  # the rubric refuses a rationale to a question that takes none
            rationales[q.key] = _nullable({"type": "string"}, q.rationale == "required")
    return _closed_object({"answers": _closed_object(answers), "rationales": _closed_object(rationales)})


def judge_version(study: Study, model: str, params: dict) -> tuple[str, dict]:
    config = {
        "model": model,
        "params": params,
        "prompts": prompt_versions(["system", PROMPT, PAIRWISE_PROMPT]),
        "rubric": study.rubric_id,
    }
    return hashlib.sha256(json.dumps(config, sort_keys=True).encode()).hexdigest()[:12], config


def check_answer(definition: RubricDefinition, answers, rationales, context: AnswerContext) -> tuple[dict, dict]:
    """The clean (answers, rationales), or AnswerValidationError with the rubric's
    messages: a person's final check, for the judged questions only."""
    keys = {q.key for q in judged_questions(definition)}
    # A model may write a scale answer as text ("3"): read as the number it names.
    answers = definition.numbers_from_text(answers)
    clean = definition.validate(answers, rationales, final=True, context=context, only=keys)
    return clean.values, clean.rationales


def start_judge_run(*, study: Study) -> JudgeRun:
    s = pipeline_settings("factored")
    params = {"temperature": 0, "max_tokens": s.max_tokens}
    version, config = judge_version(study, s.model, params)
    run, _ = JudgeRun.objects.get_or_create(study=study, version=version, defaults={"model": s.model, "config": config})
    return run


def judge_summary(*, run: JudgeRun, summary: Summary, gateway: Gateway) -> JudgeAnswer:
    """Ask, check and store the judge's answers for one summary (idempotent: an existing
    answer of the run is returned as it is)."""
    existing = JudgeAnswer.objects.filter(run=run, summary=summary).first()
    if existing is not None:
        return existing
    definition = rubric_definition(run.study.rubric)
    source = summary.source
    findings = list(source.findings.order_by("index"))
    parts = summary_parts(definition, summary, findings)
    context = AnswerContext(
        summary_text=summary.text,
        source_text=source.text,
        finding_ids=tuple(str(f.uuid) for f in findings),
        claim_ids=tuple(parts.claims.values()),
    )
    fields: dict = {"answers": {}, "rationales": {}, "raw": "", "error": "", "call": None}
    parsed = None
    result = None
    try:
        result = gateway.complete(
            step="rubric_judge",
            prompt=PROMPT,
            variables={
                "guidelines": run.study.guidelines or "(none)",
                "rubric": rubric_text(definition),
                "source": source.text,
                "summary": summary.text,
                "parts": parts.text,
            },
            model=run.model,
            params=run.config["params"],
            schema=answer_schema(definition, parts),
        )
        fields.update(raw=result.text, call=result.call)
        parsed = parse_json_object(result.text)
        if not isinstance(parsed, dict) or not isinstance(parsed.get("answers"), dict):
            shape = "no JSON object" if not isinstance(parsed, dict) else 'no object under "answers"'
            raise ValueError(f"the answer held {shape} ({excerpt(result.text)})")
        # A null is the model's "not answered" (the schema lets optional questions be null).
        answers = {k: v for k, v in parsed["answers"].items() if v is not None}
        rationales = parsed.get("rationales")
        rationales = {k: v for k, v in rationales.items() if v is not None} if isinstance(rationales, dict) else {}
        answers, rationales = parts.to_ids(definition, answers, rationales)
        parsed = {**parsed, "answers": answers, "rationales": rationales}
        answers, rationales = check_answer(definition, answers, rationales, context)
        fields.update(status=JudgeAnswer.Status.VALID, answers=answers, rationales=rationales)
        result.record()
    except LLMError as exc:
        fields.update(status=JudgeAnswer.Status.FAILED, error=exc.message)
    except ValueError as exc:
        fields.update(status=JudgeAnswer.Status.FAILED, error=result.record(str(exc)) if result else str(exc))
    except ApplicationError as exc:  # the rubric refused it (AnswerValidationError)
        details = exc.extra.get("fields") if isinstance(exc.extra, dict) else None
        message = "; ".join(f"{k}: {v}" for k, v in sorted(details.items())) if details else exc.message
        message = f"the rubric refused the answer: {message}"
        fields.update(status=JudgeAnswer.Status.INVALID, error=result.record(message, well_formed=True))
        if isinstance(parsed, dict):
            fields.update(answers=parsed.get("answers") or {}, rationales=parsed.get("rationales") or {})
    with transaction.atomic():
        answer, _ = JudgeAnswer.objects.get_or_create(run=run, summary=summary, defaults=fields)
    return answer


# --- comparisons ----------------------------------------------------------------
#
# A comparison item is asked twice, its summaries shown in one order and then in the other
# (A and B swapped). Each answer is checked by the rubric as a rater's would be. The judge's
# answer that counts, per question, is the summary it preferred in both orders; an answer
# that FLIPS with the order (A then A again, i.e. a different summary) counts as a TIE: the
# judge could not tell them apart beyond where they stood. Its position consistency (the
# share of questions answered the same in both orders) is reported beside its kappa with
# the raters (docs/pairwise.md). An order that gives no usable answer makes the whole
# comparison unusable (status failed or invalid), never half a judgement.


def preference_questions(definition: RubricDefinition) -> list:
    return [q for q in definition.questions if q.preference]


def pairwise_rubric_text(definition: RubricDefinition) -> str:
    lines = []
    for q in preference_questions(definition):
        needs = ["required" if q.required else "optional"]
        if q.strength:
            needs.append("with strength")
        if q.rationale == "required":
            needs.append("rationale required")
        line = f"- {q.key} ({', '.join(needs)}): {q.prompt}"
        if q.help:
            line += f" {q.help.strip()}"
        lines.append(line)
    return "\n".join(lines)


def pairwise_schema(definition: RubricDefinition) -> dict:
    answers, rationales = {}, {}
    for q in preference_questions(definition):
        one = _closed_object(
            {
                "preferred": {"enum": ["A", "B", TIE]},
                "strength": {"anyOf": [{"enum": ["much", "slightly"]}, {"type": "null"}]},
            }
        )
        answers[q.key] = _nullable(one, q.required)
        if q.rationale != "none":
            rationales[q.key] = _nullable({"type": "string"}, q.rationale == "required")
    return _closed_object({"answers": _closed_object(answers), "rationales": _closed_object(rationales)})


def _by_side(given: dict, shown: list[str]) -> dict:
    """A/B answers as the rubric takes them: the preferred summary's uuid (or tie); a
    strength of null or given with a tie is dropped, as a rater's page would."""
    out = {}
    for key, value in given.items():
        if not isinstance(value, dict):
            out[key] = value  # the rubric names what is wrong with it
            continue
        side = value.get("preferred")
        preferred = {"A": shown[0], "B": shown[1]}.get(side, side)
        clean = {"preferred": preferred}
        if value.get("strength") and preferred != TIE:
            clean["strength"] = value["strength"]
        out[key] = clean
    return out


def _ask_in_order(*, run, definition, item: Summary, shown: list[str], texts: dict, gateway: Gateway) -> dict:
    """One order's call: {shown, status, answers, rationales, raw, error, call}."""
    keys = {q.key for q in preference_questions(definition)}
    entry: dict = {"shown": shown, "status": JudgeAnswer.Status.FAILED, "answers": {}, "rationales": {}, "raw": ""}
    result = None
    try:
        result = gateway.complete(
            step="rubric_judge",
            prompt=PAIRWISE_PROMPT,
            variables={
                "guidelines": run.study.guidelines or "(none)",
                "rubric": pairwise_rubric_text(definition),
                "source": item.source.text,
                "summary_a": texts[shown[0]],
                "summary_b": texts[shown[1]],
            },
            model=run.model,
            params=run.config["params"],
            schema=pairwise_schema(definition),
        )
        entry.update(raw=result.text, call=result.call)
        parsed = parse_json_object(result.text)
        if not isinstance(parsed, dict) or not isinstance(parsed.get("answers"), dict):
            raise ValueError(f'the answer held no object under "answers" ({excerpt(result.text)})')
        answers = _by_side({k: v for k, v in parsed["answers"].items() if v is not None}, shown)
        rationales = parsed.get("rationales")
        rationales = {k: v for k, v in rationales.items() if v} if isinstance(rationales, dict) else {}
        entry.update(answers=answers, rationales=rationales)
        context = AnswerContext(summary_text=item.text, source_text=item.source.text, compared=tuple(texts.items()))
        clean = definition.validate(answers, rationales, final=True, context=context, only=keys)
        entry.update(status=JudgeAnswer.Status.VALID, answers=clean.values, rationales=clean.rationales)
        result.record()
    except LLMError as exc:
        entry["error"] = exc.message
    except ValueError as exc:
        entry["error"] = result.record(str(exc)) if result else str(exc)
    except AnswerValidationError as exc:
        message = "; ".join(f"{k}: {v}" for k, v in sorted(exc.errors.items()))
        entry.update(
            status=JudgeAnswer.Status.INVALID,
            error=result.record(f"the rubric refused the answer: {message}", well_formed=True),
        )
    return entry


def combine_orders(first: dict, second: dict, keys) -> tuple[dict, dict]:
    """The answer that counts from two orders' clean answers, and per question whether the
    judge was position-consistent: the same summary (or tie) in both orders keeps it
    (a strength only if both gave the same one); a flip is a tie."""
    combined, consistent = {}, {}
    for key in keys:
        a, b = first.get(key), second.get(key)
        if a is None or b is None:
            continue
        same = a.get("preferred") == b.get("preferred")
        consistent[key] = same
        if same:
            value = {"preferred": a["preferred"]}
            if a.get("strength") and a.get("strength") == b.get("strength"):
                value["strength"] = a["strength"]
            combined[key] = value
        else:
            combined[key] = {"preferred": TIE}
    return combined, consistent


def judge_comparison(*, run: JudgeRun, item: Summary, gateway: Gateway) -> JudgeAnswer:
    """Ask the judge about a comparison item in both orders, and store one JudgeAnswer
    with the combined answer and both orders (idempotent, like judge_summary)."""
    existing = JudgeAnswer.objects.filter(run=run, summary=item).first()
    if existing is not None:
        return existing
    definition = rubric_definition(run.study.rubric)
    texts = dict(compared_texts(item))
    order = list(texts)
    if len(order) != 2:
        raise ApplicationError("the judge compares two summaries at a time")
    entries = [
        _ask_in_order(run=run, definition=definition, item=item, shown=shown, texts=texts, gateway=gateway)
        for shown in (order, order[::-1])
    ]
    calls = [e.pop("call", None) for e in entries]
    fields: dict = {"orders": entries, "raw": entries[0]["raw"], "call": calls[0] or calls[1]}
    bad = [e for e in entries if e["status"] != JudgeAnswer.Status.VALID]
    if bad:
        status = JudgeAnswer.Status.FAILED if any(e["status"] == "failed" for e in bad) else JudgeAnswer.Status.INVALID
        named = [("as shown" if e["shown"] == order else "swapped", e.get("error", "")) for e in bad]
        fields.update(status=status, error="; ".join(f"order {name}: {error}" for name, error in named))
    else:
        keys = [q.key for q in preference_questions(definition)]
        combined, consistent = combine_orders(entries[0]["answers"], entries[1]["answers"], keys)
        fields.update(
            status=JudgeAnswer.Status.VALID,
            answers=combined,
            rationales=entries[0]["rationales"],
        )
        for entry in entries:
            entry["consistent"] = consistent
    with transaction.atomic():
        answer, _ = JudgeAnswer.objects.get_or_create(run=run, summary=item, defaults=fields)
    return answer


def run_judge(
    *,
    study: Study,
    summary_keys: Sequence[str] = (),
    limit: int | None = None,
    gateway: Gateway | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> tuple[JudgeRun, list[JudgeAnswer]]:
    run = start_judge_run(study=study)
    definition = rubric_definition(study.rubric)
    summaries = Summary.objects.filter(study=study).select_related("source").order_by("key")
    # A rubric asks single summaries its other questions and comparison items its
    # preferences: each kind of item is judged only where the rubric asks it something.
    if not preference_questions(definition):
        summaries = summaries.exclude(generator=Comparison.ITEM_GENERATOR)
    if not judged_questions(definition):
        summaries = summaries.filter(generator=Comparison.ITEM_GENERATOR)
    if summary_keys:
        summaries = summaries.filter(key__in=summary_keys)
    summaries = list(summaries[:limit] if limit is not None else summaries)
    gateway = gateway or Gateway()
    answers = []
    with recording(run):
        for summary in summaries:
            if summary.generator == Comparison.ITEM_GENERATOR:
                answers.append(judge_comparison(run=run, item=summary, gateway=gateway))
            else:
                answers.append(judge_summary(run=run, summary=summary, gateway=gateway))
            if progress is not None:
                progress(len(answers), len(summaries))
    run.refresh_from_db()
    return run, answers
