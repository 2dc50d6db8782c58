"""What the export reads: the raters' pseudonyms, the revisions that count (as raw rows,
one small record each), answers a slice of revisions at a time, and raw columns turned
into the text the export writes."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from itertools import chain, groupby
from operator import itemgetter
from typing import Any, NamedTuple

import orjson
from django.db.models import Min

from annotate.models import (
    Batch,
    ConsensusAnswer,
    Revision,
    Study,
)
from annotate.selectors.counting import AnswerCandidate, counting_only, newest_rater_answers, submitted_revisions
from datasets.exporting.folder import (
    ANSWER_CHUNK,
    canonical_json,
    iso_timestamp,
)
from datasets.exporting.raw_rows import raw_chunks


def rater_pseudonyms(*, study: Study) -> dict[int, str]:
    """User id -> pseudonym for everyone whose answers or decisions an export of the
    study can contain. Raters are `rater-NN`, numbered by their first submitted answer
    in the study (any phase or batch; ties by account); adjudicators who never rated
    are `adjudicator-NN` by their first consensus decision. The numbering depends only
    on the data, so it is stable across exports and survives a re-import."""
    firsts = (
        Revision.objects.filter(assignment__study=study, status=Revision.Status.SUBMITTED)
        .values("assignment__rater_id")
        .annotate(first=Min("submitted_at"))
        .order_by("first", "assignment__rater_id")
        .values_list("assignment__rater_id", flat=True)
    )
    raters = list(firsts)
    width = max(2, len(str(len(raters))))
    names = {uid: f"rater-{i:0{width}d}" for i, uid in enumerate(raters, start=1)}
    deciders = (
        ConsensusAnswer.objects.filter(batch__study=study)
        .exclude(decided_by_id__in=raters)
        .values("decided_by_id")
        .annotate(first=Min("created_at"))
        .order_by("first", "decided_by_id")
        .values_list("decided_by_id", flat=True)
    )
    others = list(deciders)
    width = max(2, len(str(len(others))))
    names.update({uid: f"adjudicator-{i:0{width}d}" for i, uid in enumerate(others, start=1)})
    return names


class CountingRevision(NamedTuple):
    """What every answer row of one counting revision repeats, computed once."""

    rater_id: int
    assignment_id: int
    submitted_at: datetime
    rubric: tuple[str, int]
    columns: tuple  # the _REVISION_COLUMNS values, in order
    summary_key: str
    # As the driver returns it (hex text on SQLite, a UUID on PostgreSQL): it only
    # breaks ties, and both order as the canonical text does.
    assignment_uuid: Any
    agreement: bool = False  # its scale answers go into the card's agreement figures


def counting_revisions(
    *, study: Study, phase: str, include_calibration: bool, pseudonyms: dict[int, str]
) -> dict[int, CountingRevision]:
    """The answers that count, by revision id: per assignment and phase, the newest
    submitted revision (annotate.selectors.counting's rule, read here as raw rows).
    One small record per revision, so the answer rows (ten or more per revision) are
    read without joining or converting the revision's columns again.

    `agreement` marks the revisions the analysis app counts as a rater's answers:
    calibration batches left out (the study report never includes them), and of one
    rater's several assignments to a summary the one annotate.selectors.
    newest_rater_answers chooses, so the card's figures are the report's."""
    rows = submitted_revisions(study=study, phase=phase, include_calibration=include_calibration).values_list(
        "id",
        "assignment_id",
        "phase",
        "assignment__rater_id",
        "rubric__key",
        "rubric__version",
        "assignment__batch__name",
        "number",
        "submitted_at",
        "assisted",
        "assignment__summary_id",
        "assignment__uuid",
        "assignment__batch__kind",
        "assignment__summary__key",
    )
    chosen: dict[int, CountingRevision] = {}
    for revision_id in newest_rater_answers(_answer_candidates(rows, chosen, pseudonyms)):
        chosen[revision_id] = chosen[revision_id]._replace(agreement=True)
    return chosen


def _answer_candidates(
    rows, chosen: dict[int, CountingRevision], pseudonyms: dict[int, str]
) -> Iterator[AnswerCandidate]:
    """Fills `chosen` with each counting revision's record and yields what
    newest_rater_answers needs, row by row, so the candidates are never all held at once."""
    # Values that repeat across revisions (phase, rubric, batch) are kept once each,
    # not once per revision: a study can have hundreds of thousands of revisions.
    shared: dict[Any, Any] = {}

    def once(value):
        return shared.setdefault(value, value)

    rows_that_count = counting_only((row for chunk in answer_chunks(rows) for row in chunk), key=itemgetter(1, 2))
    for (
        revision_id,
        assignment_id,
        revision_phase,
        uid,
        rubric_key,
        version,
        batch,
        number,
        at,
        assisted,
        summary_id,
        assignment_uuid,
        batch_kind,
        summary_key,
    ) in rows_that_count:
        at = utc(at)
        revision_phase, batch = once(revision_phase), once(batch)
        rubric = once((once(rubric_key), version))
        chosen[revision_id] = CountingRevision(
            rater_id=uid,
            assignment_id=assignment_id,
            submitted_at=at,
            rubric=rubric,
            columns=(
                revision_phase,
                rubric[0],
                version,
                pseudonyms[uid],
                batch,
                number,
                iso_timestamp(at),
                bool(assisted),  # SQLite returns 0/1
            ),
            summary_key=summary_key,
            assignment_uuid=assignment_uuid,
        )
        if batch_kind not in Batch.OUTSIDE_ANALYSIS:
            yield AnswerCandidate(
                revision_id=revision_id,
                summary_id=summary_id,
                rater_id=uid,
                phase=revision_phase,
                submitted_at=at,
                batch_name=batch or "",
                assignment_uuid=assignment_uuid,
            )


def answer_chunks(queryset) -> Iterator[list[tuple]]:
    """A values_list's raw rows in lists of ANSWER_CHUNK."""
    return raw_chunks(queryset, chunk_size=ANSWER_CHUNK)


REVISION_SLICE = 900  # revision ids per query (SQLite allows 999 parameters in old builds)


def by_revision(queryset, revision_order: list[int], every: bool = False) -> Iterator[tuple[int, list[tuple]]]:
    """(revision id, its rows) for every revision of `revision_order` that has rows (with
    `every`, for every revision, an empty list for one without), in that order.
    `queryset` is a values_list whose first column is the revision id, ordered by it
    first; it is read REVISION_SLICE revisions at a time, and the rows keep their first
    column."""
    first = itemgetter(0)
    for start in range(0, len(revision_order), REVISION_SLICE):
        part = revision_order[start : start + REVISION_SLICE]
        rows = chain.from_iterable(answer_chunks(queryset.filter(revision_id__in=part)))
        found = {revision_id: list(group) for revision_id, group in groupby(rows, key=first)}
        for revision_id in part:
            if revision_id in found or every:
                yield revision_id, found.get(revision_id, [])


def utc(value: datetime | str) -> datetime:
    """A raw datetime column as an aware UTC datetime (SQLite returns the stored UTC text)."""
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def uuid_text(value) -> str | None:
    """A uuid column as the export writes it, from SQLite's hex text or a driver's UUID."""
    if value is None:
        return None
    if isinstance(value, str) and len(value) == 32:  # SQLite: the 32 hex digits; no parsing needed
        v = value.lower()
        return f"{v[:8]}-{v[8:12]}-{v[12:16]}-{v[16:20]}-{v[20:]}"
    return str(value if isinstance(value, uuid.UUID) else uuid.UUID(value))


def json_column(text: str | None) -> str:
    """A JSON column read raw (text on every backend) as canonical JSON text: sorted
    keys, compact, UTF-8 as is (orjson; json for what orjson refuses, e.g. NaN)."""
    if text is None:
        return "null"
    try:
        return orjson.dumps(orjson.loads(text), option=orjson.OPT_SORT_KEYS).decode()
    except (orjson.JSONDecodeError, orjson.JSONEncodeError):
        return canonical_json(json.loads(text))
