"""Automatic evaluators: runnable, versioned scorers whose scores are stored beside the
human ratings (docs/evaluators.md).

An evaluator has a name, a version (a hash of its model, parameters and prompt versions)
and produces, per summary, named scores with their provenance (the LLM call, the
rationale). Scores are stored (EvaluationScore), never recomputed silently: the same
settings resume a run, other settings make a new run. The study report reads the newest
run of each evaluator as metric columns `eval.<evaluator>.<name>` and correlates them with
every human question (stats.metaeval_questions).

Built in:
- `factpico_fulltext`: FactPICO's LLM full-text evaluation (appendix H.2 and H.5): for
  each PICO element a 1-5 rating of the summary against the abstract (1 accurate ... 4
  missing, 5 N/A) and for each Evidence Inference finding of the source a 1-4 rating of
  its result in the summary. As the paper does (H.1), ratings are flipped to 5 - rating,
  so higher is better: 4 accurate ... 1 missing. N/A (5) is stored as N/A, not as the 0
  that 5 - 5 would give; `evidence` is the mean over the source's findings (each also
  stored as `evidence:<n>`). An answer without "Rating: <n>" in range is a failure with
  the model's text, never a score.
- `factpico_extraction`: FactPICO's PICO-R extraction pipeline (H.3, H.4, H.6).
- `factored_verification`: P(summary), unsupported claims, supported share.
- `reference`: the reference metrics of stats.metrics (no model).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from django.db import transaction
from django.utils import timezone

from annotate.models import Study, Summary
from core.exceptions import ApplicationError
from generation.answer_text import as_text, excerpt, parse_json_object
from generation.conf import pipeline_settings
from generation.evaluator_versions import REFERENCE_EVALUATOR, config_version, reference_config
from generation.llm import Gateway, LLMError
from generation.meaning import placeholder_problem
from generation.models import EvaluationRun, EvaluationScore, JudgeRun
from generation.prompting import prompt_versions
from generation.run_records import recording

RATING = re.compile(r"rating\s*[:=]\s*\**\s*(\d+)", re.IGNORECASE)
PICO_INFO = {
    "population": (
        "Population in PICO describes the type of subjects involved in the trial. Critical descriptors for "
        "population include important demographic information and any specific shared conditions."
    ),
    "intervention": "Intervention in PICO describes the treatments considered in the trial.",
    "comparator": (
        "Comparator in PICO describes the alternative treatment to which the intervention is being compared against."
    ),
    "outcome": (
        "Outcome in PICO describes the outcome measures used to determine results of the trial. If the primary "
        "outcome measures are not be mentioned, then the summary is critically flawed."
    ),
}


@dataclass(frozen=True)
class Score:
    name: str
    value: float | None
    status: str
    rationale: str = ""
    error: str = ""
    call_id: int | None = None


# An extraction longer than this goes into the rating prompts cut (a passage's quotes are
# a few hundred words; a model that does not stop would otherwise fill the next prompt).
MAX_EXTRACTION_CHARS = 8000


def read_rating(text: str, highest: int) -> tuple[int, str]:
    """(rating, rationale) from an answer: the JSON the schema asks for ({"rating": n,
    "rationale": "..."}), else the last "Rating: n" of the text (FactPICO's own form). A
    missing rating or one outside 1..highest is a ValueError saying so in words."""
    parsed = parse_json_object(text)
    raw = parsed.get("rating") if parsed else None
    if isinstance(raw, str) and raw.strip().isdigit():
        raw = int(raw.strip())
    if isinstance(raw, int) and not isinstance(raw, bool):
        if not 1 <= raw <= highest:
            raise ValueError(f"the rating {raw} is outside 1 to {highest}")
        return raw, as_text(parsed.get("rationale")) or text.strip()
    found = RATING.findall(text)
    if not found:
        raise ValueError(f"the answer had no rating from 1 to {highest} ({excerpt(text)})")
    rating = int(found[-1][:6])
    if not 1 <= rating <= highest:
        raise ValueError(f"the rating {rating} is outside 1 to {highest}")
    return rating, text.strip()


class FactPicoFullText:
    name = "factpico_fulltext"
    prompts = ("system", "factpico_pico", "factpico_evidence")

    def __init__(self, gateway: Gateway):
        self.gateway = gateway
        s = pipeline_settings("factored")
        self.model = s.model
        self.params = {"temperature": 0, "max_tokens": min(s.max_tokens, 512)}

    def config(self) -> dict:
        return {
            "evaluator": self.name,
            "model": self.model,
            "params": self.params,
            "prompts": prompt_versions(list(self.prompts)),
        }

    def _rate(self, name: str, prompt: str, variables: dict, highest: int) -> Score:
        try:
            result = self.gateway.complete(
                step=f"evaluate:{self.name}:{name}",
                prompt=prompt,
                variables=variables,
                model=self.model,
                params=self.params,
            )
        except LLMError as exc:
            return Score(name, None, EvaluationScore.Status.FAILED, error=exc.message)
        try:
            rating, rationale = read_rating(result.text, highest)
        except ValueError as exc:
            return Score(
                name, None, EvaluationScore.Status.FAILED, error=result.record(str(exc)), call_id=result.call.pk
            )
        parsed = parse_json_object(result.text)
        result.record(well_formed=isinstance(parsed, dict) and isinstance(parsed.get("rating"), int))
        rationale = rationale[:4000]
        if highest == 5 and rating == 5:
            return Score(name, None, EvaluationScore.Status.NOT_APPLICABLE, rationale=rationale, call_id=result.call.pk)
        return Score(name, float(5 - rating), EvaluationScore.Status.OK, rationale=rationale, call_id=result.call.pk)

    def evaluate(self, summary: Summary, done: set[str]) -> list[Score]:
        source = summary.source
        scores = []
        for element, info in PICO_INFO.items():
            if element not in done:
                variables = {"pico_info": info, "element": element, "abstract": source.text, "summary": summary.text}
                scores.append(self._rate(element, "factpico_pico", variables, 5))
        findings = list(source.findings.order_by("index"))
        per_finding = []
        for finding in findings:
            name = f"evidence:{finding.index}"
            if name in done:
                continue
            per_finding.append(
                self._rate(name, "factpico_evidence", {"span": finding.evidence, "summary": summary.text}, 4)
            )
        return scores + per_finding

    def aggregate(self, run: EvaluationRun, summary: Summary) -> list[Score]:
        """`evidence`: the mean of the summary's per-finding scores in this run."""
        rows = list(EvaluationScore.objects.filter(run=run, summary=summary, name__startswith="evidence:"))
        if not rows:
            return []
        values = [r.value for r in rows if r.status == EvaluationScore.Status.OK]
        if values and len(values) == len(rows):
            return [Score("evidence", sum(values) / len(values), EvaluationScore.Status.OK, "mean over findings")]
        return [Score("evidence", None, EvaluationScore.Status.FAILED, error="a finding could not be rated")]


class FactPicoExtraction(FactPicoFullText):
    """FactPICO's PICO-R extraction pipeline (section 5 and appendix H.3, H.4, H.6): the
    model first pulls direct quotes of the PICO elements from the abstract and from the
    summary (H.4), and of the result inferences from the summary (H.6); then it rates each
    PICO element from the two extractions only (H.3, 1-5 with 5 N/A) and each Evidence
    Inference finding of the source against the summary's extracted results (H.6, 1-4).
    Ratings are flipped as in FactPicoFullText (H.1). An empty or failed extraction makes
    the ratings that need it failures, never scores. The abstract's extraction is asked once
    per source within a run of the command (and again when a run is resumed)."""

    name = "factpico_extraction"
    prompts = (
        "system",
        "factpico_extract_pico",
        "factpico_pico_only",
        "factpico_extract_evidence",
        "factpico_evidence_extracted",
    )

    def __init__(self, gateway: Gateway):
        super().__init__(gateway)
        self._source_pico: dict[int, str] = {}

    def _extract(self, name: str, prompt: str, passage: str) -> tuple[str | None, str]:
        """(the extraction, or None; the error)."""
        try:
            result = self.gateway.complete(
                step=f"evaluate:{self.name}:{name}",
                prompt=prompt,
                variables={"passage": passage},
                model=self.model,
                params={**self.params, "max_tokens": max(self.params["max_tokens"], 768)},
            )
        except LLMError as exc:
            return None, exc.message
        text = result.text.strip()
        empty = text and placeholder_problem(text, prompt_id=prompt, what=f"{name} extraction")
        if not text:
            return None, result.record(f"the {name} extraction came back empty")
        if empty:
            return None, result.record(empty)
        result.record(well_formed=len(text) <= MAX_EXTRACTION_CHARS)
        return text[:MAX_EXTRACTION_CHARS], ""

    def evaluate(self, summary: Summary, done: set[str]) -> list[Score]:
        source = summary.source
        scores: list[Score] = []
        elements = [e for e in PICO_INFO if e not in done]
        if elements:
            if source.pk not in self._source_pico:
                extracted, error = self._extract("extract_pico_abstract", "factpico_extract_pico", source.text)
                if extracted is None:
                    return [Score(e, None, EvaluationScore.Status.FAILED, error=error) for e in elements]
                self._source_pico[source.pk] = extracted
            summary_pico, error = self._extract("extract_pico_summary", "factpico_extract_pico", summary.text)
            for element in elements:
                if summary_pico is None:
                    scores.append(Score(element, None, EvaluationScore.Status.FAILED, error=error))
                    continue
                variables = {
                    "pico_info": PICO_INFO[element],
                    "element": element,
                    "abstract": self._source_pico[source.pk],
                    "summary": summary_pico,
                }
                scores.append(self._rate(element, "factpico_pico_only", variables, 5))
        findings = [f for f in source.findings.order_by("index") if f"evidence:{f.index}" not in done]
        if findings:
            results, error = self._extract("extract_evidence_summary", "factpico_extract_evidence", summary.text)
            for finding in findings:
                name = f"evidence:{finding.index}"
                if results is None:
                    scores.append(Score(name, None, EvaluationScore.Status.FAILED, error=error))
                    continue
                variables = {"span": finding.evidence, "extracted": results}
                scores.append(self._rate(name, "factpico_evidence_extracted", variables, 4))
        return scores


class FactoredVerification:
    """Factored Verification as a stored evaluator of any summary (or answer) whose
    sentences cite its source's references: each cited sentence checked against the
    sentences it cites only (generation.pipelines, prompt `factored_verify`). Scores:
    `p_summary` (the product of P(supported); N/A when no sentence cites anything),
    `unsupported` (claims judged not supported) and `supported_share`."""

    name = "factored_verification"

    def __init__(
        self, gateway: Gateway, *, claims: str | None = None, check: str | None = None, decompose: str | None = None
    ):
        from generation.conf import check_mode, claim_mode, decompose_over, factored_models

        self.gateway = gateway
        self.settings = pipeline_settings("factored")
        self.model = factored_models(self.settings)[0]  # the judge
        self.claims = claim_mode(claims)
        self.check = check_mode(check)
        self.decompose = decompose_over(decompose) if self.claims == "decomposed" else ""
        verify = "factored_verify_few_shot" if self.check == "few_shot" else "factored_verify"
        self.prompts = ("system", verify) + (("factored_decompose",) if self.claims == "decomposed" else ())

    def config(self) -> dict:
        from generation.pipelines import _verify_params

        return {
            "evaluator": self.name,
            "model": self.model,
            "params": _verify_params(self.settings),
            "prompts": prompt_versions(list(self.prompts)),
            # Each option only when not what it was before the option existed, so that runs
            # made before it keep their version: claims by sentence, the zero-shot check, a
            # decomposition sentence by sentence.
            **({"claims": self.claims} if self.claims != "sentences" else {}),
            **({"check": self.check} if self.check != "zero_shot" else {}),
            **({"decompose": self.decompose} if self.decompose == "summary" else {}),
        }

    def evaluate(self, summary: Summary, done: set[str]) -> list[Score]:
        from generation.claims import summary_probability
        from generation.pipelines import Runner, pipeline_spec
        from generation.verdicts import NOT_SUPPORTED, SUPPORTED

        if {"p_summary", "unsupported", "supported_share"} <= done:
            return []
        runner = Runner(spec=pipeline_spec("factored"), source=summary.source, job=None, gateway=self.gateway)
        try:
            claims = runner.verify_claims(
                f"evaluate:{self.name}",
                summary.text,
                self.settings,
                model=self.model,
                claims_mode=self.claims,
                decompose_over=self.decompose or "sentences",
                check=self.check,
            )
        except LLMError as exc:
            return [
                Score(n, None, EvaluationScore.Status.FAILED, error=exc.message)
                for n in ("p_summary", "unsupported", "supported_share")
            ]
        names = ("p_summary", "unsupported", "supported_share")
        verified = [c for c in claims if c["verdict"] in (SUPPORTED, NOT_SUPPORTED)]
        unanswered = [c for c in claims if c.get("unchecked") == "no_verdict"]
        if unanswered:
            # A score over the claims that happened to get a verdict would count the others
            # as absent: the summary has no usable verification until every claim has one.
            problems = "; ".join(dict.fromkeys(c.get("problem") or c["explanation"] for c in unanswered))
            error = f"no usable verdict for {len(unanswered)} of {len(verified) + len(unanswered)} claim(s): {problems}"
            return [Score(n, None, EvaluationScore.Status.FAILED, error=error[:4000]) for n in names]
        if not verified:
            na = EvaluationScore.Status.NOT_APPLICABLE
            if any(c["refs"] for c in claims):
                reason = "no cited sentence has content words to check (only references, numbers or units)"
            else:
                reason = "no sentence cites a reference of the source"
            return [Score(n, None, na, rationale=reason) for n in names]
        unsupported = sum(c["verdict"] == NOT_SUPPORTED for c in verified)
        verdicts = "; ".join(f"{c['verdict']}: {c['text'][:80]}" for c in verified)[:4000]
        ok = EvaluationScore.Status.OK
        p = summary_probability(claims)
        return [
            Score("p_summary", p, ok, verdicts)
            if p is not None
            else Score("p_summary", None, EvaluationScore.Status.NOT_APPLICABLE),
            Score("unsupported", float(unsupported), ok, verdicts),
            Score("supported_share", (len(verified) - unsupported) / len(verified), ok, verdicts),
        ]

    def aggregate(self, run: EvaluationRun, summary: Summary) -> list[Score]:
        return []


class ReferenceMetrics:
    """The reference metrics of stats.metrics (ROUGE-1/2/L of the summary against its
    source, Flesch-Kincaid grades and their change, length, MiniLM similarity when the ML
    extra is installed, and for answers to clinical questions ROUGE-L, BLEU and chrF
    against the gold answer), stored like any evaluator's scores. No model is called, so it
    runs without an API key. Its version is a hash of the metrics' definition and package
    versions (stats.metrics.reference_config); the study report takes these columns
    from the run of today's version and computes only the summaries it lacks."""

    name = REFERENCE_EVALUATOR
    needs_llm = False

    def __init__(self, gateway: Gateway | None = None):
        self._gold: dict[int, dict[str, str]] = {}

    def config(self) -> dict:
        return reference_config()

    def _gold_texts(self, study) -> dict[str, str]:
        if study.pk not in self._gold:
            from literature.selectors import gold_answers

            self._gold[study.pk] = gold_answers(study)
        return self._gold[study.pk]

    def evaluate(self, summary: Summary, done: set[str]) -> list[Score]:
        import math

        from stats.metrics import reference_scores

        if "rougeL" in done:
            return []
        gold = self._gold_texts(summary.study).get(str(summary.uuid))
        scores = []
        for name, value in reference_scores(summary.text, summary.source.text, gold).items():
            if math.isfinite(value):
                scores.append(Score(name, value, EvaluationScore.Status.OK))
            else:
                scores.append(
                    Score(name, None, EvaluationScore.Status.NOT_APPLICABLE, rationale="undefined for this text")
                )
        return scores

    def aggregate(self, run: EvaluationRun, summary: Summary) -> list[Score]:
        return []


EVALUATORS = {
    FactPicoFullText.name: FactPicoFullText,
    FactPicoExtraction.name: FactPicoExtraction,
    FactoredVerification.name: FactoredVerification,
    ReferenceMetrics.name: ReferenceMetrics,
}


def needs_llm(name: str) -> bool:
    """Whether the evaluator calls a model (and so needs an API key)."""
    return getattr(EVALUATORS[name], "needs_llm", True)


def evaluator_for(
    name: str, gateway: Gateway, *, claims: str | None = None, check: str | None = None, decompose: str | None = None
):
    """The evaluator; `claims` (sentences or decomposed), `check` (zero_shot or few_shot)
    and `decompose` (summary or sentences) are options of factored_verification only."""
    if name not in EVALUATORS:
        raise ApplicationError(f"unknown evaluator {name!r}; use one of {', '.join(EVALUATORS)}")
    options = {k: v for k, v in {"claims": claims, "check": check, "decompose": decompose}.items() if v is not None}
    if options:
        if name != "factored_verification":
            given = ", ".join(f"--{k}" for k in options)
            raise ApplicationError(f"{given}: options of the factored_verification evaluator only")
        return EVALUATORS[name](gateway, **options)
    return EVALUATORS[name](gateway)


def start_evaluation(*, study: Study, evaluator) -> EvaluationRun:
    config = evaluator.config()
    version = config_version(config)
    run, _ = EvaluationRun.objects.get_or_create(
        study=study, evaluator=evaluator.name, version=version, defaults={"config": config}
    )
    return run


def run_evaluation(
    *,
    study: Study,
    evaluator_name: str,
    summary_keys: Sequence[str] = (),
    limit: int | None = None,
    gateway=None,
    progress: Callable[[int, int], None] | None = None,
    claims: str | None = None,
    check: str | None = None,
    decompose: str | None = None,
) -> EvaluationRun:
    """Score the study's summaries (all, `summary_keys`, at most `limit`), skipping the
    scores the run already has (a resumed run asks only for what is missing; a failed
    score is asked again). `progress(done, total)` is called after each summary."""
    evaluator = evaluator_for(
        evaluator_name,
        gateway or (Gateway() if needs_llm(evaluator_name) else None),
        claims=claims,
        check=check,
        decompose=decompose,
    )
    run = start_evaluation(study=study, evaluator=evaluator)
    with recording(run):
        _score_summaries(run, evaluator, study, summary_keys, limit, progress)
    run.refresh_from_db()
    return run


def _score_summaries(run, evaluator, study, summary_keys, limit, progress) -> None:
    summaries = Summary.objects.filter(study=study).select_related("source", "study").order_by("key")
    if summary_keys:
        summaries = summaries.filter(key__in=summary_keys)
    summaries = list(summaries[:limit] if limit is not None else summaries)
    for position, summary in enumerate(summaries, start=1):
        existing = {row.name: row for row in EvaluationScore.objects.filter(run=run, summary=summary)}
        done = {name for name, row in existing.items() if row.status != EvaluationScore.Status.FAILED}
        scores = evaluator.evaluate(summary, done)
        with transaction.atomic():
            _store_many(run, summary, scores, existing)
            _store_many(run, summary, evaluator.aggregate(run, summary), existing)
        if progress is not None:
            progress(position, len(summaries))


_SCORE_FIELDS = ("value", "status", "rationale", "error", "call_id")


def _store_many(run: EvaluationRun, summary: Summary, scores: Sequence[Score], existing: dict) -> None:
    """Write a summary's scores in two statements at most: new ones created, changed ones
    updated (the resumed run's failed scores asked again). `existing` is kept current."""
    created, changed = [], []
    for score in scores:
        fields = {
            "value": score.value,
            "status": score.status,
            "rationale": score.rationale,
            "error": score.error,
            "call_id": score.call_id,
        }
        row = existing.get(score.name)
        if row is None:
            row = EvaluationScore(run=run, summary=summary, name=score.name, **fields)
            created.append(row)
            existing[score.name] = row
        elif any(getattr(row, k) != v for k, v in fields.items()):
            for k, v in fields.items():
                setattr(row, k, v)
            row.updated_at = timezone.now()
            changed.append(row)
    EvaluationScore.objects.bulk_create(created)
    if changed:
        EvaluationScore.objects.bulk_update(changed, [*_SCORE_FIELDS, "updated_at"])


# --- what the evaluators page starts: every evaluator, and the rubric judge ---------------


@dataclass(frozen=True)
class AutomaticRun:
    """One kind of run the evaluators page starts: an evaluator that scores summaries, or
    the rubric judge, which answers the study's rubric (generation.judging). The page, the
    task and the command ask it what to do instead of comparing names."""

    name: str
    needs_llm: bool
    start: Callable[[Study], EvaluationRun | JudgeRun]  # the run (resumed if it exists)
    run: Callable[[Study], object]  # what the worker does: score or judge every summary


def automatic_runs() -> dict[str, AutomaticRun]:
    """Every evaluator (by name) and the rubric judge, in the page's order."""
    from generation.judging import JUDGE_NAME, run_judge, start_judge_run

    runs = {
        name: AutomaticRun(
            name=name,
            needs_llm=needs_llm(name),
            start=lambda study, name=name: start_evaluation(
                study=study, evaluator=evaluator_for(name, Gateway() if needs_llm(name) else None)
            ),
            run=lambda study, name=name: run_evaluation(study=study, evaluator_name=name),
        )
        for name in sorted(EVALUATORS)
    }
    runs[JUDGE_NAME] = AutomaticRun(
        name=JUDGE_NAME,
        needs_llm=True,
        start=lambda study: start_judge_run(study=study),
        run=lambda s: run_judge(study=s),
    )
    return runs


def start_automatic_run(*, study: Study, name: str) -> EvaluationRun | JudgeRun:
    """Start (or resume) the evaluator or judge called `name` for the study: checked, with
    the API key it needs, before anything is queued. The caller queues the work
    (generation.tasks.enqueue_automatic_run)."""
    from generation.services import require_api_key

    found = automatic_runs().get(name)
    if found is None:
        raise ApplicationError(f"unknown evaluator {name!r}; use one of {', '.join(automatic_runs())}")
    if found.needs_llm:
        require_api_key()
    return found.start(study)
