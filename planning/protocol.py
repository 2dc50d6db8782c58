"""A study's frozen analysis plan (pre-registration) and the deviations from it. Pure:
plain values in, frozen dataclasses out; the app's selectors read the study's state.

The plan is a JSON document; its SHA-256 is taken over its canonical text (keys sorted,
no spaces, UTF-8), so the same plan always has the same hash and any change of any field
changes it. When it was frozen and by whom are stored beside the document, not in it.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

# The tests the report runs (analysis: stats.compare and stats.pairwise), by kind of study.
REPORT_TESTS = {"pointwise": "wilcoxon_signed_rank", "side_by_side": "bradley_terry_bootstrap"}
REPORT_CORRECTION = {"pointwise": "holm", "side_by_side": "none"}
TESTS = ("wilcoxon_signed_rank", "paired_t", "bradley_terry_bootstrap")
CORRECTIONS = ("holm", "bonferroni", "none")
STOPPING_RULES = {
    "fixed_n": "Stop when the planned number of items is rated; no look at the data before.",
    "intervals_separated": "Adaptive: stop when the intervals are separated or the budget is spent.",
}
KINDS = tuple(REPORT_TESTS)


class PlanError(ValueError):
    def __init__(self, field: str, message: str):
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


def canonical_json(document: dict[str, Any]) -> str:
    return json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def protocol_hash(document: dict[str, Any]) -> str:
    return hashlib.sha256(canonical_json(document).encode("utf-8")).hexdigest()


def check_plan(plan: dict[str, Any], *, questions: list[str]) -> None:
    """Raise PlanError naming the first field that is not a valid plan."""
    if plan.get("kind") not in KINDS:
        raise PlanError("kind", f"one of {', '.join(KINDS)}")
    if plan.get("kind") == "pointwise" and plan.get("primary_question") not in questions:
        raise PlanError("primary_question", f"one of the rubric's questions ({', '.join(questions)})")
    if plan.get("test") not in TESTS:
        raise PlanError("test", f"one of {', '.join(TESTS)}")
    if plan.get("correction") not in CORRECTIONS:
        raise PlanError("correction", f"one of {', '.join(CORRECTIONS)}")
    alpha = plan.get("alpha")
    if not isinstance(alpha, int | float) or not 0 < alpha < 1:
        raise PlanError("alpha", "a number between 0 and 1")
    planned = plan.get("planned_n")
    if not isinstance(planned, int) or planned < 2:
        raise PlanError("planned_n", "a whole number of at least 2")
    if plan.get("stopping_rule") not in STOPPING_RULES:
        raise PlanError("stopping_rule", f"one of {', '.join(STOPPING_RULES)}")
    rules = plan.get("exclusion_rules", [])
    if not isinstance(rules, list) or not all(isinstance(r, str) and r.strip() for r in rules):
        raise PlanError("exclusion_rules", "a list of non-empty labels")


@dataclass(frozen=True)
class Exclusion:
    batch: str
    rater: str  # the report's rater label, never an account or panel id
    reason: str


@dataclass(frozen=True)
class Look:
    when: str  # ISO time of a report computed after the freeze
    n: int  # items rated by then


@dataclass(frozen=True)
class StudyState:
    rubric: dict[str, Any]  # key, version, content_hash
    batches: list[dict[str, Any]]  # name, kind, design, seed, raters_per_item
    n_rated: int
    exclusions: tuple[Exclusion, ...] = ()
    looks: tuple[Look, ...] = ()


@dataclass(frozen=True)
class Deviation:
    code: str
    message: str


def _planned_exclusion(reason: str, rules: list[str]) -> bool:
    text = reason.strip().casefold()
    return any(text.startswith(rule.strip().casefold()) for rule in rules)


def deviations(document: dict[str, Any], state: StudyState) -> list[Deviation]:
    """Every deviation from the frozen plan that the study's state shows."""
    found: list[Deviation] = []
    plan = document["plan"]
    if state.n_rated != plan["planned_n"]:
        found.append(Deviation("n", f"{state.n_rated} items rated; the plan said {plan['planned_n']}."))
    for exclusion in state.exclusions:
        if not _planned_exclusion(exclusion.reason, plan.get("exclusion_rules", [])):
            found.append(
                Deviation(
                    "exclusion",
                    f"{exclusion.rater} excluded in batch {exclusion.batch!r} for a reason the plan does not "
                    f"list: {exclusion.reason!r}.",
                )
            )
    frozen_rubric = document["rubric"]
    if (state.rubric["key"], state.rubric["version"], state.rubric["content_hash"]) != (
        frozen_rubric["key"],
        frozen_rubric["version"],
        frozen_rubric["content_hash"],
    ):
        found.append(
            Deviation(
                "rubric",
                f"The study rates with rubric {state.rubric['key']} v{state.rubric['version']}; the plan froze "
                f"v{frozen_rubric['version']} ({frozen_rubric['content_hash'][:12]}).",
            )
        )
    report_test = REPORT_TESTS[plan["kind"]]
    if plan["test"] != report_test:
        found.append(Deviation("test", f"The report's primary test is {report_test}; the plan said {plan['test']}."))
    if plan["correction"] != REPORT_CORRECTION[plan["kind"]]:
        found.append(
            Deviation(
                "correction",
                f"The report corrects with {REPORT_CORRECTION[plan['kind']]}; the plan said {plan['correction']}.",
            )
        )
    frozen_batches = {b["name"]: b for b in document["batches"]}
    for batch in state.batches:
        if batch["name"] not in frozen_batches:
            found.append(Deviation("design", f"Batch {batch['name']!r} was added after the plan was frozen."))
        elif batch != frozen_batches[batch["name"]]:
            found.append(Deviation("design", f"Batch {batch['name']!r}'s design or seed changed since the freeze."))
    if plan["stopping_rule"] == "fixed_n":
        early = [look for look in state.looks if look.n < plan["planned_n"]]
        for look in early:
            found.append(
                Deviation(
                    "look",
                    f"The report was computed at {look.when} with {look.n} of {plan['planned_n']} items rated, "
                    "before the stopping rule.",
                )
            )
    return found
