"""The two pipelines, step by step. Each step is one or more gateway calls; the
texts, checks and verdicts of every step go into the job's trace.

litsumm (Green et al.): context → generate → five reference checks, with a rescue
prompt chosen by the first failing check, at most `max_attempts` generations in all,
then a flag → self-consistency (one structured verdict per statement, against the
whole context) → if any statement is unsupported: revise with the context and the
critiques → final reference check → re-verify the revised text.

factored (Factored Verification): sentences as claims (the paper's own
simplification for cited summaries) → each cited claim checked against only the
sources it cites (reasoning with quotes, then yes/no; P from logprobs, else 0/1) →
P(summary) = product → if any claim is unsupported: revise from the concatenated
critiques → re-verify. Used alone it first writes a draft with the generation
prompt; after litsumm it checks litsumm's final text.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field

from annotate.models import Source
from generation.answer_text import as_text, excerpt, parse_json_object
from generation.claims import (
    clean_summary,
    hallucinations,
    meaningful_claims,
    read_claims,
    sentence_claims,
    summary_probability,
    summary_problem,
)
from generation.conf import PipelineSettings, factored_models, pipeline_settings
from generation.context import Context, build_context, context_line, embedding_method
from generation.llm import Gateway, ModelAnswerError, count_tokens
from generation.meaning import meaning_problem, placeholder_problem
from generation.models import GenerationJob
from generation.prompting import get_prompt, prompt_versions
from generation.reference_checks import ReferenceReport, check_references, cited_refs
from generation.verdicts import (
    NOT_SUPPORTED,
    UNVERIFIED,
    parse_claim_verdict,
    parse_statement_verdicts,
    yes_probability,
)

PIPELINE_CHOICES = ("litsumm", "factored", "litsumm+factored", "selfcorrect")
RESCUE_PROMPTS = {kind: f"rescue_{kind}" for kind in ("adequate", "format", "real", "location", "max_share")}
PROMPTS = {
    "litsumm": ["system", "generate", *RESCUE_PROMPTS.values(), "self_consistency", "revise_consistency"],
    "factored": ["system", "generate", "factored_verify", "factored_revise", "factored_decompose"],
    # Factored Verification's self-correction baseline (§4.1, A.4, A.5): the generation model
    # critiques its whole draft itself and revises from that; the judge counts hallucinations.
    "selfcorrect": ["system", "generate", "self_correction_feedback", "self_correction_revise", "factored_verify"],
}


@dataclass(frozen=True)
class PipelineSpec:
    name: str
    stages: tuple[str, ...]
    settings: dict[str, PipelineSettings]
    config: dict
    version: str

    @property
    def model(self) -> str:
        return self.settings[self.stages[0]].model

    @property
    def generator(self) -> str:
        models = "+".join(dict.fromkeys(self.settings[s].model for s in self.stages))
        return f"{models}/{self.name}@{self.version}"


def pipeline_spec(name: str) -> PipelineSpec:
    """The pipeline with its settings as they are now, and the version they make:
    a hash over models, parameters, limits and prompt versions."""
    if name not in PIPELINE_CHOICES:
        raise ValueError(f"unknown pipeline {name!r}; choose one of {', '.join(PIPELINE_CHOICES)}")
    stages = tuple(name.split("+"))
    settings = {stage: pipeline_settings(stage) for stage in stages}
    config = {
        "pipeline": name,
        "stages": {
            stage: {
                "model": s.model,
                "generation_params": _generation_params(s),
                "verify_params": _verify_params(s),
                "context_budget": s.context_budget,
                "min_sentences": s.min_sentences,
                "max_attempts": s.max_attempts,
                "factored_threshold": s.factored_threshold,
                "seed": s.seed,
                "prompts": prompt_versions(PROMPTS[stage]),
                **_verification_models(stage, s),
            }
            for stage, s in settings.items()
        },
        "context_method": embedding_method(),
    }
    digest = hashlib.sha256(json.dumps(config, sort_keys=True).encode()).hexdigest()[:12]
    return PipelineSpec(name=name, stages=stages, settings=settings, config=config, version=digest)


def _verification_models(stage: str, s: PipelineSettings) -> dict:
    """The judge and critique models a stage verifies with (part of the pipeline version)."""
    if stage == "litsumm":
        return {}
    judge, critique = factored_models(s)
    # Self-correction's critique is the generation model's own (that is the baseline).
    return {"judge_model": judge, "critique_model": critique if stage == "factored" else s.model}


def _generation_params(s: PipelineSettings) -> dict:
    return {
        "temperature": s.temperature,
        "presence_penalty": s.presence_penalty,
        "frequency_penalty": s.frequency_penalty,
        "max_tokens": s.max_tokens,
    }


def _verify_params(s: PipelineSettings) -> dict:
    # Checks are deterministic; the cap keeps a rambling model from running on.
    return {"temperature": 0.0, "max_tokens": s.max_tokens}


@dataclass
class Outcome:
    status: str
    text: str = ""
    flags: list[str] = field(default_factory=list)
    attempts: int = 0
    references: ReferenceReport | None = None
    claims: list[dict] = field(default_factory=list)
    trace: dict = field(default_factory=dict)
    skip_reason: str = ""


class Runner:
    """Runs one pipeline spec for one source, recording every call on `job`."""

    def __init__(self, *, spec: PipelineSpec, source: Source, job: GenerationJob | None, gateway: Gateway):
        self.spec, self.source, self.job, self.gateway = spec, source, job, gateway
        self.sentences = [(s.text, s.ref or source.external_ids.get("pmcid") or source.key) for s in source.sentences]
        self.entity = source.metadata.get("entity") or source.title or source.key
        self.refs = {ref for _, ref in self.sentences}
        self.trace: dict = {"steps": []}
        self.truncated = False  # the current text came from an answer cut off at max_tokens

    # --- shared steps -------------------------------------------------------------

    def call(self, step: str, prompt_id: str, variables: dict, model: str, params: dict, **options):
        return self.gateway.complete(
            step=step, prompt=prompt_id, variables=variables, model=model, params=params, job=self.job, **options
        )

    def note(self, step: str, **details) -> None:
        self.trace["steps"].append({"step": step, **details})

    def context(self, s: PipelineSettings) -> Context:
        system = get_prompt("system").text.strip()
        empty = get_prompt("generate").render(entity=self.entity, context="")
        context = build_context(
            sentences=self.sentences,
            prompt_tokens=count_tokens(system) + count_tokens(empty),
            budget=s.context_budget,
            min_sentences=s.min_sentences,
            seed=s.seed,
        )
        self.trace["context"] = context.as_dict()
        return context

    def generate(self, s: PipelineSettings, context: Context) -> str:
        result = self.call(
            "generate", "generate", {"entity": self.entity, "context": context.text}, s.model, _generation_params(s)
        )
        return self.text_of(result)

    def text_of(self, result, previous: str | None = None) -> str:
        """The summary in a generation answer. An answer cut off at max_tokens is
        remembered: the final text must not silently be a truncated one. An empty or
        oversized answer is unusable: a rescue or revision keeps the `previous` text (and
        says so in the trace), a first draft fails the job with the reason."""
        text = clean_summary(result.text)
        problem = summary_problem(text, result.call.prompt_id)
        if problem:
            result.record(problem)
            if previous is None:
                raise ModelAnswerError(f"{result.call.step}: {problem}")
            self.note(result.call.step, problem=f"{problem}; the text before it was kept")
            return previous
        self.truncated = result.truncated
        result.record()
        return text

    def check(self, step: str, text: str, context: Context) -> ReferenceReport:
        report = check_references(text, context.refs)
        self.note(step, text=text, references=report.as_dict())
        return report

    def revise_and_reverify(
        self,
        step: str,
        prompt_id: str,
        *,
        critiques: str,
        text: str,
        context: Context,
        s: PipelineSettings,
        reverify: Callable[[str], list[dict]],
    ) -> tuple[str, ReferenceReport, list[dict]]:
        """Both pipelines end the same way when a claim is unsupported: revise the text
        from the context and the critiques, run the final reference check on the revision,
        then verify it again (`reverify`, the pipeline's own verification). Returns the
        revised text, its reference report and its claims."""
        result = self.call(
            step,
            prompt_id,
            {"context": context.text, "summary": text, "critiques": critiques},
            s.model,
            _generation_params(s),
        )
        revised = self.text_of(result, previous=text)
        report = self.check("references:final", revised, context)
        return revised, report, reverify(revised)

    # --- litsumm ----------------------------------------------------------------------

    def litsumm(self, context: Context) -> Outcome:
        s = self.spec.settings["litsumm"]
        text = self.generate(s, context)
        attempts = 1
        report = self.check("references", text, context)
        while not report.passed and attempts < s.max_attempts:
            kind = report.failed[0]
            details = "; ".join(p.message for p in report.problems if p.check == kind)
            result = self.call(
                f"rescue:{kind}",
                RESCUE_PROMPTS[kind],
                {"context": context.text, "summary": text, "details": details},
                s.model,
                _generation_params(s),
            )
            text = self.text_of(result, previous=text)
            attempts += 1
            report = self.check(f"references:after-rescue:{kind}", text, context)
        if not report.passed:
            return Outcome(
                status="flagged",
                text=text,
                flags=["references_failed"],
                attempts=attempts,
                references=report,
                claims=sentence_claims(text, self.refs),
            )

        claims = self.self_consistency("self_consistency", text, context, s)
        flags: list[str] = []
        unsupported = [c for c in claims if c["verdict"] == NOT_SUPPORTED]
        if unsupported:
            text, report, claims = self.revise_and_reverify(
                "revise",
                "revise_consistency",
                critiques="\n".join(f'- "{c["text"]}": {c["explanation"]}' for c in unsupported),
                text=text,
                context=context,
                s=s,
                reverify=lambda revised: self.self_consistency("self_consistency:reverify", revised, context, s),
            )
            if not report.passed:
                flags.append("final_references_failed")
        if any(c["verdict"] == NOT_SUPPORTED for c in claims):
            flags.append("self_consistency_failed")
        elif any(c["verdict"] == UNVERIFIED for c in claims):
            flags.append("self_consistency_incomplete")
        return Outcome(
            status="flagged" if flags else "ok",
            text=text,
            flags=flags,
            attempts=attempts,
            references=report,
            claims=claims,
        )

    def self_consistency(self, step: str, text: str, context: Context, s: PipelineSettings) -> list[dict]:
        claims = sentence_claims(text, self.refs)
        statements = "\n".join(f"{i + 1}. {c['text']}" for i, c in enumerate(claims))
        result = self.call(
            step,
            "self_consistency",
            {"context": context.text, "statements": statements},
            s.model,
            _verify_params(s),
        )
        verdicts = parse_statement_verdicts(result.text, len(claims))
        parsed = parse_json_object(result.text)
        given = sum(v.verdict != UNVERIFIED for v in verdicts)
        result.record(
            "" if given or not claims else f"the checker gave no verdict for any statement ({excerpt(result.text)})",
            well_formed=isinstance(parsed, dict) and isinstance(parsed.get("verdicts"), list) and given == len(claims),
        )
        for claim, verdict in zip(claims, verdicts, strict=True):
            claim.update(verdict=verdict.verdict, explanation=verdict.explanation, probability=None)
        self.note(
            step, text=text, verdicts=[{"verdict": c["verdict"], "explanation": c["explanation"]} for c in claims]
        )
        return claims

    # --- factored verification -----------------------------------------------------

    def factored(self, text: str, context: Context, references: ReferenceReport | None) -> Outcome:
        """Verify (the judge), revise from the critique model's claim-wise critiques when a
        claim is unsupported, verify the revision (the judge). With one model for both (the
        default) the judge's verification is the critique; with two, the critique model
        verifies the draft too and its critiques drive the revision (the paper's Table 3)."""
        s = self.spec.settings["factored"]
        judge, critique_model = factored_models(s)
        claims = self.verify_claims("factored:verify", text, s, model=judge)
        critiqued = (
            claims
            if critique_model == judge
            else self.verify_claims("factored:critique", text, s, model=critique_model)
        )
        before = hallucinations(claims)
        p_before = summary_probability(claims)
        unsupported = [c for c in critiqued if c["verdict"] == NOT_SUPPORTED]
        if unsupported:
            # The draft before revision is kept (store_outcome makes it a summary of the
            # study, the revision's parent), so people can rate hallucinations before and
            # after revision (Factored Verification, Table 2) when the study asks for it.
            self.keep_draft(text, claims, references, s)
            text, references, claims = self.revise_and_reverify(
                "factored:revise",
                "factored_revise",
                critiques="\n".join(f'- For the sentence "{c["text"]}": {c["explanation"]}' for c in unsupported),
                text=text,
                context=context,
                s=s,
                reverify=lambda revised: self.verify_claims("factored:reverify", revised, s, model=judge),
            )
        return self.judged(s, text, references, claims, before, p_before, judge, critique_model)

    def keep_draft(self, text: str, claims: list[dict], references: ReferenceReport | None, s) -> None:
        """Keep the text before revision, with the flags of the checks it failed (the
        same flags a final text would carry) and `draft`: an intermediate text is offered
        for rating only when the study asks for drafts."""
        flags = ["draft"]
        if references is not None and not references.passed:
            flags.append("references_failed")
        p = summary_probability(claims)
        if p is not None and p < s.factored_threshold:
            flags.append("factored_below_threshold")
        if any(c["verdict"] == UNVERIFIED and c["refs"] for c in claims):
            flags.append("factored_incomplete")
        if self.truncated:
            flags.append("output_truncated")
        self.trace["draft"] = {"text": text, "claims": [dict(c) for c in claims], "flags": flags}

    def judged(self, s, text, references, claims, before, p_before, judge, critique_model) -> Outcome:
        after = hallucinations(claims)
        p_after = summary_probability(claims)
        self.trace["factored"] = {
            "hallucinations_before": before,
            "hallucinations_after": after,
            "p_summary_before": p_before,
            "p_summary": p_after,
            "threshold": s.factored_threshold,
            "judge_model": judge,
            "critique_model": critique_model,
        }
        flags = []
        if references is not None and not references.passed:
            flags.append("final_references_failed")
        if p_after is not None and p_after < s.factored_threshold:
            flags.append("factored_below_threshold")
        if any(c["verdict"] == UNVERIFIED and c["refs"] for c in claims):
            flags.append("factored_incomplete")
        return Outcome(
            status="flagged" if flags else "ok", text=text, flags=flags, references=references, claims=claims
        )

    # --- the self-correction baseline (Factored Verification §4.1, A.4, A.5) -------------

    def selfcorrect(self, context: Context) -> Outcome:
        """Draft, then the generation model's own harsh feedback on the whole draft (not
        claim by claim), then its revision from that feedback, whatever the feedback
        says, as the paper's baseline does. The judge verifies draft and revision claim by
        claim, so hallucinations before and after compare with Factored Verification's."""
        s = self.spec.settings["selfcorrect"]
        judge, _ = factored_models(s)
        text = self.generate(s, context)
        claims = self.verify_claims("selfcorrect:judge", text, s, model=judge)
        before, p_before = hallucinations(claims), summary_probability(claims)
        draft_references = self.check("references", text, context)
        result = self.call(
            "selfcorrect:feedback",
            "self_correction_feedback",
            {"document": context.text, "summary": text},
            s.model,
            _verify_params(s),
        )
        parsed = parse_json_object(result.text)
        feedback = str(parsed.get("feedback") or "").strip() if isinstance(parsed, dict) else result.text.strip()
        if not feedback or placeholder_problem(feedback, prompt_id="self_correction_feedback"):
            result.record(f"the answer held no feedback ({excerpt(result.text)})")
            self.note("selfcorrect:feedback", problem="no feedback: the draft is the summary")
            return self.judged(s, text, draft_references, claims, before, p_before, judge, s.model)
        result.record(well_formed=isinstance(parsed, dict))
        self.note("selfcorrect:feedback", feedback=feedback)
        self.keep_draft(text, claims, draft_references, s)
        revision = self.call(
            "selfcorrect:revise",
            "self_correction_revise",
            {"context": context.text, "summary": text, "feedback": feedback},
            s.model,
            _generation_params(s),
        )
        revised = self.text_of(revision, previous=text)
        report = self.check("references:final", revised, context)
        claims = self.verify_claims("selfcorrect:rejudge", revised, s, model=judge)
        return self.judged(s, revised, report, claims, before, p_before, judge, s.model)

    def sources_for(self, refs: list[str]) -> str:
        return "\n".join(context_line(text, ref) for text, ref in self.sentences if ref in refs)

    def decompose(self, step: str, sentence: str, model: str, params: dict, *, whole: str = "sentence") -> list[str]:
        """The claims an LLM finds in a text (the paper's appendix A.1.1). An unusable
        answer leaves [] (the caller checks the `whole` text otherwise), and says so on
        the call."""
        result = self.call(step, "factored_decompose", {"text": sentence}, model, params)
        found, well_formed = read_claims(result.text)
        fallback = "the sentence was checked whole" if whole == "sentence" else "its sentences were checked"
        if not found:
            result.record(f"no list of claims ({excerpt(result.text)}); {fallback}")
            return []
        kept, left_out = meaningful_claims(found)
        if not kept:
            result.record(f"no claim with content ({'; '.join(left_out.values())}); {fallback}")
            return []
        if left_out:
            self.note(step, left_out=left_out)
        result.record(well_formed=well_formed and not left_out)
        return kept

    def decomposed_claims(self, step: str, text: str, claims: list[dict], model: str, params: dict, over: str):
        """The claims of `text` as an LLM decomposes it: each cited sentence on its own
        (`over="sentences"`), each claim keeping its sentence's span and references; or the
        whole text at once (`over="summary"`, the paper's A.1.1), each claim checked against
        the references it names itself, else against every reference the text cites. An
        unusable decomposition leaves the sentences (or the sentence) as the claims."""
        if over == "sentences":
            claims = [
                {**c, "text": part}
                for c in claims
                for part in (
                    (self.decompose(step, c["text"], model, params) or [c["text"]]) if c["refs"] else [c["text"]]
                )
            ]
        else:
            cited = list(dict.fromkeys(r for c in claims for r in c["refs"]))
            parts = self.decompose(step, text, model, params, whole="summary") if cited else []
            if parts:
                claims = [
                    {
                        **sentence_claims(part, self.refs)[0],
                        "text": part,
                        "start": 0,
                        "end": len(text),
                        "refs": list(dict.fromkeys(cited_refs(part, self.refs))) or cited,
                    }
                    for part in parts
                ]
        for index, claim in enumerate(claims):
            claim["index"] = index
        return claims

    def verify_claims(
        self,
        step: str,
        text: str,
        s: PipelineSettings,
        *,
        model: str | None = None,
        claims_mode: str = "sentences",
        decompose_over: str = "sentences",
        check: str = "zero_shot",
    ) -> list[dict]:
        """Each claim of `text` checked against the sources it cites only. Claims are the
        sentences, or (`claims_mode="decomposed"`) the claims an LLM finds in each cited
        sentence or in the whole text (`decompose_over`, see decomposed_claims). The check
        is the zero-shot prompt with reasoning and quotes (`factored_verify`), or
        (`check="few_shot"`) the paper's few-shot prompt of appendix A.1.2
        (`factored_verify_few_shot`), which gives a verdict without a critique."""
        model = model or s.model
        claims = sentence_claims(text, self.refs)
        if claims_mode == "decomposed":
            claims = self.decomposed_claims(f"{step}:decompose", text, claims, model, _verify_params(s), decompose_over)
        verify_prompt = "factored_verify_few_shot" if check == "few_shot" else "factored_verify"
        known = {ref for _, ref in self.sentences}
        for claim in claims:
            if not self._unverifiable(claim, known):
                self._verify_claim(step, verify_prompt, claim, model, s)
        self.note(
            step,
            text=text,
            verdicts=[
                {"verdict": c["verdict"], "probability": c["probability"], "explanation": c["explanation"]}
                for c in claims
            ],
        )
        return claims

    def _unverifiable(self, claim: dict, known: set[str]) -> bool:
        """Marks a claim that is not checked (uncited, citing what the context lacks, or
        stating nothing) with its verdict and reason; True for such a claim."""
        refs = claim["refs"]
        if not refs:
            # The paper checks only cited claims; an uncited one is left unverified.
            claim.update(
                verdict=UNVERIFIED, explanation="No citation: not checked.", probability=None, unchecked="uncited"
            )
            return True
        missing = [r for r in refs if r not in known]
        if missing:
            claim.update(
                verdict=NOT_SUPPORTED,
                explanation=f"Cites {', '.join(missing)}, which the context does not contain.",
                probability=0.0,
            )
            return True
        empty = meaning_problem(claim["text"], what="claim")
        if empty:
            # A "claim" that is only a reference or a number and unit states nothing a
            # source could support: checking it would count a vacuous "yes".
            claim.update(
                verdict=UNVERIFIED, explanation=f"Not checked: {empty}.", probability=None, unchecked="no_content"
            )
            return True
        return False

    def _verify_claim(self, step: str, verify_prompt: str, claim: dict, model: str, s: PipelineSettings) -> None:
        """Asks the checker about one claim against the sources it cites; the claim gets
        the verdict, the critique and P(supported) from the answer's logprobs."""
        result = self.call(
            step,
            verify_prompt,
            {"sources": self.sources_for(claim["refs"]), "claim": claim["text"]},
            model,
            _verify_params(s),
            logprobs=True,
        )
        verdict, critique = parse_claim_verdict(result.text)
        parsed = parse_json_object(result.text)
        reasoning = as_text(parsed.get("critique")) if isinstance(parsed, dict) else ""
        copied = reasoning and placeholder_problem(reasoning, prompt_id="factored_verify", what="critique")
        if copied:
            # The prompt's example sent back ("critique": "...", "supported": "yes") is no verdict.
            verdict = UNVERIFIED
        no_verdict = f"the answer had no yes/no verdict ({excerpt(result.text)})" if verdict == UNVERIFIED else ""
        problem = result.record(
            copied or no_verdict,
            well_formed=isinstance(parsed, dict) and parsed.get("supported") in ("yes", "no") and not copied,
        )
        if verdict == UNVERIFIED:
            critique = "The checker's answer had no yes/no verdict."
            claim.update(unchecked="no_verdict", problem=problem)
        probability = yes_probability(result.logprobs, verdict) if verdict != UNVERIFIED else None
        claim.update(verdict=verdict, explanation=critique, probability=probability)

    # --- the whole run --------------------------------------------------------------

    def run(self) -> Outcome:
        first = self.spec.settings[self.spec.stages[0]]
        context = self.context(first)
        if context.skipped:
            return Outcome(status="skipped", flags=["too_few_sentences"], skip_reason=context.skipped, trace=self.trace)
        if self.spec.stages[0] == "litsumm":
            outcome = self.litsumm(context)
        elif self.spec.stages[0] == "selfcorrect":
            outcome = self.selfcorrect(context)
        else:
            text = self.generate(first, context)
            outcome = Outcome(status="ok", text=text, attempts=1, references=self.check("references", text, context))
        if "factored" in self.spec.stages:
            verified = self.factored(outcome.text, context, outcome.references)
            verified.flags = list(dict.fromkeys([*outcome.flags, *verified.flags]))
            verified.status = "flagged" if verified.flags else "ok"
            verified.attempts = outcome.attempts
            outcome = verified
        if self.truncated:
            outcome.flags = [*outcome.flags, "output_truncated"]
            outcome.status = "flagged"
        outcome.trace = self.trace
        return outcome
