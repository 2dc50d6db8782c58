"""The junk real models produce, through every command that calls a model.

Each entry of the catalogue answers every step of every command (the scripted server
routes each request by its prompt): empty content; prose where JSON was asked for (a
refusal); JSON of the wrong shape, of the wrong types, of nulls, with numbers out of
range; a query of only stop words or punctuation; an answer cut off at max_tokens in the
middle of its JSON; 60,000 characters; NUL, lone surrogates and direction overrides;
citations [0], [-1] and [99]; JSON inside a code fence; the prompt's own placeholder
(`...`, its JSON shape as shown); claims without content words ("PMC1087853", "10 dB"); an
uncited synthesis; a body that is not UTF-8 or not JSON at all. Whatever the answer, a command
ends without a traceback; every failure, skip, unusable answer and refused score carries
a reason in words (never a bare Python exception name); and nothing stored is text that
`manage.py scan_text` flags.
"""

from __future__ import annotations

import json
import re
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from annotate.models import Finding, Summary
from annotate.selectors.stored_text import bad_stored_text
from generation.models import AnswerJob, EvaluationScore, GenerationJob, JudgeAnswer, LLMCall
from generation.prompting import get_prompt
from literature.models import Question, RetrievedArticle
from tests.generation.conftest import TRIAL, all_supported, claim_answer, honest_summary, make_source
from tests.generation.scripted_server import Reply, Request

pytestmark = pytest.mark.django_db(transaction=True)

CONTROL = "Drug A\x00 lowered\ud800 pressure \u202e[PMC100]."


def good(request: Request) -> str:
    """A well-behaved answer to the request's step (what the fenced and cut-off entries wrap or cut)."""
    step = request.step
    if step in ("generate", "factored_revise", "revise_consistency") or step.startswith("rescue_"):
        return honest_summary(request).content
    if step == "self_consistency":
        return all_supported(request).content
    if step in ("factored_verify", "detect_judge", "detect_few_shot", "detect_cot"):
        return claim_answer("yes").content
    return {
        "question_queries": json.dumps({"queries": ["drug A blood pressure", "drug A hypertension trial"]}),
        "question_relevance": json.dumps({"reason": "It reports drug A's effect on pressure.", "relevant": "yes"}),
        "question_article": "A trial of 120 adults found that drug A lowered pressure; bias not reported.",
        "question_synthesis": json.dumps({"synthesis": "Drug A lowered pressure [1].", "tldr": "Yes [1]."}),
        "rubric_judge": json.dumps(
            {"answers": {"overall": 4, "failure_modes": [], "feedback": "Fine."}, "rationales": {"overall": "Cited."}}
        ),
    }.get(
        step,
        json.dumps({"rating": 1, "rationale": "Described accurately."})
        if "pico" in step or "evidence" in step
        else "Population: adults.",
    )


def wants_json(request: Request) -> bool:
    prompt = get_prompt(request.step)
    return prompt.schema is not None or prompt.asks_for_json


EVERY_FIELD = ("queries", "relevant", "reason", "synthesis", "tldr", "verdicts", "supported", "critique", "quotes")
EVERY_FIELD += ("revised_claim", "reasoning", "rating", "rationale", "answers", "rationales")
WRONG_TYPES = {
    "queries": [["drug", "A"], 5, None, {"q": "x"}],
    "relevant": ["yes"],
    "reason": None,
    "synthesis": ["Drug A lowered pressure [1].", 7],
    "tldr": 42,
    "verdicts": "all supported",
    "supported": None,
    "critique": [1, 2],
    "quotes": "one",
    "revised_claim": {"a": 1},
    "reasoning": 7,
    "rating": "five",
    "rationale": {"why": "x"},
    "answers": ["overall", 4],
    "rationales": "because",
}
OUT_OF_RANGE = (
    '{"queries": ["drug A"], "relevant": "maybe", "reason": "?", "rating": 99, "rationale": "r", '
    '"supported": 2, "critique": "c", "verdicts": [{"statement": 0, "supported": true}, '
    '{"statement": -1, "supported": false}, {"statement": 99, "supported": true}, '
    '{"statement": 1e999, "supported": true}, {"statement": NaN, "supported": "no"}], '
    '"answers": {"overall": 99, "failure_modes": ["no_such_mode"], "feedback": 5}, "rationales": {"overall": 1}}'
)
CONTROL_JSON = json.dumps(
    {
        "queries": ["drug\x00 A\ud800 \u202epressure"],
        "reason": "\x00\ud800",
        "relevant": "yes\x00",
        "synthesis": "Drug A\x00 lowered pressure [1].\ud800",
        "tldr": "Yes\u202e [1].",
        "supported": "yes",
        "critique": "\ud800\x00",
        "rating": 2,
        "rationale": "\x00",
        "verdicts": [{"statement": 1, "explanation": "\ud800", "supported": True}],
        "answers": {"overall\x00": 4, "feedback": "\ud800"},
        "rationales": {"overall": "\u202e\x00"},
    }
)
BAD_CITATIONS_TEXT = "Drug A lowered pressure [0]. It was safe [-1]. Both trials agreed [99]."


