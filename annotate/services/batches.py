"""Batches and assignments: building a batch, previewing it, assigning outside batches,
withdrawing and moving one assignment.

A batch is built in pure steps, then persisted in one transaction: filter the study's
summaries (selectors.filter_summaries), sample them (optionally stratified), assign them
with one of the designs in annotate.designs, and plan each rater's queue
(designs.batch_work, designs.plan_queues); create_batch checks the options against the
database and stores what the plan decides with one bulk_create.

Quality control: `gold` summaries (with expected answers) go to every rater; with
`attention_every`, the study's attention checks are mixed into each queue after about
every N items; `training` shows raters the expected answers after they submit an item
that has them.

No duplicate work: a summary that every chosen rater already has (a live assignment in
any batch) is left out before sampling (counted in `design["held_summaries"]`); any other
(summary, rater) pair that already has a live assignment is skipped, and the number
skipped is kept in `design["skipped_pairs"]` (and on the returned batch as
`skipped_pairs`). If every pair is skipped, nothing is created and the call is refused.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Sequence
from typing import Any

from django.db import transaction
from django.db.models import Max

from annotate import designs
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
from core.exceptions import ApplicationError
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
    and attention checks that are comparisons): designs.comparison_orders over its members."""
    members: dict[int, list[str]] = {}
    rows = ComparisonMember.objects.filter(comparison__item_id__in=list(item_ids)).order_by("index")
    for item_id, uuid in rows.values_list("comparison__item_id", "summary__uuid"):
        members.setdefault(item_id, []).append(str(uuid))
    return designs.comparison_orders(members, rater_ids, seed=seed)


def _check_options(*, kind, design, n, name, seed, attention_every, stratify_by) -> None:
    """The options that need no database."""
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


def _check_study(*, study: Study, name: str, raters: Sequence) -> None:
    """No paused rater, and the name free in the study."""
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


def _live_pairs(study: Study, raters: Sequence) -> set[tuple[int, int]]:
    """(rater id, summary id) of every assignment of the raters in the study not withdrawn."""
    return set(
        Assignment.objects.filter(study=study, rater__in=[r.pk for r in raters])
        .exclude(state=Assignment.State.WITHDRAWN)
        .values_list("rater_id", "summary_id")
    )


def _candidates(study: Study, filters: dict, raters: Sequence, gold, attention_every, qualification: bool):
    """The summaries a batch may sample: the filters' matches, never an attention check or
    gold item (those join every queue separately); none for a qualification batch."""
    special = ExpectedAnswer.objects.filter(study=study).exclude(purpose=ExpectedAnswer.Purpose.TRAINING)
    if attention_every and not special.filter(purpose=ExpectedAnswer.Purpose.ATTENTION).exists():
        raise ApplicationError("the study has no attention checks: record expected answers with purpose attention")
    # A qualification batch is its gold items, given to every chosen rater: nothing sampled.
    if qualification and not gold:
        raise _invalid("gold", "a qualification batch is made of gold items: list their summary keys")
    if not raters and not qualification:
        raise _invalid("raters", "choose at least one rater")
    if qualification:
        return []
    candidates = list(filter_summaries(study=study, **filters).exclude(pk__in=special.values("summary")))
    if not candidates:
        raise ApplicationError("no summaries match the filters")
    return candidates


def _without_held(candidates: list[Summary], *, raters: Sequence, live: set, n: int | None):
    """The candidates without those every chosen rater already has, and how many those are.
    Live work is left out before sampling, not after: a summary every chosen rater already
    has could give nobody anything new, so a sample of 6 is 6 summaries to rate."""
    held = designs.held_items([s.pk for s in candidates], [r.pk for r in raters], live)
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
    return candidates, len(held)


def _check_gold(*, study: Study, gold: Sequence[Summary]) -> list[int]:
    """Every gold item has gold answers; returns the study's attention checks' ids."""
    expected = {e.summary_id: e for e in ExpectedAnswer.objects.filter(study=study)}
    for summary in gold:
        if summary.pk not in expected or expected[summary.pk].purpose != ExpectedAnswer.Purpose.GOLD:
            raise ApplicationError(f"{summary.key!r} has no gold answers: record them first")
    return sorted(pk for pk, e in expected.items() if e.purpose == ExpectedAnswer.Purpose.ATTENTION)


def _save_plan(*, batch: Batch, raters: Sequence, work: designs.BatchWork, groups, checks, shown, live) -> int:
    """Store the batch's assignments: the raters with new work become raters of the study,
    designs.plan_queues orders their queues after what they have, one bulk_create."""
    study = batch.study
    users = {u.pk: u for u in raters}
    order_seeds, starts = {}, {}
    for rater_id, _items in work.queues:
        membership = add_study_member(study=study, user=users[rater_id], role=StudyMembership.Role.RATER)
        last = Assignment.objects.filter(study=study, rater_id=rater_id).aggregate(m=Max("position"))["m"]
        order_seeds[rater_id], starts[rater_id] = membership.order_seed, 0 if last is None else last + 1
    plan = designs.plan_queues(
        work,
        groups=groups,
        seed=batch.seed,
        order_seeds=order_seeds,
        starts=starts,
        checks=checks,
        attention_every=batch.attention_every,
        live=live,
    )
    every_item = {item for _rater, items in work.queues for item in items} | set(checks)
    orders = _default_orders(every_item, list(users), batch.seed) | shown
    Assignment.objects.bulk_create(
        Assignment(
            study=study,
            batch=batch,
            summary_id=row.item_id,
            rater_id=row.rater_id,
            position=row.position,
            shown_order=orders.get((row.rater_id, row.item_id), []),
        )
        for row in plan.assignments
    )
    return len(plan.assignments)


