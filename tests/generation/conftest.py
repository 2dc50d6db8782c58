import json
import math
import re

import pytest

from annotate.models import Source
from tests.generation.scripted_server import Reply, Request


def make_source(study, key: str, sentences: list[tuple[str, str]], **fields) -> Source:
    text, spans = "", []
    for sentence, ref in sentences:
        text += " " if text else ""
        spans.append([len(text), len(text) + len(sentence), ref])
        text += sentence
    return Source.objects.create(study=study, key=key, text=text, sentence_spans=spans, **fields)


def held_job(source, *, claimed_at, pipeline: str = "litsumm"):
    """A job a worker claimed at `claimed_at` and has not finished (alive or dead)."""
    from generation.models import GenerationJob
    from generation.pipelines import pipeline_spec

    spec = pipeline_spec(pipeline)
    return GenerationJob.objects.create(
        source=source,
        pipeline=spec.name,
        pipeline_version=spec.version,
        config=spec.config,
        status="running",
        claimed_at=claimed_at,
        tries=1,
    )


TRIAL = [
    ("Drug A was compared with placebo in 120 adults with hypertension.", "PMC100"),
    ("Systolic blood pressure fell by 12 mmHg with drug A and by 3 mmHg with placebo.", "PMC100"),
    ("Headache was the most common adverse event.", "PMC100"),
    ("A second trial enrolled 80 older adults.", "PMC200"),
    ("In that trial drug A did not change diastolic pressure.", "PMC200"),
    ("Smith et al. reported no deaths in either trial.", "PMC200"),
]


@pytest.fixture
def trial_source(study):
    return make_source(study, "drug-a", TRIAL, title="Drug A")


# --- replies of a well-behaved model ---------------------------------------------------


def context_lines(request: Request) -> list[str]:
    """The lines of the prompt's "Context...:" section."""
    lines = request.prompt.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("Context") and line.endswith(":")) + 1
    end = next((i for i in range(start, len(lines)) if not lines[i].strip()), len(lines))
    return lines[start:end]


def honest_summary(request: Request) -> Reply:
    """Three context lines copied verbatim: every sentence cited, every fact supported."""
    return Reply(content=" ".join(context_lines(request)[:3]))


def statements(request: Request) -> list[str]:
    return [line for line in request.section("Statements").splitlines() if re.match(r"^\d+\. ", line)]


def all_supported(request: Request) -> Reply:
    verdicts = [
        {"statement": i, "explanation": "The context says so.", "supported": True}
        for i in range(1, len(statements(request)) + 1)
    ]
    return Reply(content=json.dumps({"verdicts": verdicts}))


def claim_answer(answer: str, p_yes: float | None = None, critique: str = "Quoted support.") -> Reply:
    """A factored verification answer; with p_yes, the yes/no token's logprobs."""
    content = json.dumps({"critique": critique, "quotes": [], "revised_claim": "N/A", "supported": answer})
    logprobs = None
    if p_yes is not None:
        p_chosen = p_yes if answer == "yes" else 1 - p_yes
        logprobs = [
            ('{"', -0.01, []),
            ("supported", -0.01, []),
            ('":"', -0.01, []),
            (answer, math.log(p_chosen), [("yes", math.log(p_yes)), ("no", math.log(1 - p_yes))]),
            ('"}', -0.01, []),
        ]
    return Reply(content=content, logprobs=logprobs)


def claim_yes(request: Request) -> Reply:
    return claim_answer("yes", p_yes=0.9)


def honest_model(request: Request) -> Reply:
    """Route every step to a well-behaved answer."""
    if request.step == "generate":
        return honest_summary(request)
    if request.step == "self_consistency":
        return all_supported(request)
    if request.step == "factored_verify":
        return claim_yes(request)
    return Reply(status=500, content=f"honest_model has no answer for {request.step}")
