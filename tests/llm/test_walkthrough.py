"""`make test-llm`'s walkthrough (tests/llm/walkthrough.py) against the scripted server in
place of the local model: it runs the paths it covers (the pairwise judge in both orders,
the self-correction pipeline, Factored Verification with decomposed claims), each command
in its own process with the real `openai` client, without a traceback, and writes its table."""

import json
import subprocess
import sys
from pathlib import Path

from tests.generation.scripted_server import TEST_ENV, Reply, ScriptedServer
from tests.generation.test_junk_answers import good

ROOT = Path(__file__).resolve().parents[2]
COVERED = ("generate selfcorrect", "evaluate factored_verification decomposed", "judge_rubric pairwise")


def model(request) -> Reply:
    if request.step == "rubric_judge_pairwise":
        answer = {"answers": {"preferred": {"preferred": "A", "strength": "slightly"}}, "rationales": {}}
        return Reply(json.dumps(answer))
    if request.step == "self_correction_feedback":
        return Reply(json.dumps({"feedback": "The second sentence overstates the effect.", "supported": "no"}))
    if request.step == "factored_decompose":
        return Reply(json.dumps({"claims": ["The treatment lowered the risk of the outcome [1]."]}))
    if request.step == "self_correction_revise":
        return Reply(good(type(request)(step="generate", body=request.body, headers={}, received_at=0.0)))
    return Reply(good(request))


def test_the_walkthrough_covers_the_pairwise_judge_self_correction_and_decomposition(tmp_path, monkeypatch):
    with ScriptedServer(model) as server:
        port = int(server.base_url.split(":")[2].split("/")[0])
        env = {k: v for k, v in __import__("os").environ.items() if not k.startswith(("GENERATION_", "OPENAI_"))}
        env.update(TEST_ENV)
        only = [arg for label in COVERED for arg in ("--only", label)]
        done = subprocess.run(
            [sys.executable, "tests/llm/walkthrough.py", "--port", str(port), "--work", str(tmp_path), *only],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
        )
        steps = server.steps_seen()
    assert done.returncode == 0, done.stdout + done.stderr
    report = (tmp_path / "report-schema.md").read_text()
    for label in COVERED:
        row = next(line for line in report.splitlines() if line.startswith(f"| `{label}` |"))
        assert "| no |" in row  # no traceback
    # Self-correction: the draft, its own feedback and the revision.
    assert "self_correction_feedback" in steps and "self_correction_revise" in steps
    # Decomposition of the demo's cited answers, each claim then checked.
    assert "factored_decompose" in steps and "factored_verify" in steps
    # Each comparison asked in both orders: an even number of pairwise prompts.
    pairwise = steps.count("rubric_judge_pairwise")
    assert pairwise >= 2 and pairwise % 2 == 0
