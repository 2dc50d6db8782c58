"""Hallucination detectors and their benchmark on HaluEval's summarisation layout
(Factored Verification, seed 004, section 4 and Table 1).

A detector gives P(faithful) for a (document, summary) pair:
- `factored`: the summary's sentences as claims, each checked against the document with
  the `factored_verify` prompt; P(summary) = the product of P(supported) (the paper's
  independence assumption). A sentence the judge answers unusably makes the pair a failure.
- `judge`: one prompt asks whether the whole summary is supported;
- `few_shot`: the same with worked examples (one faithful and one hallucinated pair from
  the calibration split, never from the pairs it is tested on);
- `cot`: the judge asked to reason statement by statement before concluding;
- `self_correction`: the self-correction baseline's critique (the paper's A.4.1): the model
  writes a harsh feedback on the whole summary's factual accuracy, then says whether every
  claim is supported.
`factored` takes its claims from the summary's sentences, or (`claims="decomposed"`) from
an LLM's decomposition of the summary (appendix A.1.1, prompt `factored_decompose`). Every
detector asks the judge model (GENERATION_MODEL_FACTORED_JUDGE).
P(supported) comes from the yes/no token's logprobs when the endpoint gives them, else 1
or 0 from the verdict (generation.verdicts.yes_probability).

The benchmark: each HaluEval record gives two pairs (document with `right_summary`,
label faithful; with `hallucinated_summary`, label hallucinated). Records are shuffled with
a seed and split: the calibration records (the paper: 1,000 of 5,000; here 20% by
default) fit the threshold, the rest measure accuracy. The threshold
is the midpoint between consecutive calibration scores (or below/above all of them) that
maximises calibration accuracy of "faithful when score >= threshold"; among equally
accurate ones, the one nearest 0.5. Accuracy on the test pairs comes with a Wilson 95%
interval. A pair whose score could not be obtained (the call failed after its retries,
an unusable answer) is counted as a failure and left out of both, never scored.
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from core.exceptions import ApplicationError
from generation.answer_text import excerpt, parse_json_object
from generation.claims import meaningful_claims, read_claims, sentence_claims
from generation.conf import claim_mode, factored_models, pipeline_settings
from generation.llm import Gateway, LLMError
from generation.verdicts import UNVERIFIED, parse_claim_verdict, yes_probability

DETECTORS = ("factored", "judge", "few_shot", "cot", "self_correction")
PROMPTS = {
    "judge": "detect_judge",
    "few_shot": "detect_few_shot",
    "cot": "detect_cot",
    "self_correction": "self_correction_feedback",
}
MAX_DOCUMENT_CHARS = 20_000


@dataclass(frozen=True)
class Pair:
    record: int  # line number of the record in the file
    document: str
    summary: str
    faithful: bool


@dataclass
class Scored:
    pair: Pair
    score: float | None
    error: str = ""


def read_halueval(lines: Iterable[str]) -> list[tuple[int, str, str, str]]:
    """(line, document, right_summary, hallucinated_summary) of each record, or an
    ApplicationError naming the line and field."""
    records = []
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        try:
            data = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise ApplicationError(f"line {number}: not valid JSON ({exc.msg})") from None
        if not isinstance(data, dict):
            raise ApplicationError(f"line {number}: each line must be a JSON object")
        values = []
        for name in ("document", "right_summary", "hallucinated_summary"):
            value = data.get(name)
            if not isinstance(value, str) or not value.strip():
                raise ApplicationError(f'line {number}: field "{name}": must be a non-empty string')
            values.append(value.strip())
        records.append((number, *values))
    if not records:
        raise ApplicationError("the file holds no records")
    return records


def split_records(records: Sequence, *, calibration: int, seed: int) -> tuple[list, list]:
    """(calibration records, test records): a seeded shuffle, the first `calibration` for
    the threshold."""
    if not 1 <= calibration < len(records):
        raise ApplicationError(f"the calibration split must hold 1 to {len(records) - 1} records, not {calibration}")
    order = list(records)
    random.Random(seed).shuffle(order)
    return order[:calibration], order[calibration:]


def pairs_of(records: Sequence) -> list[Pair]:
    return [
        pair
        for line, document, right, hallucinated in records
        for pair in (Pair(line, document, right, True), Pair(line, document, hallucinated, False))
    ]


def fit_threshold(scores: Sequence[float], labels: Sequence[bool]) -> tuple[float, float]:
    """(threshold, calibration accuracy) of "faithful when score >= threshold" (module
    docstring: midpoints, the most accurate, ties to the one nearest 0.5)."""
    values = sorted(set(scores))
    candidates = [values[0] - 1e-9] + [(a + b) / 2 for a, b in zip(values, values[1:], strict=False)]
    candidates.append(values[-1] + 1e-9)

    def accuracy(t: float) -> float:
        return sum((s >= t) == y for s, y in zip(scores, labels, strict=True)) / len(scores)

    best = max(candidates, key=lambda t: (round(accuracy(t), 12), -abs(t - 0.5)))
    return best, accuracy(best)


def wilson_interval(successes: int, n: int, z: float = 1.959963984540054) -> tuple[float, float]:
    """Wilson score interval for a proportion (95% by default)."""
    if n == 0:
        return (math.nan, math.nan)
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return (centre - half, centre + half)


class Detector:
    def __init__(self, name: str, *, gateway: Gateway, examples: Sequence[Pair] = (), claims: str = "sentences"):
        if name not in DETECTORS:
            raise ApplicationError(f"unknown detector {name!r}; use one of {', '.join(DETECTORS)}")
        self.name, self.gateway, self.examples = name, gateway, list(examples)
        self.settings = pipeline_settings("factored")
        self.model = factored_models(self.settings)[0]  # the judge
        self.claims = claim_mode(claims)

    def claim_texts(self, summary: str) -> list[str]:
        """The summary's claims: its sentences, or the claims an LLM decomposes it into
        (appendix A.1.1); an unusable decomposition makes the pair a failure."""
        if self.claims == "sentences":
            found = [c["text"] for c in sentence_claims(summary)]
            kept, left_out = meaningful_claims(found)
            if not kept:
                raise ValueError(f"the summary had no claim to check ({'; '.join(left_out.values()) or 'no text'})")
            return kept
        result = self.gateway.complete(
            step="detect:factored:decompose",
            prompt="factored_decompose",
            variables={"text": summary},
            model=self.model,
            params={"temperature": 0, "max_tokens": self.settings.max_tokens},
        )
        found, well_formed = read_claims(result.text)
        if not found:
            raise ValueError(result.record(f"the answer held no list of claims ({excerpt(result.text)})"))
        kept, left_out = meaningful_claims(found)
        if not kept:
            raise ValueError(result.record(f"the answer held no claim with content ({'; '.join(left_out.values())})"))
        result.record(well_formed=well_formed and not left_out)
        return kept

    def _ask(self, step: str, prompt: str, variables: dict) -> float:
        result = self.gateway.complete(
            step=step,
            prompt=prompt,
            variables=variables,
            model=self.model,
            params={"temperature": 0, "max_tokens": self.settings.max_tokens},
            logprobs=True,
        )
        verdict, _ = parse_claim_verdict(result.text)
        if verdict == UNVERIFIED:
            raise ValueError(result.record(f"the answer had no yes/no verdict ({excerpt(result.text)})"))
        parsed = parse_json_object(result.text)
        result.record(well_formed=isinstance(parsed, dict) and parsed.get("supported") in ("yes", "no"))
        return yes_probability(result.logprobs, verdict)

    def score(self, pair: Pair) -> float:
        document = pair.document[:MAX_DOCUMENT_CHARS]
        if self.name == "factored":
            probabilities = [
                self._ask(f"detect:factored:{i}", "factored_verify", {"sources": document, "claim": claim})
                for i, claim in enumerate(self.claim_texts(pair.summary))
            ]
            return math.prod(probabilities) if probabilities else 1.0
        variables = {"document": document, "summary": pair.summary}
        if self.name == "few_shot":
            variables["examples"] = "\n\n".join(
                f"Example {i}.\nDocument:\n{e.document[:3000]}\n\nSummary:\n{e.summary}\n\n"
                f'Answer: {{"supported": "{"yes" if e.faithful else "no"}"}}'
                for i, e in enumerate(self.examples, start=1)
            )
        return self._ask(f"detect:{self.name}", PROMPTS[self.name], variables)


def score_pairs(
    detector: Detector, pairs: Sequence[Pair], progress: Callable[[int], None] | None = None
) -> list[Scored]:
    scored = []
    for i, pair in enumerate(pairs, start=1):
        try:
            scored.append(Scored(pair, detector.score(pair)))
        except (LLMError, ValueError) as exc:
            scored.append(Scored(pair, None, exc.message if isinstance(exc, LLMError) else str(exc)))
        if progress is not None:
            progress(i)
    return scored


@dataclass
class BenchmarkResult:
    detector: str
    calibration_records: int
    test_records: int
    threshold: float
    calibration_accuracy: float
    accuracy: float
    ci_low: float
    ci_high: float
    n_test_pairs: int
    failures: int
    failure_examples: list[str] = field(default_factory=list)

    def as_dict(self) -> dict:
        return self.__dict__.copy()


def benchmark(
    *,
    records: Sequence,
    detector_name: str,
    calibration: int,
    seed: int,
    gateway: Gateway,
    progress: Callable[[int, int], None] | None = None,
    claims: str = "sentences",
) -> BenchmarkResult:
    calibration_records, test_records = split_records(records, calibration=calibration, seed=seed)
    calibration_pairs = pairs_of(calibration_records)
    examples = [calibration_pairs[0], calibration_pairs[1]] if detector_name == "few_shot" else []
    detector = Detector(detector_name, gateway=gateway, examples=examples, claims=claims)
    # The few-shot examples are not scored: a detector is never calibrated on its own examples.
    fit_pairs = [p for p in calibration_pairs if p not in examples]
    test_pairs = pairs_of(test_records)
    total = len(fit_pairs) + len(test_pairs)
    fitted = score_pairs(detector, fit_pairs, progress and (lambda done: progress(done, total)))
    usable = [s for s in fitted if s.score is not None]
    if not usable:
        raise ApplicationError("no calibration pair could be scored: " + (fitted[0].error if fitted else "no pairs"))
    threshold, calibration_accuracy = fit_threshold([s.score for s in usable], [s.pair.faithful for s in usable])
    tested = score_pairs(detector, test_pairs, progress and (lambda done: progress(len(fit_pairs) + done, total)))
    measured = [s for s in tested if s.score is not None]
    correct = sum((s.score >= threshold) == s.pair.faithful for s in measured)
    low, high = wilson_interval(correct, len(measured))
    failures = [s for s in [*fitted, *tested] if s.score is None]
    return BenchmarkResult(
        detector=detector_name,
        calibration_records=len(calibration_records),
        test_records=len(test_records),
        threshold=threshold,
        calibration_accuracy=calibration_accuracy,
        accuracy=correct / len(measured) if measured else math.nan,
        ci_low=low,
        ci_high=high,
        n_test_pairs=len(measured),
        failures=len(failures),
        failure_examples=[f"line {s.pair.record}: {s.error}" for s in failures[:5]],
    )
