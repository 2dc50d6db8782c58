"""Reads of the live quality monitor and of the raters' questions (docs/monitoring.md):
the rows stats.monitor computes the figures from, who is paused or excluded, and the
flags raised about items. Study admins only, except the rater's own flags."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.db.models import BooleanField, Count, ExpressionWrapper, F, Q, QuerySet

from annotate.models import Assignment, Batch, ExpectedAnswer, ItemFlag, RaterExclusion, RaterPause, Study
from annotate.selectors.batches import answer_matches, batch_answers, first_answers, per_batch_state
from annotate.selectors.contents import rubric_definition
from stats.monitor import AnswerRow, BatchFigures, GoldRow, ItemRow, RaterFigures, batch_figures

if TYPE_CHECKING:  # the statistics load with the monitor's figures, not with the web app
    from stats.severity import DriftWindow, RaterSeverity

DEFAULT_FAST_FRACTION = 0.25


def _hashable(value: Any) -> Any:
    """An answer as a value stats can compare and count: lists and mappings as canonical
    JSON text (tickboxes in any order are the same answer)."""
    if isinstance(value, list):
        value = sorted(value, key=str)
    if isinstance(value, list | dict):
        return json.dumps(value, sort_keys=True)
    return value


def monitor_rows(batch: Batch) -> tuple[list[ItemRow], list[AnswerRow], list[GoldRow]]:
    """The tidy rows of stats.monitor for one batch: submitted items with their active
    time, the answers that count (initial phase) to comparable questions, and each
    expected answer (gold items and attention checks) compared with the rater's FIRST
    submitted answer (annotate.selectors.batches.first_answers: feedback cannot raise it)."""
    items = [
        ItemRow(username, str(summary_uuid), float(seconds))
        for username, summary_uuid, seconds in Assignment.objects.filter(
            batch=batch, state=Assignment.State.SUBMITTED
        ).values_list("rater__username", "summary__uuid", "active_seconds")
    ]
    questions = [q for q in rubric_definition(batch.study.rubric).questions if q.comparable and not q.highlights]
    answers = []
    for summary_id, by_rater in batch_answers(batch).items():
        for rater, (given, _rationales, revision) in by_rater.items():
            for q in questions:
                if given.get(q.key) is not None:
                    value = _hashable(given[q.key])
                    answers.append(
                        AnswerRow(
                            rater.get_username(), str(summary_id), q.key, value, q.plain_scale, revision.submitted_at
                        )
                    )
    expected = {
        e.summary_id: e.answers
        for e in ExpectedAnswer.objects.filter(
            study=batch.study_id, purpose__in=[ExpectedAnswer.Purpose.GOLD, ExpectedAnswer.Purpose.ATTENTION]
        )
    }
    gold = []
    for summary_id, by_rater in first_answers(batch, summaries=list(expected)).items():
        for rater, given in by_rater.items():
            for key, value in expected.get(summary_id, {}).items():
                correct = answer_matches(value, given.get(key))
                gold.append(GoldRow(rater.get_username(), correct, str(summary_id), key))
    return items, answers, gold


@dataclass(frozen=True)
class MonitorRow:
    """One rater's line on the monitor: the figures, the open items and the flags the
    admin acts on."""

    figures: RaterFigures
    user: Any
    open_items: int
    paused: RaterPause | None
    exclusion: RaterExclusion | None
    severity: RaterSeverity | None = None  # on the scale questions (stats.severity)
    drift: tuple[DriftWindow, ...] = ()  # agreement by window: the last DRIFT_SHOWN windows
    earlier_windows: int = 0  # windows before those (the report's drift table lists them all)
    earlier_agreement: float | None = None  # their mean agreement with the others

    @property
    def earlier_answers(self) -> int:
        """The answers the earlier windows cover (1 to this)."""
        return self.drift[0].first - 1 if self.drift else 0


@dataclass(frozen=True)
class Monitor:
    figures: BatchFigures
    rows: tuple[MonitorRow, ...]
    fast_fraction: float
    submitted: int
    planned: int


DRIFT_WINDOW = 10


def severity_and_drift(
    answers: list[AnswerRow], gold: list[GoldRow]
) -> tuple[dict[str, RaterSeverity], dict[str, list[DriftWindow]]]:
    """Severity on the plain scale questions, and drift over windows of DRIFT_WINDOW
    answers in the order each rater submitted them (gold: each expected answer compared
    with the rater's first answer, as the gold accuracy column): the pure figures of
    stats.severity over the monitor's own rows."""
    if not answers:
        return {}, {}
    import pandas as pd

    from stats.severity import drift, severity

    def numeric(value: Any) -> bool:
        return isinstance(value, int | float) and not isinstance(value, bool)

    scale = [a for a in answers if a.scale and numeric(a.answer)]
    frame = pd.DataFrame(
        {"item": [a.item for a in scale], "rater": [a.rater for a in scale], "value": [a.answer for a in scale]}
    )
    by_rater = {row.rater: row for row in severity(frame)} if len(frame) else {}
    correct = {(g.rater, g.item, g.question): g.correct for g in gold}
    rows = pd.DataFrame(
        {
            "item": [f"{a.item}:{a.question}" for a in answers],
            "rater": [a.rater for a in answers],
            "value": [a.answer for a in answers],
            "order": [a.order for a in answers],
            "gold_correct": [correct.get((a.rater, a.item, a.question)) for a in answers],
        }
    )
    windows: dict[str, list[DriftWindow]] = {}
    for window in drift(rows, window=DRIFT_WINDOW):
        windows.setdefault(window.rater, []).append(window)
    return by_rater, windows


def monitor_figures(batch: Batch, usernames: list[str], *, fast_fraction: float):
    """(figures, severity, drift) of the batch: computed from every answer that counts
    (monitor_rows, stats.monitor, stats.severity) once per state of the batch and kept in
    Django's cache, so a page that polls reads them back until an answer changes."""

    def compute():
        items, answers, gold = monitor_rows(batch)
        figures = batch_figures(
            items=items,
            answers=answers,
            gold=gold,
            raters=usernames,
            fast_fraction=fast_fraction,
            floor_seconds=batch.study.min_seconds_per_item,
        )
        return (figures, *severity_and_drift(answers, gold))

    return per_batch_state(batch, "monitor-figures", compute, fast_fraction, batch.study.min_seconds_per_item)


def batch_monitor(batch: Batch, *, fast_fraction: float = DEFAULT_FAST_FRACTION) -> Monitor:
    """Everything the monitor page shows of a batch, as the database is now (the page
    polls it): the figures from monitor_figures, the raters' open items, pauses and
    exclusions read each time."""
    assignments = Assignment.objects.filter(batch=batch)
    counts = assignments.values("rater_id", "state").annotate(n=Count("id")).order_by()
    rater_ids = {row["rater_id"] for row in counts}
    users = {u.get_username(): u for u in get_user_model().objects.filter(pk__in=rater_ids).order_by("username")}
    open_states = (Assignment.State.PENDING, Assignment.State.IN_PROGRESS)
    open_items: dict[int, int] = {}
    for row in counts:
        if row["state"] in open_states:
            open_items[row["rater_id"]] = open_items.get(row["rater_id"], 0) + row["n"]
    figures, severity, drift = monitor_figures(batch, list(users), fast_fraction=fast_fraction)
    pauses = {p.rater_id: p for p in open_pauses(batch.study).select_related("paused_by")}
    exclusions = {e.rater_id: e for e in batch.exclusions.select_related("excluded_by")}
    rows = tuple(
        MonitorRow(
            figures=f,
            user=users[f.rater],
            open_items=open_items.get(users[f.rater].pk, 0),
            paused=pauses.get(users[f.rater].pk),
            exclusion=exclusions.get(users[f.rater].pk),
            severity=severity.get(f.rater),
            **_drift_shown(drift.get(f.rater, [])),
        )
        for f in figures.raters
        if f.rater in users
    )
    live = [row for row in counts if row["state"] != Assignment.State.WITHDRAWN]
    return Monitor(
        figures=figures,
        rows=rows,
        fast_fraction=fast_fraction,
        submitted=sum(row["n"] for row in live if row["state"] == Assignment.State.SUBMITTED),
        planned=sum(row["n"] for row in live),
    )


# Windows of a rater shown on the monitor: the recent ones, where drift shows; a rater
# with hundreds of windows would otherwise fill the page the monitor polls every 5 s.
DRIFT_SHOWN = 12


def _drift_shown(windows: list[DriftWindow]) -> dict[str, Any]:
    """The last DRIFT_SHOWN windows, and how many came before with their mean agreement."""
    earlier, shown = windows[:-DRIFT_SHOWN], windows[-DRIFT_SHOWN:]
    values = [w.agreement_with_others for w in earlier if w.agreement_with_others is not None]
    return {
        "drift": tuple(shown),
        "earlier_windows": len(earlier),
        "earlier_agreement": sum(values) / len(values) if values else None,
    }


def batch_rater(batch: Batch, username: str):
    """The account of that username with items in the batch, else None."""
    return get_user_model().objects.filter(username=username, assignments__batch=batch).distinct().first()


def open_pauses(study: Study) -> QuerySet[RaterPause]:
    return RaterPause.objects.filter(study=study, resumed_at__isnull=True)


def is_paused(user, study: Study) -> bool:
    return RaterPause.objects.filter(rater=user, study=study, resumed_at__isnull=True).exists()


def study_exclusions(study: Study) -> QuerySet[RaterExclusion]:
    return RaterExclusion.objects.filter(batch__study=study).select_related("batch", "rater", "excluded_by")


# --- questions to the admin (item flags) --------------------------------------------------------


def study_flags(study: Study, *, status: str = "all") -> QuerySet[ItemFlag]:
    """The study's flags for the admins' inbox, open ones first, oldest first."""
    flags = ItemFlag.objects.filter(study=study).select_related(
        "raised_by", "answered_by", "assignment__summary", "assignment__batch"
    )
    if status == "open":
        flags = flags.filter(answered_at__isnull=True)
    elif status == "answered":
        flags = flags.filter(answered_at__isnull=False)
    return flags.order_by(F("answered_at").asc(nulls_first=True), "created_at", "pk")


def get_study_flag(study: Study, flag_uuid) -> ItemFlag | None:
    """The study's flag of that uuid; None for another study's, an unknown or a malformed id."""
    try:
        return ItemFlag.objects.filter(study=study, uuid=flag_uuid).first()
    except (ValueError, TypeError, ValidationError):
        return None


def item_flags(assignment: Assignment) -> tuple[list[ItemFlag], list[ItemFlag]]:
    """What a rater sees on an item, in one query: the flags they raised on it (with the
    answers when given), and the answers the admins shared with every rater of the study
    as guideline notes (oldest first). Never another rater's flag itself: those reach
    raters only as shared answers, without the question or who asked."""
    mine = Q(assignment__summary_id=assignment.summary_id, raised_by=assignment.rater_id)
    rows = list(
        ItemFlag.objects.filter(mine | Q(study=assignment.study_id, shared=True, answered_at__isnull=False))
        .annotate(on_item=ExpressionWrapper(mine, output_field=BooleanField()))
        .order_by("created_at", "pk")
    )
    shared = sorted((f for f in rows if f.shared and f.answered_at), key=lambda f: (f.answered_at, f.pk))
    return [f for f in rows if f.on_item], shared
