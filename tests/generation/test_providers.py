"""The gateway against servers that behave as each provider documents (docs/generation.md,
"Providers"): structured output json_schema -> json_object with the schema -> JSON mode ->
plain text, each refusal remembered per endpoint; logprobs refused; answers in a fence;
Azure's deployment URLs; junk at the HTTP level."""

import json

import pytest

from generation.judging import answer_schema, summary_parts
from generation.llm import Gateway, LLMError
from generation.models import LLMCall
from generation.prompting import PROMPT_DIR, get_prompt, schema_problem
from tests.generation.scripted_server import Reply

pytestmark = pytest.mark.django_db

RELEVANT = '{"reason": "It reports the outcome.", "relevant": "yes"}'


def ask(prompt="question_relevance", **options):
    variables = {
        "question_relevance": {"question": "Does drug A lower pressure?", "article": "Drug A lowered pressure."},
        "factpico_pico": {
            "pico_info": "Population in PICO ...",
            "element": "population",
            "abstract": "Adults.",
            "summary": "Adults.",
        },
    }[prompt]
    return Gateway().complete(
        step="test", prompt=prompt, variables=variables, model="scripted-model", params={"temperature": 0}, **options
    )


def kinds(server):
    return [(r.body.get("response_format") or {}).get("type", "plain") for r in server.requests]


def test_openai_vllm_llama_server_and_ollama_get_the_schema(serve):
    server = serve(steps={"question_relevance": [Reply(content=RELEVANT)]})
    result = ask()
    sent = server.requests[0].body["response_format"]
    assert sent["type"] == "json_schema" and sent["json_schema"]["strict"] is True
    assert sent["json_schema"]["schema"] == get_prompt("question_relevance").schema
    assert result.structured == "json_schema" and json.loads(result.text)["relevant"] == "yes"


def test_llama_cpp_python_refuses_json_schema_and_gets_the_schema_in_json_mode(serve):
    # Its server answers a json_schema request with a 500 holding a validation error.
    server = serve(steps={"question_relevance": [Reply(content=RELEVANT)]}, json_schema=False)
    result = ask()
    assert kinds(server) == ["json_schema", "json_object"]
    assert server.requests[1].body["response_format"]["schema"] == get_prompt("question_relevance").schema
    assert result.structured == "json_object_schema"
    assert [c.status_code for c in LLMCall.objects.order_by("pk")] == [500, 200]
    # Remembered for the endpoint: the next call starts where it worked, and a 500 that is
    # a refusal is not retried as an outage.
    ask()
    assert kinds(server)[2:] == ["json_object"] and len(server.requests) == 3


def test_a_server_without_schemas_falls_back_to_json_mode_then_plain(serve):
    server = serve(steps={"question_relevance": [Reply(content=RELEVANT)]}, json_schema=False, json_object_schema=False)
    assert ask().structured == "json_object"
    assert kinds(server) == ["json_schema", "json_object", "json_object"]
    assert server.requests[2].body["response_format"] == {"type": "json_object"}
    plain = serve(steps={"question_relevance": [Reply(content=RELEVANT)]}, json_mode=False)
    assert ask().structured == ""
    assert kinds(plain) == ["json_schema", "json_object", "json_object", "plain"]
    ask()
    assert kinds(plain)[4:] == ["plain"]


def test_a_prompt_that_does_not_say_json_never_gets_bare_json_mode(serve):
    # OpenAI refuses JSON mode for messages that never say "JSON"; FactPICO's prompts are
    # the paper's words (they ask for "Rating: n"), so after the schema comes plain text.
    server = serve(steps={"factpico_pico": [Reply(content="Rating: 2")]}, json_schema=False, json_object_schema=False)
    assert not get_prompt("factpico_pico").asks_for_json
    assert ask("factpico_pico").structured == ""
    assert kinds(server) == ["json_schema", "json_object", "plain"]


@pytest.mark.parametrize(
    "variable,value,expected",
    [("GENERATION_JSON_SCHEMA", "0", "json_object"), ("GENERATION_JSON_MODE", "0", "plain")],
)
def test_the_settings_turn_schemas_or_all_structured_output_off(serve, monkeypatch, variable, value, expected):
    monkeypatch.setenv(variable, value)
    server = serve(steps={"question_relevance": [Reply(content=RELEVANT)]})
    ask()
    assert kinds(server) == [expected]


def test_logprobs_refused_structured_output_kept(serve):
    server = serve(steps={"question_relevance": [Reply(content=RELEVANT)]}, logprobs=False)
    ask(logprobs=True)
    assert [("logprobs" in r.body, kinds(server)[i]) for i, r in enumerate(server.requests)] == [
        (True, "json_schema"),
        (False, "json_schema"),
    ]


def test_an_answer_in_a_fence_is_read(serve):
    from generation.questions import read_relevance

    serve(steps={"question_relevance": [Reply(content=RELEVANT)]}, fence=True)
    result = ask()
    assert result.text.startswith("```json")
    assert read_relevance(result.text) == (True, "It reports the outcome.", "")


