"""Adaptive side-by-side batches: comparisons handed out one at a time as raters ask for
their next item, each pair of systems chosen from the judgements so far by the rule of
stats.adaptive (docs/pairwise.md, "Adaptive designs"), until the neighbouring systems are
told apart or the budget of judgements is spent.

A batch holds the rule's state in its design: the systems, the preference question whose
answers count, the budget and z. Each rater gets one comparison at a time; the batch row
is locked while one is chosen, so two raters arriving together never take the same
judgement of the budget twice."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Sequence
from itertools import combinations

from django.db import transaction
from django.db.models import Max

from annotate.models import Assignment, Batch, Comparison, Study, StudyMembership
from annotate.selectors.adaptive import DESIGN, adaptive_state, judgement_counts, pairs_of_items
from annotate.selectors.contents import rubric_definition
from annotate.services.members import add_study_member
from core.exceptions import ApplicationError

OPEN = (Assignment.State.PENDING, Assignment.State.IN_PROGRESS)


@transaction.atomic
def create_adaptive_batch(
    *, study: Study, name: str, raters: Sequence, budget: int, seed: int, z: float = 1.96, created_by=None
) -> Batch:
    """A batch that hands out comparisons adaptively; each rater gets a first one now."""
    definition = rubric_definition(study.rubric)
    questions = [q.key for q in definition.questions if q.kind == "preference"]
    if not questions:
        raise ApplicationError(
            "The study's rubric asks no preference question.", extra={"fields": {"design": "no preference question"}}
        )
    items = pairs_of_items(study)
    systems = sorted({s for pair in items for s in pair})
    if len(systems) < 3 or len(items) < len(systems) * (len(systems) - 1) // 2:
        raise ApplicationError(
            "An adaptive design needs comparison items for every pair of at least three systems.",
            extra={"fields": {"design": "comparison items for every pair of at least three systems"}},
        )
    if budget < len(items) or not raters:
        raise ApplicationError(
            f"budget: at least one judgement per pair of systems ({len(items)}), and at least one rater.",
            extra={"fields": {"n": f"the budget: at least {len(items)} judgements, one per pair of systems"}},
        )
    if Batch.objects.filter(study=study, name=name).exists():
        raise ApplicationError(
            f"name: the study already has a batch {name!r}.", extra={"fields": {"name": "already a batch's name"}}
        )
    design = {"name": DESIGN, "systems": systems, "question": questions[0], "budget": budget, "z": z}
    batch = Batch.objects.create(
        study=study, name=name, design=design, seed=seed, raters_per_item=1, created_by=created_by
    )
    for rater in raters:
        add_study_member(study=study, user=rater, role=StudyMembership.Role.RATER)
        hand_out(batch=batch, rater=rater)
    return batch


def _handed_pairs(batch: Batch, items: dict[tuple[str, str], list[Comparison]]) -> list[tuple[str, str]]:
    """The systems' pair of every comparison handed out in the batch (open ones included)."""
    pair_of = {c.item_id: pair for pair, comparisons in items.items() for c in comparisons}
    handed = Assignment.objects.filter(batch=batch).exclude(state=Assignment.State.WITHDRAWN)
    return [pair_of[s] for s in handed.values_list("summary_id", flat=True) if s in pair_of]


def _choose_item(batch: Batch, rater, counts) -> tuple[Comparison, list[str]] | None:
    """The comparison item of the rule's pair (or, if the rater saw all of those, of the
    next pair by the same rule's order) the rater has not had in this batch, least shown
    first, and its order on screen."""
    from stats.adaptive import next_pair, shown_order

    systems = batch.design["systems"]
    items = pairs_of_items(batch.study)
    had = set(Assignment.objects.filter(batch=batch, rater=rater).values_list("summary_id", flat=True))
    shown = Counter(
        Assignment.objects.filter(batch=batch)
        .exclude(state=Assignment.State.WITHDRAWN)
        .values_list("summary_id", flat=True)
    )
    pairs = list(combinations(range(len(systems)), 2))
    judged = counts + counts.T
    if all(judged[i, j] > 0 for i, j in pairs):
        first = next_pair(counts, z=batch.design["z"])
        order = [first] + [p for p in pairs if p != first]
    else:
        # Every pair once first (the fit needs them): the pairs handed out least so far,
        # counting comparisons still open, so raters arriving together get different pairs.
        handed = Counter(
            tuple(sorted(systems.index(g) for g in generators)) for generators in _handed_pairs(batch, items)
        )
        order = sorted(pairs, key=lambda p: (handed[p], p))
    rng = random.Random(f"{batch.seed}:{rater.pk}:{len(had)}")
    for i, j in order:
        pair = (systems[i], systems[j])
        fresh = [c for c in items.get(pair, []) if c.item_id not in had]
        if not fresh:
            continue
        least = min(fresh, key=lambda c: (shown[c.item_id], rng.random()))
        times = Assignment.objects.filter(batch=batch, summary__comparison__in=items[pair]).count()
        left, right = shown_order((i, j), times)
        by_system = {m.generator: str(m.uuid) for m in least.members.all()}
        return least, [by_system[systems[left]], by_system[systems[right]]]
    return None


@transaction.atomic
def hand_out(*, batch: Batch, rater) -> Assignment | None:
    """The rater's next comparison of an adaptive batch: their open one if any, else a new
    one chosen by the rule, or None when the batch is done (separated or budget spent)."""
    if batch.design.get("name") != DESIGN:
        return None
    Batch.objects.select_for_update().filter(pk=batch.pk).first()
    mine = Assignment.objects.filter(batch=batch, rater=rater, state__in=OPEN).order_by("position").first()
    if mine is not None:
        return mine
    if adaptive_state(batch).done:
        return None
    chosen = _choose_item(batch, rater, judgement_counts(batch))
    if chosen is None:
        return None
    comparison, order = chosen
    last = Assignment.objects.filter(rater=rater, study=batch.study).aggregate(n=Max("position"))["n"]
    return Assignment.objects.create(
        study=batch.study,
        batch=batch,
        summary=comparison.item,
        rater=rater,
        position=0 if last is None else last + 1,
        shown_order=order,
    )


def hand_out_next(*, study: Study, rater) -> Assignment | None:
    """The rater's next comparison from any adaptive batch of the study they rate in."""
    batches = Batch.objects.filter(study=study, design__name=DESIGN, assignments__rater=rater).distinct()
    for batch in batches.order_by("created_at"):
        found = hand_out(batch=batch, rater=rater)
        if found is not None:
            return found
    return None
