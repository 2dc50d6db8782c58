"""Batches and assignments: building a batch, previewing it, assigning outside batches,
withdrawing and moving one assignment.

A batch is built in three pure steps, then persisted in one transaction:
filter the study's summaries (selectors.filter_summaries), sample them (optionally
stratified), and assign them with one of the designs in annotate.designs.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Sequence
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import F, Max
from django.utils import timezone

from annotate import designs
from annotate.designs import shuffled_order, top_up_assignments
from annotate.models import (
    Assignment,
    Batch,
    Comparison,
    ComparisonMember,
    ExpectedAnswer,
    RaterPause,
    Study,
    StudyMembership,
    Summary,
)
from annotate.selectors.contents import filter_summaries
from annotate.services.members import add_study_member
from annotate.services.summaries import create_comparison
from core.exceptions import ApplicationError, InvalidStateError
from core.text_validation import MAX_BATCH_NAME_CHARS, check_limit, check_text

DESIGNS = ("k_raters", "partial_overlap", "pairwise_overlap", "balanced")
# Pairs of generators' summaries of each source, shown side by side (docs/pairwise.md).
COMPARISONS = "comparisons"
# Context length strata (sentences in the source), for stratified sampling as LitSumm did.
CONTEXT_BINS = ((5, "5-9"), (10, "10-19"), (20, "20-39"), (40, "40+"))


def context_bucket(sentences: int) -> str:
    label = "<5"
    for low, name in CONTEXT_BINS:
        if sentences >= low:
            label = name
    return label


# Batch.seed is a BigIntegerField and attention_every a PositiveSmallIntegerField.
SEED_RANGE = (-(2**63), 2**63 - 1)
MAX_ATTENTION_EVERY = 32767
STRATA = ("generator", "context_length")


def _invalid(field: str, message: str) -> ApplicationError:
    return ApplicationError(f"{field}: {message}", extra={"fields": {field: message}})


def _check_stratify_by(fields: Sequence[str]) -> None:
    for name in fields:
        check_text(name, "stratify_by")
        if name not in STRATA and not (name.startswith("source.") and len(name) > len("source.")):
            raise _invalid(
                "stratify_by", f"cannot stratify by {name!r}: use generator, context_length or source.<field>"
            )


def _stratum(summary: Summary, fields: Sequence[str]) -> tuple:
    values = []
    for name in fields:
        if name == "generator":
            values.append(summary.generator)
        elif name == "context_length":
            values.append(context_bucket(summary.context_sentences))
        elif name.startswith("source."):
            values.append(str(summary.source.metadata.get(name.removeprefix("source."), "")))
        else:
            raise ApplicationError(f"cannot stratify by {name!r}: use generator, context_length or source.<field>")
    return tuple(values)


def plan_batch(
    *,
    summaries: Sequence[Summary],
    raters: Sequence,
    design: str,
    seed: int,
    n: int | None = None,
    stratify_by: Sequence[str] = (),
    k: int = 2,
    share: float = 0.2,
    m: int = 1,
) -> tuple[list[Summary], list[tuple[int, int]]]:
    """The sampled summaries and the (summary id, rater id) pairs, without writing."""
    if design not in DESIGNS:
        raise ApplicationError(f"design must be one of {', '.join(DESIGNS)}")
    _check_stratify_by(stratify_by)
    if not raters:
        raise ApplicationError("choose at least one rater")
    by_id = {s.pk: s for s in summaries}
    try:
        if n is not None:
            if stratify_by:
                chosen = designs.stratified_sample([(s.pk, _stratum(s, stratify_by)) for s in summaries], n, seed=seed)
            else:
                if n > len(summaries):
                    raise ValueError(f"cannot sample {n} of {len(summaries)} summaries")
                chosen = sorted(random.Random(seed).sample([s.pk for s in summaries], n))
        else:
            chosen = sorted(by_id)
        rater_ids = [r.pk for r in raters]
        if design == "k_raters":
            pairs = designs.k_raters(chosen, rater_ids, k, seed=seed)
        elif design == "partial_overlap":
            pairs = designs.partial_overlap(chosen, rater_ids, share=share, seed=seed)
        elif design == "pairwise_overlap":
            pairs = designs.pairwise_overlap(chosen, rater_ids, m=m, seed=seed)
        else:
            triples = [(pk, by_id[pk].source_id, by_id[pk].generator) for pk in chosen]
            pairs = designs.balanced_by_group(triples, rater_ids, k=k, seed=seed)
    except ValueError as exc:
        raise ApplicationError(str(exc)) from None
    return [by_id[pk] for pk in chosen], list(pairs)


def _comparison_of(study: Study, pair: tuple[Summary, Summary]) -> Comparison:
    """The study's comparison of exactly these two summaries (in either order), made when
    missing with the members in the given order."""
    a, b = pair
    found = (
        Comparison.objects.filter(study=study, member_rows__summary=a)
        .filter(member_rows__summary=b)
        .select_related("item")
    )
    for comparison in found:
        if comparison.member_rows.count() == 2:
            return comparison
    key = f"{a.source.key}~cmp~{a.pk}-{b.pk}"
    return create_comparison(study=study, key=key, summaries=[a, b])


def plan_comparisons(
    *, study: Study, summaries: Sequence[Summary], raters: Sequence, k: int, per_source: int | None, seed: int
) -> tuple[list[Summary], list[tuple[int, int]], dict[tuple[int, int], list[str]]]:
    """The comparison items (made when missing), the (item id, rater id) pairs and each
    pair's order on screen (summary uuids, left to right), from
    annotate.designs.comparison_design over the summaries' generators per source. A
    source with several summaries of one generator compares its first by key (the others
    would be a second pair of the same two systems)."""
    if not raters:
        raise ApplicationError("choose at least one rater")
    by_source: dict[int, dict[str, Summary]] = {}
    for summary in sorted(summaries, key=lambda s: s.key):
        by_source.setdefault(summary.source_id, {}).setdefault(summary.generator, summary)
    sources = {src: {gen: s.pk for gen, s in gens.items()} for src, gens in by_source.items() if len(gens) >= 2}
    if not sources:
        raise ApplicationError("no source has summaries from two or more generators to compare")
    by_id = {s.pk: s for s in summaries}
    try:
        rows = designs.comparison_design(sources, [r.pk for r in raters], k=k, per_source=per_source, seed=seed)
    except ValueError as exc:
        raise ApplicationError(str(exc)) from None
    items: dict[frozenset, Summary] = {}
    pairs: list[tuple[int, int]] = []
    shown: dict[tuple[int, int], list[str]] = {}
    for _source, left, right, rater_id in rows:
        pair = frozenset((left, right))
        if pair not in items:
            first, second = sorted((by_id[left], by_id[right]), key=lambda s: s.key)
            items[pair] = _comparison_of(study, (first, second)).item
        item = items[pair]
        pairs.append((item.pk, rater_id))
        shown[(rater_id, item.pk)] = [str(by_id[left].uuid), str(by_id[right].uuid)]
    return sorted(items.values(), key=lambda s: s.key), pairs, shown


def _default_orders(item_ids, rater_ids, seed) -> dict[tuple[int, int], list[str]]:
    """Each comparison item's order for each rater where no design chose one (gold items
    and attention checks that are comparisons): its members, swapped on a seeded coin."""
    members: dict[int, list[str]] = {}
    rows = ComparisonMember.objects.filter(comparison__item_id__in=list(item_ids)).order_by("index")
    for item_id, uuid in rows.values_list("comparison__item_id", "summary__uuid"):
        members.setdefault(item_id, []).append(str(uuid))
    orders = {}
    for item_id, order in members.items():
        for rater_id in rater_ids:
            flip = random.Random(f"{seed}:{rater_id}:{item_id}").random() < 0.5
            orders[(rater_id, item_id)] = order[::-1] if flip else order
    return orders


@transaction.atomic
def create_batch(
    *,
    study: Study,
    name: str,
    raters: Sequence,
    design: str,
    seed: int,
    kind: str = Batch.Kind.MAIN,
    filters: dict[str, Any] | None = None,
    n: int | None = None,
    stratify_by: Sequence[str] = (),
    k: int = 2,
    share: float = 0.2,
    m: int = 1,
    blinded: bool = True,
    created_by=None,
    gold: Sequence[Summary] = (),
    attention_every: int | None = None,
    training: bool = False,
    per_source: int | None = None,
) -> Batch:
    """Build a batch: filter, sample (seeded, optionally stratified), assign with a
    design, and queue each rater's items in a seeded order that keeps the summaries
    of one source together. The same inputs and seed give the same batch.

    Quality control: `gold` summaries (with expected answers) go to every rater;
    with `attention_every`, the study's attention checks are mixed into each queue
    after about every N items; `training` shows raters the expected answers after
    they submit an item that has them.

    No duplicate work: a summary that every chosen rater already has (a live assignment
    in any batch) is left out before sampling (counted in `design["held_summaries"]`);
    any other (summary, rater) pair that already has a live assignment is skipped, and
    the number skipped is kept in `design["skipped_pairs"]`
    (and on the returned batch as `skipped_pairs`). If every pair is skipped, nothing is
    created and the call is refused."""
    if kind not in Batch.Kind.values:
        raise ApplicationError(f"kind must be one of {', '.join(Batch.Kind.values)}")
    if design not in (*DESIGNS, COMPARISONS):
        raise ApplicationError(f"design must be one of {', '.join((*DESIGNS, COMPARISONS))}")
    if design == COMPARISONS and n is not None:
        raise _invalid("n", "a comparison batch compares every matching summary: use per_source to choose fewer pairs")
    check_text(name, "name")
    check_limit(name, "name", MAX_BATCH_NAME_CHARS)
    if not isinstance(seed, int) or not SEED_RANGE[0] <= seed <= SEED_RANGE[1]:
        raise _invalid("seed", f"must be a whole number from {SEED_RANGE[0]} to {SEED_RANGE[1]}")
    if attention_every is not None and not 1 <= attention_every <= MAX_ATTENTION_EVERY:
        raise _invalid("attention_every", f"must be from 1 to {MAX_ATTENTION_EVERY}")
    # Checked here and not only when sampling: without n the option would be ignored silently.
    _check_stratify_by(stratify_by)
    paused = RaterPause.objects.filter(study=study, rater__in=[r.pk for r in raters], resumed_at=None)
    if paused.exists():
        names = ", ".join(sorted(p.rater.get_username() for p in paused.select_related("rater")))
        raise _invalid("raters", f"paused in this study (no new items until resumed): {names}")
    if Batch.objects.filter(study=study, name=name).exists():
        # Named as a field, so the form shows it at its Name field.
        raise ApplicationError(
            f"study {study.slug!r} already has a batch named {name!r}",
            extra={"fields": {"name": f"This study already has a batch named {name!r}: choose another name."}},
        )
    filters = dict(filters or {})
    # Attention checks and gold items are added to every queue separately, never sampled.
    special = ExpectedAnswer.objects.filter(study=study).exclude(purpose=ExpectedAnswer.Purpose.TRAINING)
    if attention_every and not special.filter(purpose=ExpectedAnswer.Purpose.ATTENTION).exists():
        raise ApplicationError("the study has no attention checks: record expected answers with purpose attention")
    # A qualification batch is its gold items, given to every chosen rater: nothing sampled.
    qualification = kind == Batch.Kind.QUALIFICATION
    if qualification and not gold:
        raise _invalid("gold", "a qualification batch is made of gold items: list their summary keys")
    if not raters and not qualification:
        raise _invalid("raters", "choose at least one rater")
    candidates = (
        []
        if qualification
        else list(filter_summaries(study=study, **filters).exclude(pk__in=special.values("summary")))
    )
    if not candidates and not qualification:
        raise ApplicationError("no summaries match the filters")
    live = set(
        Assignment.objects.filter(study=study, rater__in=[r.pk for r in raters])
        .exclude(state=Assignment.State.WITHDRAWN)
        .values_list("rater_id", "summary_id")
    )
    shown: dict[tuple[int, int], list[str]] = {}
    if design == COMPARISONS:
        chosen, pairs, shown = plan_comparisons(
            study=study, summaries=candidates, raters=raters, k=k, per_source=per_source, seed=seed
        )
        candidates = []
    # Live work is left out before sampling, not after: a summary every chosen rater already
    # has could give nobody anything new, so a sample of 6 is 6 summaries to rate (it was
    # 2, and 8 skipped pairs, when the sample was drawn first).
    held = {s.pk for s in candidates if raters and all((r.pk, s.pk) in live for r in raters)}
    if held and len(held) == len(candidates):
        raise ApplicationError(
            f"nothing to create: the chosen raters already have each of the {len(held)} summaries that match"
        )
    candidates = [s for s in candidates if s.pk not in held]
    if held and n is not None and n > len(candidates):
        raise ApplicationError(
            f"cannot sample {n} of {len(candidates)} summaries: the other {len(held)} that match are with "
            "every chosen rater already"
        )
    if qualification:
        chosen, pairs = [], []
    elif design != COMPARISONS:
        chosen, pairs = plan_batch(
            summaries=candidates,
            raters=raters,
            design=design,
            seed=seed,
            n=n,
            stratify_by=stratify_by,
            k=k,
            share=share,
            m=m,
        )
    per_item = {"k_raters": k, "balanced": k, "partial_overlap": 1, "pairwise_overlap": 1, COMPARISONS: k}[design]
    batch = Batch.objects.create(
        study=study,
        name=name,
        kind=kind,
        seed=seed,
        raters_per_item=per_item,
        blinded=blinded,
        created_by=created_by,
        training=training,
        attention_every=attention_every,
        design={
            "design": design,
            "n": n,
            "stratify_by": list(stratify_by),
            "k": k,
            "share": share,
            "m": m,
            "filters": filters,
            "raters": [r.get_username() for r in raters],
            "held_summaries": len(held),
            # A qualification batch is its gold items: kept here so that raters who arrive
            # later (recruitment links) get them even when the batch was made without raters.
            **({"gold": [g.pk for g in gold]} if qualification else {}),
            **({"per_source": per_source, "comparisons": len(chosen)} if design == COMPARISONS else {}),
        },
    )
    expected = {e.summary_id: e for e in ExpectedAnswer.objects.filter(study=study)}
    for summary in gold:
        if summary.pk not in expected or expected[summary.pk].purpose != ExpectedAnswer.Purpose.GOLD:
            raise ApplicationError(f"{summary.key!r} has no gold answers: record them first")
    checks = sorted(pk for pk, e in expected.items() if e.purpose == ExpectedAnswer.Purpose.ATTENTION)
    by_rater: dict[int, list[int]] = {}
    for summary_id, rater_id in pairs:
        by_rater.setdefault(rater_id, []).append(summary_id)
    for rater in raters:
        for summary in gold:
            if summary.pk not in by_rater.setdefault(rater.pk, []):
                by_rater[rater.pk].append(summary.pk)
    sources = {s.pk: s.source_id for s in chosen} | {s.pk: s.source_id for s in gold}
    users = {u.pk: u for u in raters}
    every_item = {sid for ids in by_rater.values() for sid in ids} | set(checks)
    orders = _default_orders(every_item, list(users), seed) | shown
    rows = []
    skipped = 0
    for rater_id in list(by_rater):
        kept = [sid for sid in by_rater[rater_id] if (rater_id, sid) not in live]
        skipped += len(by_rater[rater_id]) - len(kept)
        by_rater[rater_id] = kept
    for rater_id, summary_ids in sorted(by_rater.items()):
        if not summary_ids:
            continue
        membership = add_study_member(study=study, user=users[rater_id], role=StudyMembership.Role.RATER)
        last = Assignment.objects.filter(study=study, rater_id=rater_id).aggregate(m=Max("position"))["m"]
        start = 0 if last is None else last + 1
        order = designs.rater_queue(
            [(sid, sources[sid]) for sid in summary_ids], seed=f"{membership.order_seed}:{seed}"
        )
        if attention_every:
            mixed = designs.insert_attention_checks(
                order, [("check", c) for c in checks], every=attention_every, seed=f"{membership.order_seed}:{seed}"
            )
            # A rater sees each check once: later repeats of a cycled check are dropped.
            seen: set[int] = set(order)
            order = []
            for entry in mixed:
                sid = entry[1] if isinstance(entry, tuple) else entry
                if isinstance(entry, tuple) and (sid in seen or (rater_id, sid) in live):
                    continue  # a check this rater already has (here or in another batch)
                seen.add(sid)
                order.append(sid)
        rows += [
            Assignment(
                study=study,
                batch=batch,
                summary_id=sid,
                rater_id=rater_id,
                position=start + i,
                shown_order=orders.get((rater_id, sid), []),
            )
            for i, sid in enumerate(order)
        ]
    if not rows and not (qualification and not raters):
        raise ApplicationError(
            f"nothing to create: each of the {skipped} chosen (summary, rater) pairs already has an assignment"
        )
    Assignment.objects.bulk_create(rows)
    batch.design = {**batch.design, "skipped_pairs": skipped}
    batch.save(update_fields=["design"])
    batch.skipped_pairs = skipped
    batch.held_summaries = len(held)
    batch.created_assignments = len(rows)
    return batch


class _Preview(Exception):
    """Raised inside preview_batch's transaction to roll the batch back."""

    def __init__(self, preview: dict[str, Any]):
        self.preview = preview


