"""A pointwise plan as the Plan page's freeze form makes it, for the tests that freeze one."""

from __future__ import annotations


def pointwise_plan(**changes) -> dict:
    """The LitSumm overall score compared with the report's own test; `changes` replace fields."""
    plan = {
        "kind": "pointwise",
        "primary_question": "overall",
        "test": "wilcoxon_signed_rank",
        "correction": "holm",
        "alpha": 0.05,
        "planned_n": 12,
        "stopping_rule": "fixed_n",
        "exclusion_rules": [],
    }
    return plan | changes
