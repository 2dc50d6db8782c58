"""One exit-code rule for every command that calls a model: 0 when every item has a usable
result, 1 when any item failed (the count printed), 2 for a usage error; --allow-failures
makes failures exit 0 for batch runs. `call_command` raises the CommandError whose
`returncode` manage.py exits with."""

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from tests.generation.scripted_server import Reply
from tests.generation.test_junk_answers import CATALOGUE, add_everything, commands, good, the_prompts_example

pytestmark = pytest.mark.django_db(transaction=True)

COMMANDS = [
    "generate",
    "answer_questions",
    "evaluate_factpico_fulltext",
    "evaluate_factpico_extraction",
    "evaluate_factored_verification",
    "judge_rubric",
    "benchmark_detector",
]
# What each command counts as its items when some fail.
FAILED = {
    "generate": "1 job failed",
    "answer_questions": "1 question failed",
    "evaluate_factpico_fulltext": "1 summary failed",
    "evaluate_factpico_extraction": "1 summary failed",
    "evaluate_factored_verification": "1 summary failed",
    "judge_rubric": "1 judge answer failed",
    "benchmark_detector": "failed to give a result",
}


def usable(request) -> Reply:
    """A well-behaved answer the rubric accepts too (its `overall` takes no rationale)."""
    if request.step == "rubric_judge":
        return Reply(
            json.dumps({"answers": {"overall": 4, "failure_modes": [], "feedback": "Fine."}, "rationales": {}})
        )
    return Reply(good(request))


def failing(command: str):
    """A model whose answers make one item of the command fail (not skip): an empty draft,
    the synthesis prompt's placeholder, prose where JSON was asked for."""
    if command == "generate":
        return CATALOGUE["empty"]
    if command == "answer_questions":
        return lambda request: the_prompts_example(request) if request.step == "question_synthesis" else usable(request)
    return CATALOGUE["not_json"]


def runnable(study, tmp_path, command) -> list[str]:
    """The command's arguments; the benchmark with the detectors that need no more than a
    yes/no answer and no example pairs."""
    args = commands(study, tmp_path)[command]
    return [*args, "--detector", "judge", "--detector", "factored"] if command == "benchmark_detector" else args


def exit_code(args) -> tuple[int, str]:
    """What manage.py would exit with, and what the command printed."""
    out = StringIO()
    try:
        call_command(*args, stdout=out, stderr=out)
    except CommandError as exc:
        return exc.returncode, out.getvalue() + str(exc)
    return 0, out.getvalue()


@pytest.mark.parametrize("command", COMMANDS)
def test_every_item_usable_exits_0(serve, study, tmp_path, command):
    add_everything(study)
    serve(usable)
    code, printed = exit_code(runnable(study, tmp_path, command))
    assert code == 0, printed


@pytest.mark.parametrize("command", COMMANDS)
def test_a_failed_item_exits_1_with_the_count_and_0_when_failures_are_allowed(
    serve, study, tmp_path, monkeypatch, command
):
    monkeypatch.setenv("GENERATION_MAX_RETRIES", "0")
    add_everything(study)
    serve(failing(command))
    args = commands(study, tmp_path)[command]
    code, printed = exit_code(args)
    assert code == 1 and FAILED[command] in printed
    code, printed = exit_code([*args, "--allow-failures"])
    assert code == 0 and FAILED[command] in printed and "--allow-failures" in printed


@pytest.mark.parametrize("command", COMMANDS)
def test_usage_errors_exit_2(serve, study, tmp_path, command):
    add_everything(study)
    server = serve(lambda request: Reply(good(request)))
    args = commands(study, tmp_path)[command]
    if command == "benchmark_detector":
        wrong = [["benchmark_detector", str(tmp_path / "missing.jsonl")], [*args, "--limit", "1"]]
    else:
        wrong = [[args[0], "--study", "no-such-study", *args[3:]], [*args, "--limit", "0"]]
    for usage in wrong:
        code, printed = exit_code(usage)
        assert code == 2, (usage, printed)
    assert server.requests == []


def test_a_missing_api_key_is_a_usage_error(serve, study, tmp_path, monkeypatch):
    add_everything(study)
    serve(lambda request: Reply(good(request)))
    monkeypatch.delenv("OPENAI_API_KEY")
    for command in COMMANDS:
        code, printed = exit_code(commands(study, tmp_path)[command])
        assert (code, "OPENAI_API_KEY is not set" in printed) == (2, True), command


def test_an_unknown_source_or_question_is_a_usage_error(serve, study, tmp_path):
    add_everything(study)
    serve(lambda request: Reply(good(request)))
    assert exit_code(["generate", "--study", study.slug, "--pipeline", "litsumm", "--source", "nope"])[0] == 2
    assert exit_code(["answer_questions", "--study", study.slug, "--question", "nope"])[0] == 2