def by_kind(text: str, as_json: str):
    return lambda request: Reply(as_json if wants_json(request) else text)


def not_utf8(request: Request) -> Reply:
    """A well-formed chat completion whose body is Latin-1, not UTF-8 ("é" as the byte 0xE9)."""
    completion = {
        "id": "chatcmpl-latin1",
        "object": "chat.completion",
        "created": 0,
        "model": "scripted-model",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "café"}, "finish_reason": "stop"}],
    }
    return Reply(raw_body=json.dumps(completion, ensure_ascii=False).encode("latin-1"))


def the_prompts_example(request: Request) -> Reply:
    """The prompt's own placeholder sent back: its JSON shape as shown ({"synthesis": "...",
    "tldr": "..."}), or "..." where the prompt asks for text."""
    shown = [line.strip() for line in request.prompt.splitlines() if line.strip().startswith('{"')]
    return Reply(shown[0] if shown and wants_json(request) else "...")


NO_CONTENT = "PMC1087853. 10 dB [PMC100]."
NO_CONTENT_JSON = json.dumps(
    {
        "claims": ["PMC1087853", "10 dB"],
        "synthesis": "10 dB [1].",
        "tldr": "Yes [1].",
        "queries": ["PMC1087853"],
        "feedback": "10 dB",
        "critique": "PMC1087853",
        "supported": "yes",
        "relevant": "yes",
        "reason": "10 dB",
    }
)
UNCITED = "Drug A lowered systolic blood pressure in adults with hypertension."