def test_azure_deployments_get_the_api_version_and_the_key_header(serve, monkeypatch):
    server = serve(steps={"question_relevance": [Reply(content=RELEVANT)]})
    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url.removesuffix("/v1"))
    monkeypatch.setenv("OPENAI_API_VERSION", "2024-10-21")
    ask()
    request = server.requests[0]
    assert request.path == "/openai/deployments/scripted-model/chat/completions?api-version=2024-10-21"
    assert request.headers.get("api-key") == "test-key"


@pytest.mark.parametrize(
    "body,text,problem",
    [
        ({"choices": []}, "", "held no choice"),
        ({"choices": [{"message": {"content": None}, "finish_reason": "stop"}]}, "", ""),
        (
            {"choices": [{"message": {"content": [{"type": "text", "text": "a"}, {"text": "b"}]}}]},
            "ab",
            "",
        ),
        (
            {
                "choices": [{"message": {"content": "x\u0000y\ud800z\u202e!"}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": -5, "completion_tokens": "many"},
            },
            "xy\ufffdz!",
            "1 NUL character(s) removed; 1 lone surrogate(s) replaced by U+FFFD; "
            "1 bidirectional control character(s) removed",
        ),
    ],
)
def test_junk_at_the_http_level_is_stored_cleaned(serve, body, text, problem):
    serve(steps={"question_relevance": [Reply(raw_body=json.dumps(body))]})
    result = ask()
    call = LLMCall.objects.get()
    assert result.text == call.response_text == text
    assert problem in call.problem
    assert call.tokens_in >= 0 and call.tokens_out >= 0


def test_a_body_that_is_not_a_completion_is_a_readable_failure(serve, monkeypatch):
    monkeypatch.setenv("GENERATION_MAX_RETRIES", "0")
    serve(steps={"question_relevance": [Reply(raw_body="<html>Bad gateway</html>", status=502)]})
    with pytest.raises(LLMError) as caught:
        ask()
    assert "HTTP 502" in caught.value.message and "Traceback" not in caught.value.message


def test_every_declared_schema_keeps_openais_strict_rules():
    schemas = sorted(PROMPT_DIR.glob("*.schema.json"))
    assert len(schemas) == 16  # factored_decompose, self_correction_feedback, factored_verify_few_shot among them
    for path in schemas:
        prompt = get_prompt(path.name.removesuffix(".schema.json"))
        assert schema_problem(prompt.schema) is None, path.name
        assert "JSON" in prompt.text or prompt.id.startswith("factpico_"), path.name


@pytest.mark.parametrize("key", ["litsumm", "factpico", "claims", "clinfo"])
def test_the_judges_schema_keeps_them_for_every_builtin_rubric(rater_a, key):
    from annotate.rubrics import RubricDefinition
    from annotate.services.rubrics import load_builtin_rubric
    from tests.annotate.factpico import make_factpico_assignment

    assignment, _ = make_factpico_assignment(rater_a)
    summary = assignment.summary
    definition = RubricDefinition.from_dict(load_builtin_rubric(key=key).definition)
    parts = summary_parts(definition, summary, list(summary.source.findings.all()))
    schema = answer_schema(definition, parts)
    assert schema_problem(schema) is None
    assert set(schema["properties"]["answers"]["properties"]) <= {q.key for q in definition.questions}
    # A rationale only where the rubric takes one (it refuses the others).
    takes = {q.key for q in definition.questions if q.rationale != "none"}
    assert set(schema["properties"]["rationales"]["properties"]) <= takes


def instance_of(schema: dict):
    """The plainest answer a schema allows: null where it may be null, the first allowed
    value, an empty list, a short text. What a model held to the schema may well write."""
    if "anyOf" in schema:
        options = schema["anyOf"]
        return None if {"type": "null"} in options else instance_of(options[0])
    if "enum" in schema:
        return schema["enum"][0]
    kind = schema.get("type")
    if kind == "object":
        return {key: instance_of(child) for key, child in schema["properties"].items()}
    if kind == "array":
        return []
    if kind == "integer":
        return 1
    return "As the source says."


@pytest.mark.django_db(transaction=True)
# Not clinfo: its consistency rules (a wrong TL;DR needs the last question's "Yes") are not
# something a schema can say; the rubric checks them.
@pytest.mark.parametrize("key", ["litsumm", "factpico", "claims"])
def test_an_answer_that_keeps_to_the_judges_schema_is_one_the_rubric_takes(serve, rater_a, key):
    from annotate.services.rubrics import load_builtin_rubric
    from generation.judging import run_judge
    from tests.annotate.factpico import make_factpico_assignment

    assignment, _ = make_factpico_assignment(rater_a)
    study = assignment.summary.study
    study.rubric = load_builtin_rubric(key=key)
    study.save()

    def obeys(request):
        schema = request.body["response_format"]["json_schema"]["schema"]
        return Reply(content=json.dumps(instance_of(schema)))

    serve(steps={"rubric_judge": [obeys]})
    _, (answer,) = run_judge(study=study)
    assert answer.error == "" and answer.status == "valid"
