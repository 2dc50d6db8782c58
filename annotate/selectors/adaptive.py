"""Reads of adaptive side-by-side batches (annotate.services.adaptive writes them): the
comparison items by pair of systems, the judgements so far as Bradley–Terry counts, and
where the rule stands."""

from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations

from annotate.models import Assignment, Batch, Comparison, Study
from annotate.selectors.frames import comparisons_frame

DESIGN = "adaptive_pairs"


@dataclass(frozen=True)
class AdaptiveState:
    judgements: int  # submitted in the batch
    handed_out: int  # every comparison handed out (open ones included)
    budget: int
    unresolved: tuple[tuple[str, str], ...]  # neighbouring systems not yet told apart
    done: bool


def pairs_of_items(study: Study) -> dict[tuple[str, str], list[Comparison]]:
    """Comparison items of two summaries, by their systems' pair (sorted generators)."""
    found: dict[tuple[str, str], list[Comparison]] = {}
    for comparison in Comparison.objects.filter(study=study).prefetch_related("members").order_by("key"):
        members = list(comparison.members.all())
        systems = sorted({m.generator for m in members})
        if len(members) == 2 and len(systems) == 2:
            found.setdefault((systems[0], systems[1]), []).append(comparison)
    return found


def judgement_counts(batch: Batch):
    """k × k half-win counts of the batch's judgements on its question (stats.adaptive)."""
    import numpy as np

    systems = batch.design["systems"]
    index = {s: i for i, s in enumerate(systems)}
    counts = np.zeros((len(systems), len(systems)))
    frame = comparisons_frame(study=batch.study)
    if len(frame):
        frame = frame[(frame["batch"] == batch.name) & (frame["question"] == batch.design["question"])]
    for left, right, choice in zip(frame.get("left", []), frame.get("right", []), frame.get("choice", []), strict=True):
        if left not in index or right not in index:
            continue
        if choice == "tie":
            counts[index[left], index[right]] += 1
            counts[index[right], index[left]] += 1
        else:
            winner, loser = (left, right) if choice == "left" else (right, left)
            counts[index[winner], index[loser]] += 2
    return counts


def adaptive_state(batch: Batch) -> AdaptiveState:
    from stats.adaptive import state

    systems = batch.design["systems"]
    counts = judgement_counts(batch)
    judgements = int(counts.sum() // 2)
    handed = Assignment.objects.filter(batch=batch).exclude(state=Assignment.State.WITHDRAWN).count()
    shown = counts + counts.T
    started = all(shown[i, j] > 0 for i, j in combinations(range(len(systems)), 2))
    unresolved = state(counts, z=batch.design["z"]).unresolved if started else ()
    names = tuple((systems[i], systems[j]) for i, j in unresolved)
    done = handed >= batch.design["budget"] or (started and not unresolved)
    return AdaptiveState(judgements, handed, batch.design["budget"], names, done)