def preview_batch(**options) -> dict[str, Any]:
    """What create_batch(**options) would create, without keeping anything: the batch is
    built in a transaction that is then rolled back. Errors are create_batch's own.
    Returns items (distinct summaries), assignments, skipped_pairs, per_rater
    (username -> assignments), per_system (generator -> (items, assignments), single
    summaries only), per_pair ((username, username) -> items both are given), and for
    comparisons per_system_pair ("a vs b" -> (comparisons, assignments)) and per_side
    (generator -> (shown as A, shown as B)), so the balance of the design over systems,
    sides and rater pairs can be checked before creating it (the last two only when the
    batch has comparisons)."""
    try:
        with transaction.atomic():
            batch = create_batch(**options)
            rows = list(batch.assignments.values_list("summary_id", "summary__generator", "rater__username"))
            shown = [
                (summary, order)
                for summary, order in batch.assignments.values_list("summary_id", "shown_order")
                if order
            ]
            shown_uuids = {uuid for _, order in shown for uuid in order}
            generator_of = {
                str(uuid): generator
                for uuid, generator in Summary.objects.filter(uuid__in=shown_uuids).values_list("uuid", "generator")
            }
            single = [row for row in rows if row[1] != Comparison.ITEM_GENERATOR]
            raise _Preview(
                {
                    "items": len({summary for summary, _, _ in rows}),
                    "assignments": batch.created_assignments,
                    "skipped_pairs": batch.skipped_pairs,
                    "held_summaries": batch.held_summaries,
                    **preview_tables(rows),
                    "per_system": preview_tables(single)["per_system"],
                    **(comparison_tables(shown, generator_of) if shown else {}),
                }
            )
    except _Preview as done:
        return done.preview


