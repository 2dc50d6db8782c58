import pandas as pd

from stats.pipeline_checks import check_pass_rates


def test_pass_rates_count_each_stage_by_hand():
    frame = pd.DataFrame(
        [
            # pipeline, attempts, references_passed, consistency_revised, flags
            ("litsumm", 1, True, False, []),
            ("litsumm", 3, True, True, []),
            ("litsumm+factored", 4, False, True, ["final_references_failed", "self_consistency_failed"]),
            ("litsumm", 1, True, True, ["self_consistency_failed"]),
            ("factored", 1, True, None, []),  # no LitSumm checks: left out
            ("", None, None, None, []),  # imported by hand: left out
        ],
        columns=["pipeline", "attempts", "references_passed", "consistency_revised", "flags"],
    )
    result = check_pass_rates(frame)
    assert result["n_summaries"] == 4
    assert {s["stage"]: s["passed"] for s in result["stages"]} == {
        "references_first_pass": 2,
        "references_after_revision": 3,
        "consistency_clean": 1,
        "consistency_after_revision": 2,
    }
    assert result["stages"][0]["rate"] == 0.5


def test_no_pipeline_data_gives_none():
    assert check_pass_rates(pd.DataFrame({"pipeline": ["", ""], "flags": [[], []]})) is None
    assert check_pass_rates(pd.DataFrame({"key": ["a"]})) is None
