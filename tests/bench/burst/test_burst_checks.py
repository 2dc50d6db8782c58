"""The crowd benchmark's judgement of a run (bench_burst.problems_of) and its arrival times:
the over-k and stored-once checks hold at any size, a missing figure or an error fails."""

import random
import statistics

from arrivals import arrival_times
from bench_burst import STEPS, problems_of


def _run(participants=5, **database):
    step = {"requests": 3, "errors": 0, "p50_ms": 20.0, "p95_ms": 40.0, "p99_ms": 50.0, "max_ms": 60.0}
    return {
        "participants": participants,
        "steps": {name: dict(step) for name in STEPS},
        "counts": {"finished": participants, "accepted_submits": 50, "accepted_qualification_submits": 15},
        "database": {
            "items_over_k": 0,
            "answers_stored": 50,
            "qualification_answers_stored": 15,
            "items_stored_more_than_once": 0,
            **database,
        },
    }


def test_a_clean_run_has_no_problem():
    assert problems_of(_run(), p95_ms=None) == []


def test_an_item_over_k_fails_the_run():
    assert problems_of(_run(items_over_k=1), p95_ms=None) == ["1 items have more than k raters"]


def test_answers_stored_must_equal_the_submits_accepted():
    assert problems_of(_run(answers_stored=49), p95_ms=None) == ["answers stored 49 != submits accepted 50"]
    assert problems_of(_run(qualification_answers_stored=16), p95_ms=None)


def test_an_answer_stored_twice_fails_the_run():
    assert problems_of(_run(items_stored_more_than_once=2), p95_ms=None)


def test_a_step_without_figures_or_with_errors_fails_the_run():
    run = _run()
    del run["steps"]["rating: submit"]
    run["steps"]["consent"]["errors"] = 2
    problems = problems_of(run, p95_ms=None)
    assert "no figure for the step 'rating: submit'" in problems
    assert "consent: 2 errors" in problems


def test_a_participant_who_did_not_finish_fails_the_run():
    run = _run()
    run["counts"]["finished"] = 4
    assert problems_of(run, p95_ms=None)


def test_the_p95_limit_is_judged_only_when_given():
    run = _run()
    run["steps"]["arrive"]["p95_ms"] = 350.0
    assert problems_of(run, p95_ms=None) == []
    assert problems_of(run, p95_ms=300) == ["arrive: p95 350 ms > 300 ms"]


def test_arrivals_fall_in_the_window_in_order_with_exponential_gaps():
    times = arrival_times(4000, 60.0, random.Random(1))
    assert len(times) == 4000
    assert all(0 < a < b < 60.0 for a, b in zip(times, times[1:], strict=False))
    gaps = [b - a for a, b in zip([0.0, *times], times, strict=False)]
    # An exponential distribution's standard deviation equals its mean (evenly spaced
    # arrivals would have none).
    assert 0.9 < statistics.pstdev(gaps) / statistics.mean(gaps) < 1.1
