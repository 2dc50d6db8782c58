"""A rubric judge: an LLM that answers the study's own rubric, like a rater (issue 18).

The judge answers every scale, choice, checkbox and text question of the rubric, with
rationales (span and per-finding questions need offsets and findings: not asked). Its
answers are validated by the rubric exactly as a person's draft is
(`RubricDefinition.validate`), and then as a final answer restricted to the questions it
is asked: every required one answered, every required rationale given, the consistency
rules kept. An answer outside the scale, a missing required answer or a broken rule is
stored as *invalid* with the rubric's own message; a refusal, malformed JSON or a failed
call as *failed*. Neither is ever a score.

Judge answers live in their own table (JudgeAnswer), never as a rater's assignment: they
cannot enter the human-only agreement, queues, progress or exports by accident. They are
compared with people on request (`judge_agreement`): Cohen's kappa of the judge with each
rater beside the raters' kappa with each other.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence

from django.db import transaction

from annotate.exceptions import ApplicationError
from annotate.models import Study, Summary
from annotate.rubrics import AnswerContext, RubricDefinition
from annotate.selectors.contents import rubric_definition
from generation.conf import pipeline_settings
from generation.llm import Gateway, LLMError, parse_json_object
from generation.models import JudgeAnswer, JudgeRun
from generation.prompting import prompt_versions

PROMPT = "rubric_judge"
JUDGE_NAME = "rubric_judge"  # as the evaluators page and the report's columns name it
JUDGED_KINDS = ("scale", "choice", "checkboxes", "text")


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
        head = f"- {q.key} ({q.kind}, {', '.join(needs)}): {q.prompt}"
        if q.help:
            head += f" {q.help.strip()}"
        lines.append(head)
        for option in q.options:
            described = f": {option.description.strip()}" if option.description else ""
            lines.append(f"    {json.dumps(option.value)} = {option.label}{described}")
        if q.na is not None:
            lines.append(f'    "na" = {q.na.label}')
    return "\n".join(lines)


def judge_version(study: Study, model: str, params: dict) -> tuple[str, dict]:
    config = {
        "model": model,
        "params": params,
        "prompts": prompt_versions(["system", PROMPT]),
        "rubric": study.rubric_id,
    }
    return hashlib.sha256(json.dumps(config, sort_keys=True).encode()).hexdigest()[:12], config


def check_answer(definition: RubricDefinition, answers, rationales, context: AnswerContext) -> tuple[dict, dict]:
    """The clean (answers, rationales), or AnswerValidationError/ApplicationError with the
    rubric's messages: a person's draft check, then a final check of the judged questions."""
    from annotate.rubrics import AnswerValidationError

    clean = definition.validate(answers, rationales, final=False, context=context)
    errors = {}
    for q in judged_questions(definition):
        if q.required and q.key not in clean.values:
            errors[q.key] = "an answer is required"
        elif q.rationale == "required" and q.key in clean.values and not clean.rationales.get(q.key):
            errors[q.key] = "a rationale is required"
    for key, message in definition.rule_problems(clean.values):
        errors.setdefault(key, message)
    if errors:
        raise AnswerValidationError(errors)
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
    finding_ids = tuple(str(f) for f in source.findings.values_list("uuid", flat=True))
    context = AnswerContext(summary_text=summary.text, source_text=source.text, finding_ids=finding_ids)
    fields: dict = {"answers": {}, "rationales": {}, "raw": "", "error": "", "call": None}
    parsed = None
    try:
        result = gateway.complete(
            step="rubric_judge",
            prompt=PROMPT,
            variables={
                "guidelines": run.study.guidelines or "(none)",
                "rubric": rubric_text(definition),
                "source": source.text,
                "summary": summary.text,
            },
            model=run.model,
            params=run.config["params"],
            json_output=True,
        )
        fields.update(raw=result.text, call=result.call)
        parsed = parse_json_object(result.text)
        if not isinstance(parsed, dict) or not isinstance(parsed.get("answers"), dict):
            raise ValueError("no JSON object with answers in the reply")
        answers, rationales = check_answer(definition, parsed["answers"], parsed.get("rationales") or {}, context)
        fields.update(status=JudgeAnswer.Status.VALID, answers=answers, rationales=rationales)
    except LLMError as exc:
        fields.update(status=JudgeAnswer.Status.FAILED, error=exc.message)
    except ValueError as exc:
        fields.update(status=JudgeAnswer.Status.FAILED, error=str(exc))
    except ApplicationError as exc:  # the rubric refused it (AnswerValidationError)
        details = exc.extra.get("fields") if isinstance(exc.extra, dict) else None
        message = "; ".join(f"{k}: {v}" for k, v in sorted(details.items())) if details else exc.message
        fields.update(status=JudgeAnswer.Status.INVALID, error=message)
        if isinstance(parsed, dict):
            fields.update(answers=parsed.get("answers") or {}, rationales=parsed.get("rationales") or {})
    with transaction.atomic():
        answer, _ = JudgeAnswer.objects.get_or_create(run=run, summary=summary, defaults=fields)
    return answer


def run_judge(
    *, study: Study, summary_keys: Sequence[str] = (), limit: int | None = None, gateway: Gateway | None = None
) -> tuple[JudgeRun, list[JudgeAnswer]]:
    run = start_judge_run(study=study)
    summaries = Summary.objects.filter(study=study).select_related("source").order_by("key")
    if summary_keys:
        summaries = summaries.filter(key__in=summary_keys)
    summaries = list(summaries[:limit] if limit is not None else summaries)
    gateway = gateway or Gateway()
    return run, [judge_summary(run=run, summary=s, gateway=gateway) for s in summaries]
