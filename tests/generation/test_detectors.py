"""benchmark_detector on a HaluEval-layout file written here, against the scripted LLM
server: thresholds, accuracy with its interval, failures never scored."""

import json
import math

import pytest
from django.core.management import CommandError, call_command
from statsmodels.stats.proportion import proportion_confint

from generation.detectors import Detector, Pair, fit_threshold, wilson_interval
from generation.llm import Gateway
from tests.generation.conftest import claim_answer
from tests.generation.scripted_server import Reply

pytestmark = pytest.mark.django_db

DOC = "The council approved a new park on Monday. It will open in May and cost two million pounds."


def records(n=10):
    out = []
    for i in range(n):
        wrong = "It will open in June." if i != 3 else "SLY: it opens in spring."
        out.append(
            {
                "document": f"Story {i}. {DOC}",
                "right_summary": f"Story {i}: the council approved a park opening in May.",
                "hallucinated_summary": f"Story {i}: INVENTED the mayor approved a park. {wrong}",
            }
        )
    return out


def write(tmp_path, recs, name="halueval.jsonl"):
    path = tmp_path / name
    path.write_text("\n".join(json.dumps(r) for r in recs) + "\n", encoding="utf-8")
    return path


def judge(request):
    """The single-prompt judge: right summaries yes (0.9); hallucinated no (P(yes) 0.3),
    except the sly one of record 3, which it believes a little (0.7)."""
    summary = request.section("Summary")
    if "SLY" in summary:
        return claim_answer("yes", p_yes=0.7)
    return claim_answer("no", p_yes=0.3) if "INVENTED" in summary else claim_answer("yes", p_yes=0.9)


def verify(request):
    return claim_answer("no", p_yes=0.1) if "INVENTED" in request.section("Claim") else claim_answer("yes", p_yes=0.95)


def test_threshold_is_the_most_accurate_midpoint_worked_by_hand():
    # Scores 0.3 (no), 0.7 (no), 0.9 (yes), 0.9 (yes): at 0.8 all four are right.
    threshold, accuracy = fit_threshold([0.3, 0.7, 0.9, 0.9], [False, False, True, True])
    assert threshold == pytest.approx(0.8) and accuracy == 1.0
    # Equally accurate thresholds: the one nearest 0.5.
    threshold, accuracy = fit_threshold([0.2, 0.4, 0.6, 0.8], [False, True, False, True])
    assert accuracy == 0.75 and threshold == pytest.approx(0.3)


def test_wilson_interval_is_statsmodels_own():
    for successes, n in ((17, 20), (0, 12), (12, 12), (431, 500)):
        low, high = wilson_interval(successes, n)
        expected = proportion_confint(successes, n, alpha=0.05, method="wilson")
        assert (low, high) == pytest.approx(expected)


def test_the_judge_benchmark_end_to_end(serve, tmp_path, capsys):
    serve(steps={"detect_judge": [judge]})
    call_command("benchmark_detector", str(write(tmp_path, records())), "--detector", "judge", "--json")
    (result,) = json.loads(capsys.readouterr().out)
    assert (result["calibration_records"], result["test_records"], result["n_test_pairs"]) == (2, 8, 16)
    assert result["failures"] == 0
    # The sly pair scores 0.7: wrong whenever the threshold is at or below it.
    sly_in_test = result["threshold"] == pytest.approx(0.6)  # calibration without it: midpoint of 0.3 and 0.9
    expected = (16 - 1) / 16 if sly_in_test else 1.0
    if not sly_in_test:
        assert result["threshold"] == pytest.approx(0.8)
    assert result["accuracy"] == pytest.approx(expected)
    correct = round(expected * 16)
    assert (result["ci_low"], result["ci_high"]) == pytest.approx(proportion_confint(correct, 16, method="wilson"))


def test_factored_detector_multiplies_the_claims_probabilities(serve):
    serve(steps={"factored_verify": [verify]})
    detector = Detector("factored", gateway=Gateway())
    two_true = Pair(1, DOC, "The council approved a park. It opens in May.", True)
    assert detector.score(two_true) == pytest.approx(0.95 * 0.95)
    one_false = Pair(1, DOC, "The council approved a park. INVENTED it opens in June.", False)
    assert detector.score(one_false) == pytest.approx(0.95 * 0.1)


def test_refused_and_malformed_answers_are_failures_not_scores(serve, tmp_path, capsys):
    def refuses_record_5(request):
        if "Story 5" in request.section("Summary"):
            return Reply(content="I'm sorry, I can't help with that.")
        return judge(request)

    serve(steps={"detect_cot": [refuses_record_5]})
    call_command(
        "benchmark_detector", str(write(tmp_path, records())), "--detector", "cot", "--json", "--allow-failures"
    )
    captured = capsys.readouterr()
    (result,) = json.loads(captured.out)
    assert result["failures"] == 2  # both pairs of record 5 (line 6), wherever the split put them
    assert result["n_test_pairs"] in (14, 16)  # 14 when record 5 is a test record: never scored
    assert "cot: line 6: the answer had no yes/no verdict" in captured.err


def test_few_shot_examples_come_from_calibration_and_are_not_scored(serve, tmp_path, capsys):
    server = serve(steps={"detect_few_shot": [judge]})
    call_command("benchmark_detector", str(write(tmp_path, records())), "--detector", "few_shot", "--json")
    (result,) = json.loads(capsys.readouterr().out)
    prompts = [r.prompt for r in server.requests if r.step == "detect_few_shot"]
    assert len(prompts) == 2 + 16  # two calibration records give 4 pairs, 2 of them the examples
    assert all("Example 1." in p and "Example 2." in p for p in prompts)
    assert math.isfinite(result["accuracy"])


def test_bad_files_are_refused_naming_the_line(serve, tmp_path):
    serve(steps={"detect_judge": [judge]})
    bad = records(3)
    bad[1].pop("hallucinated_summary")
    with pytest.raises(CommandError, match='line 2: field "hallucinated_summary"'):
        call_command("benchmark_detector", str(write(tmp_path, bad)), "--detector", "judge")
    with pytest.raises(CommandError, match="calibration split"):
        call_command("benchmark_detector", str(write(tmp_path, records(3))), "--calibration", "3")


def test_a_detector_that_cannot_be_calibrated_does_not_stop_the_others(serve, tmp_path, capsys):
    # A weak model answers the judge prompts but never the factored one in a usable way.
    serve(steps={"factored_verify": [Reply(content="I cannot say.")], "detect_judge": [judge]})
    with pytest.raises(CommandError, match="1 detector failed to give a result: factored"):
        call_command(
            "benchmark_detector", str(write(tmp_path, records())), "--detector", "factored", "--detector", "judge"
        )
    captured = capsys.readouterr()
    assert "factored: no calibration pair could be scored: the answer had no yes/no verdict" in captured.err
    assert captured.out.startswith("judge: accuracy ")