def preview_tables(rows: Sequence[tuple[Any, str, str]]) -> dict[str, dict]:
    """From (summary, generator, rater) rows: assignments per rater, (items, assignments)
    per system, and items per rater pair (two raters given the same summary)."""
    per_rater: dict[str, int] = {}
    per_system: dict[str, list[int]] = {}
    raters_of: dict[Any, set[str]] = {}
    items_of: dict[str, set] = {}
    for summary, generator, rater in rows:
        per_rater[rater] = per_rater.get(rater, 0) + 1
        items_of.setdefault(generator, set()).add(summary)
        per_system.setdefault(generator, [0, 0])[1] += 1
        raters_of.setdefault(summary, set()).add(rater)
    for generator, items in items_of.items():
        per_system[generator][0] = len(items)
    per_pair: dict[tuple[str, str], int] = {}
    for raters in raters_of.values():
        for pair in itertools.combinations(sorted(raters), 2):
            per_pair[pair] = per_pair.get(pair, 0) + 1
    return {
        "per_rater": dict(sorted(per_rater.items())),
        "per_system": {g: tuple(v) for g, v in sorted(per_system.items())},
        "per_pair": dict(sorted(per_pair.items())),
    }


def comparison_tables(shown: Sequence[tuple[Any, list[str]]], generator_of: dict[str, str]) -> dict[str, dict]:
    """From (comparison item, summaries as shown left to right) of each comparison
    assignment and each summary's generator: (comparisons, assignments) per pair of
    systems, and per system how often it is shown on each side (A, B), the
    counterbalancing a side-by-side design promises. Empty for a batch of single summaries."""
    per_system_pair: dict[str, list] = {}
    per_side: dict[str, list[int]] = {}
    for item, order in shown:
        generators = [generator_of.get(uuid, "?") for uuid in order]
        counts = per_system_pair.setdefault(" vs ".join(sorted(generators)), [set(), 0])
        counts[0].add(item)
        counts[1] += 1
        for side, generator in enumerate(generators[:2]):
            per_side.setdefault(generator, [0, 0])[side] += 1
    return {
        "per_system_pair": {pair: (len(items), n) for pair, (items, n) in sorted(per_system_pair.items())},
        "per_side": {g: tuple(v) for g, v in sorted(per_side.items())},
    }