def _choose(*, study: Study, candidates: list[Summary], raters: Sequence, live: set, qualification: bool, options):
    """The batch's items, the design's (item id, rater id) pairs, the comparisons' order on
    screen, and how many matching summaries every chosen rater already has."""
    design, seed, n = options["design"], options["seed"], options["n"]
    chosen, pairs, shown = [], [], {}
    if design == COMPARISONS:
        chosen, pairs, shown = plan_comparisons(
            study=study,
            summaries=candidates,
            raters=raters,
            k=options["k"],
            per_source=options["per_source"],
            seed=seed,
        )
        candidates = []
    candidates, held = _without_held(candidates, raters=raters, live=live, n=n)
    if not qualification and design != COMPARISONS:
        chosen, pairs = plan_batch(
            summaries=candidates,
            raters=raters,
            design=design,
            seed=seed,
            n=n,
            stratify_by=options["stratify_by"],
            k=options["k"],
            share=options["share"],
            m=options["m"],
        )
    return chosen, pairs, shown, held


def _new_batch(*, study: Study, options, filters: dict, raters: Sequence, gold, chosen, held: int) -> Batch:
    """The Batch row, its design and options kept in `design`."""
    design, k = options["design"], options["k"]
    qualification = options["kind"] == Batch.Kind.QUALIFICATION
    per_item = {"k_raters": k, "balanced": k, "partial_overlap": 1, "pairwise_overlap": 1, COMPARISONS: k}[design]
    return Batch.objects.create(
        study=study,
        name=options["name"],
        kind=options["kind"],
        seed=options["seed"],
        raters_per_item=per_item,
        blinded=options["blinded"],
        created_by=options["created_by"],
        training=options["training"],
        attention_every=options["attention_every"],
        design={
            "design": design,
            "n": options["n"],
            "stratify_by": list(options["stratify_by"]),
            "k": k,
            "share": options["share"],
            "m": options["m"],
            "filters": filters,
            "raters": [r.get_username() for r in raters],
            "held_summaries": held,
            # A qualification batch is its gold items: kept here so that raters who arrive
            # later (recruitment links) get them even when the batch was made without raters.
            **({"gold": [g.pk for g in gold]} if qualification else {}),
            **({"per_source": options["per_source"], "comparisons": len(chosen)} if design == COMPARISONS else {}),
        },
    )


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
    of one source together. The same inputs and seed give the same batch. Gold items,
    attention checks, training and no duplicate work: the module's docstring."""
    _check_options(
        kind=kind, design=design, n=n, name=name, seed=seed, attention_every=attention_every, stratify_by=stratify_by
    )
    options = {
        "name": name,
        "kind": kind,
        "design": design,
        "seed": seed,
        "n": n,
        "stratify_by": stratify_by,
        "k": k,
        "share": share,
        "m": m,
        "per_source": per_source,
        "blinded": blinded,
        "created_by": created_by,
        "training": training,
        "attention_every": attention_every,
    }
    _check_study(study=study, name=name, raters=raters)
    filters = dict(filters or {})
    qualification = kind == Batch.Kind.QUALIFICATION
    candidates = _candidates(study, filters, raters, gold, attention_every, qualification)
    live = _live_pairs(study, raters)
    chosen, pairs, shown, held = _choose(
        study=study, candidates=candidates, raters=raters, live=live, qualification=qualification, options=options
    )
    batch = _new_batch(
        study=study, options=options, filters=filters, raters=raters, gold=gold, chosen=chosen, held=held
    )
    checks = _check_gold(study=study, gold=gold)
    work = designs.batch_work(pairs, raters=[r.pk for r in raters], gold=[g.pk for g in gold], live=live)
    groups = {s.pk: s.source_id for s in chosen} | {s.pk: s.source_id for s in gold}
    created = _save_plan(batch=batch, raters=raters, work=work, groups=groups, checks=checks, shown=shown, live=live)
    if not created and not (qualification and not raters):
        raise ApplicationError(
            f"nothing to create: each of the {work.skipped_pairs} chosen (summary, rater) pairs already has an "
            "assignment"
        )
    batch.design = {**batch.design, "skipped_pairs": work.skipped_pairs}
    batch.save(update_fields=["design"])
    batch.skipped_pairs = work.skipped_pairs
    batch.held_summaries = held
    batch.created_assignments = created
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