def cut_off(request: Request) -> Reply:
    content = good(request)
    return Reply(content[: max(1, len(content) // 2)], finish_reason="length")


CATALOGUE = {
    "empty": lambda request: Reply(""),
    "not_json": lambda request: Reply("I'm sorry, but I cannot help with that request."),
    "wrong_shape": lambda request: Reply('{"result": "ok", "items": []}'),
    "wrong_types": lambda request: Reply(json.dumps(WRONG_TYPES)),
    "nulls": lambda request: Reply(json.dumps(dict.fromkeys(EVERY_FIELD))),
    "json_null": lambda request: Reply("null"),
    "out_of_range": by_kind("Rating: 9\nRating: -2", OUT_OF_RANGE),
    "stopwords": by_kind("the of and", json.dumps({"queries": ["the of and", "?!", "", "   "]})),
    "cut_off": cut_off,
    "huge": by_kind(
        "word " * 12_000,
        json.dumps({k: "x" * 60_000 for k in EVERY_FIELD} | {"queries": ["y" * 60_000], "relevant": "yes"}),
    ),
    "control_characters": by_kind(CONTROL, CONTROL_JSON),
    "bad_citations": by_kind(
        BAD_CITATIONS_TEXT, json.dumps({"synthesis": BAD_CITATIONS_TEXT, "tldr": "Yes [99].", "queries": ["drug A"]})
    ),
    "fenced": lambda request: Reply(f"```json\n{good(request)}\n```"),
    "placeholder": the_prompts_example,
    "no_content_words": by_kind(NO_CONTENT, NO_CONTENT_JSON),
    "uncited": by_kind(UNCITED, json.dumps({"synthesis": UNCITED, "tldr": "Yes.", "claims": [UNCITED]})),
    "not_utf8": not_utf8,
    "body_not_json": lambda request: Reply(raw_body="<html><body>Bad gateway</body></html>"),
}


@pytest.fixture
def study_with_everything(study):
    return add_everything(study)


def add_everything(study):
    """A LitSumm-rubric study with a cited source, a finding, a cited summary and a question."""
    source = make_source(study, "drug-a", TRIAL, title="Drug A")
    evidence = TRIAL[1][0]
    start = source.text.index(evidence)
    Finding.objects.create(
        source=source,
        index=0,
        intervention="drug A",
        comparator="placebo",
        outcome="systolic blood pressure",
        label="significantly decreased",
        start=start,
        end=start + len(evidence),
        evidence=evidence,
    )
    Summary.objects.create(
        study=study,
        source=source,
        key="s1",
        text="Drug A lowered systolic pressure [PMC100]. Headache was common [PMC100].",
        generator="human",
    )
    Question.objects.create(study=study, key="q1", text="Does drug A lower blood pressure in adults?")
    return study


def commands(study, tmp_path):
    halueval = tmp_path / "halueval.jsonl"
    halueval.write_text(
        "\n".join(
            json.dumps(
                {
                    "document": f"Story {i}. The council approved a park opening in May.",
                    "right_summary": f"Story {i}: a park opens in May.",
                    "hallucinated_summary": f"Story {i}: the mayor opened a zoo in June.",
                }
            )
            for i in range(3)
        )
        + "\n"
    )
    slug = study.slug
    return {
        "generate": ["generate", "--study", slug, "--pipeline", "litsumm+factored"],
        "answer_questions": ["answer_questions", "--study", slug],
        "evaluate_factpico_fulltext": ["evaluate", "--study", slug, "--evaluator", "factpico_fulltext"],
        "evaluate_factpico_extraction": ["evaluate", "--study", slug, "--evaluator", "factpico_extraction"],
        "evaluate_factored_verification": ["evaluate", "--study", slug, "--evaluator", "factored_verification"],
        "judge_rubric": ["judge_rubric", "--study", slug],
        "benchmark_detector": ["benchmark_detector", str(halueval), "--calibration", "1"],
    }


# A reason is words: not a bare exception name ("IndexError: list index out of range"), no traceback.
BARE_EXCEPTION = re.compile(r"^\s*(?:[\w.]+\.)?[A-Z]\w*(?:Error|Exception)\b")


def unreadable(reason: str) -> bool:
    return bool(BARE_EXCEPTION.match(reason)) or "Traceback" in reason or len(reason.split()) < 3


def recorded_reasons() -> list[tuple[str, str]]:
    """(where, reason) of every failure, skip and unusable answer stored; a failure
    without a reason is recorded as such."""
    found = []
    for job in GenerationJob.objects.all():
        if job.status == "failed":
            found.append((f"generation job {job.pk} error", job.error))
        if job.status == "skipped":
            found.append((f"generation job {job.pk} skip", job.skip_reason))
    for job in AnswerJob.objects.all():
        if job.status == "failed":
            found.append((f"answer job {job.pk} error", job.error))
        if job.status == "skipped":
            found.append((f"answer job {job.pk} skip", job.skip_reason))
        if "verification_error" in job.result:
            found.append((f"answer job {job.pk} verification", job.result["verification_error"]))
    for article in RetrievedArticle.objects.filter(relevant=False, reason__startswith="no usable answer"):
        found.append((f"article {article.identifier}", article.reason))
    for score in EvaluationScore.objects.filter(status=EvaluationScore.Status.FAILED):
        found.append((f"score {score.name}", score.error))
    for answer in JudgeAnswer.objects.exclude(status=JudgeAnswer.Status.VALID):
        found.append((f"judge answer {answer.pk}", answer.error))
    for call in LLMCall.objects.filter(usable=False):
        found.append((f"LLM call {call.step}", call.problem))
    return found


@pytest.mark.parametrize("junk", sorted(CATALOGUE))
@pytest.mark.parametrize(
    "command",
    [
        "generate",
        "answer_questions",
        "evaluate_factpico_fulltext",
        "evaluate_factpico_extraction",
        "evaluate_factored_verification",
        "judge_rubric",
        "benchmark_detector",
    ],
)
def test_junk_never_becomes_a_traceback(serve, study_with_everything, tmp_path, monkeypatch, command, junk):
    monkeypatch.setenv("GENERATION_MAX_RETRIES", "0")
    serve(CATALOGUE[junk])
    out, err = StringIO(), StringIO()
    try:
        call_command(*commands(study_with_everything, tmp_path)[command], stdout=out, stderr=err)
    except CommandError as exc:  # a clear refusal ("no calibration pair could be scored: ...") is fine
        err.write(str(exc))
    printed = out.getvalue() + err.getvalue()
    assert "Traceback" not in printed
    assert LLMCall.objects.exists(), "the command asked the model nothing"
    reasons = recorded_reasons()
    assert [(where, reason) for where, reason in reasons if unreadable(reason)] == []
    assert list(bad_stored_text()) == []


def test_the_catalogue_is_read_where_it_can_be(serve, study_with_everything):
    """Fenced JSON and an answer cut off after its complete members are recovered, not failed."""
    serve(CATALOGUE["fenced"])
    call_command(
        "evaluate", "--study", study_with_everything.slug, "--evaluator", "factpico_fulltext", stdout=StringIO()
    )
    assert set(EvaluationScore.objects.values_list("status", flat=True)) == {EvaluationScore.Status.OK}
    assert set(LLMCall.objects.values_list("usable", flat=True)) == {True}


def test_a_query_of_stopwords_is_recorded_in_words(serve, study_with_everything):
    serve(CATALOGUE["stopwords"])
    call_command("answer_questions", "--study", study_with_everything.slug, stdout=StringIO())
    job = AnswerJob.objects.get()
    assert job.status == "skipped"
    assert job.skip_reason == "the model's queries had no searchable words (only stop words or punctuation)"
    assert LLMCall.objects.filter(step__startswith="queries:").count() == 3  # every try, with feedback