# --- assignments outside batches ---------------------------------------------------------


@transaction.atomic
def assign_summaries(
    *,
    study: Study,
    raters: Sequence,
    per_item: int,
    seed: int,
    summaries: Sequence[Summary] | None = None,
) -> list[Assignment]:
    """Give each summary `per_item` raters (counting existing assignments), with
    balanced workloads, and append the new ones to each rater's queue in that rater's
    own seeded random order. Running it again with the same inputs adds nothing."""
    if summaries is None:
        summaries = list(study.summaries.order_by("key"))
    if any(s.study_id != study.pk for s in summaries):
        raise ApplicationError("Every summary must belong to the study.")
    rater_ids = [r.pk for r in raters]
    existing: dict[int, set[int]] = {s.pk: set() for s in summaries}
    for summary_id, rater_id in Assignment.objects.filter(summary__in=summaries).values_list("summary", "rater"):
        existing[summary_id].add(rater_id)
    try:
        pairs = top_up_assignments(
            items=[s.pk for s in summaries], raters=rater_ids, per_item=per_item, existing=existing, seed=seed
        )
    except ValueError as exc:
        raise ApplicationError(str(exc)) from None

    created: list[Assignment] = []
    by_rater: dict[int, list[int]] = {}
    for summary_id, rater_id in pairs:
        by_rater.setdefault(rater_id, []).append(summary_id)
    users = {u.pk: u for u in raters}
    for rater_id, summary_ids in by_rater.items():
        membership = add_study_member(study=study, user=users[rater_id], role=StudyMembership.Role.RATER)
        last = Assignment.objects.filter(study=study, rater_id=rater_id).aggregate(m=Max("position"))["m"]
        start = 0 if last is None else last + 1
        order = shuffled_order(summary_ids, seed=f"{membership.order_seed}:{start}")
        created += Assignment.objects.bulk_create(
            Assignment(study=study, summary_id=sid, rater_id=rater_id, position=start + i)
            for i, sid in enumerate(order)
        )
    return created


