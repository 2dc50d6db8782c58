"""The planning commands, run as a user runs them."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from tests.analysis.reports import rated_study


def test_plan_power_prints_the_curve_and_the_smallest_n():
    out = StringIO()
    call_command("plan_power", "--grid", "6,40", "--simulations", "100", "--effect", "1.0", stdout=out)
    text = out.getvalue()
    assert "Smallest number of items reaching power 0.8: 40" in text


def test_plan_power_reads_a_pilot_and_answers_json(db):
    study, _admin = rated_study(n_summaries=8, raters=("ra", "rb"))
    out = StringIO()
    call_command("plan_power", "--pilot", study.slug, "--grid", "5,10", "--simulations", "30", "--json", stdout=out)
    lines = out.getvalue().splitlines()
    assert lines[0].startswith(f"From pilot {study.slug}:")
    curve = json.loads(lines[1])
    assert [p["n_items"] for p in curve["points"]] == [5, 10]


@pytest.mark.parametrize(
    "args,message",
    [
        (["--grid", "1"], "--grid"),
        (["--kind", "side_by_side", "--simulations", "5000"], "--simulations"),
        (["--pilot", "no-such-study"], "no study"),
    ],
)
def test_plan_power_refuses_bad_options(db, args, message):
    with pytest.raises(CommandError, match=message) as refused:
        call_command("plan_power", *args, stdout=StringIO())
    assert refused.value.returncode == 2


def test_simulate_adaptive_prints_both_designs():
    out = StringIO()
    call_command("simulate_adaptive", "--systems", "4", "--runs", "5", "--max-budget", "120", stdout=out)
    assert "adaptive needs" in out.getvalue() and "uniform" in out.getvalue()
