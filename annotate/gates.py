"""Checks that other apps put in front of a rater's item, for every way in (the API with a
session or a token; the rating page's own redirect is recruit.middleware's).

annotate does not import the apps that add them (tests/architecture/test_import_graph.py):
an app registers an ItemGate in its AppConfig.ready() (recruit: a study's onboarding,
consent included, must be finished before a rater reads or writes its items).

A gate costs no query in the common case: its `condition` is an expression over the
assignment's row that get_assignment_for_rater annotates in the query it makes anyway
(e.g. "the study has an onboarding"), and `check` runs only where it is true. A check raises
an ApplicationError subclass (the API answers it in the one error shape) or returns None."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.db.models import Expression

from annotate.models import Assignment


@dataclass(frozen=True)
class ItemGate:
    name: str  # the annotation's attribute on the assignment, e.g. "gate_onboarding"
    condition: Callable[[Any], Expression]  # rater -> boolean expression over the Assignment row
    check: Callable[[Assignment, Any], None]  # (assignment, rater): raises to refuse


_GATES: dict[str, ItemGate] = {}


def register_item_gate(gate: ItemGate) -> ItemGate:
    """Add a gate; a gate of the same name replaces the earlier one."""
    _GATES[gate.name] = gate
    return gate


def gate_annotations(rater) -> dict[str, Expression]:
    """What get_assignment_for_rater annotates, one boolean per gate."""
    return {gate.name: gate.condition(rater) for gate in _GATES.values()}


def check_item_gates(assignment: Assignment, rater) -> None:
    """Run the checks of the gates whose condition holds for the rater's own assignment (an
    assignment read without the annotations runs every check); the first refusal raises."""
    for gate in _GATES.values():
        if getattr(assignment, gate.name, True):
            gate.check(assignment, rater)