# --- withdrawing and moving ---------------------------------------------------------------


@transaction.atomic
def withdraw_assignment(*, assignment: Assignment) -> Assignment:
    """Take an item off a rater's queue. Whatever they answered stays stored."""
    updated = (
        Assignment.objects.filter(pk=assignment.pk)
        .exclude(state=Assignment.State.WITHDRAWN)
        .update(
            state=Assignment.State.WITHDRAWN,
            withdrawn_at=timezone.now(),
            version=F("version") + 1,
            updated_at=timezone.now(),
        )
    )
    if not updated:
        raise InvalidStateError("This assignment is already withdrawn.")
    assignment.refresh_from_db()
    return assignment


@transaction.atomic
def move_assignment(*, assignment: Assignment, to_rater) -> Assignment:
    """Give the item to another rater: a new assignment for them, and the old one
    withdrawn (its answers and history kept) and pointing at the new one."""
    if assignment.rater_id == to_rater.pk:
        raise ApplicationError("The item is already with this rater.")
    if assignment.state == Assignment.State.WITHDRAWN:
        raise InvalidStateError("A withdrawn assignment cannot be moved.")
    if RaterPause.objects.filter(study=assignment.study_id, rater=to_rater, resumed_at=None).exists():
        raise ApplicationError(f"{to_rater.get_username()} is paused in this study: paused raters get no new items.")
    if (
        Assignment.objects.filter(summary=assignment.summary, rater=to_rater)
        .exclude(state=Assignment.State.WITHDRAWN)
        .exists()
    ):
        raise ApplicationError(f"{to_rater.get_username()} already has this summary (in this or another batch).")
    add_study_member(study=assignment.study, user=to_rater, role=StudyMembership.Role.RATER)
    last = Assignment.objects.filter(study=assignment.study, rater=to_rater).aggregate(m=Max("position"))["m"]
    withdraw_assignment(assignment=assignment)
    try:
        with transaction.atomic():
            new = Assignment.objects.create(
                study=assignment.study,
                batch=assignment.batch,
                summary=assignment.summary,
                rater=to_rater,
                position=0 if last is None else last + 1,
                shown_order=assignment.shown_order,
            )
    except IntegrityError:
        raise ApplicationError(f"{to_rater.get_username()} already has this item in this batch.") from None
    Assignment.objects.filter(pk=assignment.pk).update(moved_to=new)
    assignment.refresh_from_db()
    return new
