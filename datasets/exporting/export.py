"""The export of a study into a dataset folder (a service). The API and the admin run it
through datasets.export_runs. See the package docstring for the choices it makes."""

from __future__ import annotations

import json
import math
import uuid
from array import array
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from itertools import chain, groupby
from operator import itemgetter
from pathlib import Path
from typing import Any, NamedTuple

import orjson
from django.db.models import F, Min

from annotate.models import (
    Assignment,
    Batch,
    Claim,
    Comparison,
    ConsensusAnswer,
    Finding,
    ItemFlag,
    QualificationAttempt,
    QualificationRetry,
    RaterExclusion,
    Rating,
    Revision,
    Rubric,
    Source,
    Span,
    Study,
    StudyMembership,
    StudySettingChange,
    Summary,
)
from annotate.rubrics import NA, RubricDefinition
from annotate.selectors.counting import AnswerCandidate, counting_only, newest_rater_answers, submitted_revisions
from datasets.exporting.card import build_manifest, dataset_card, licence_notice
from datasets.exporting.folder import (
    ANSWER_CHUNK,
    FORMATS,
    ITERATOR_CHUNK,
    PHASE_ORDER,
    PHASES,
    TABLES,
    ExportError,
    TableWriter,
    canonical_json,
    iso_timestamp,
    pretty_json,
    sha256sums,
)
from datasets.exporting.licences import licence_allows_text
from datasets.exporting.raw_rows import raw_chunks
from recruit.selectors import onboarding_rows

_NA_JSON = canonical_json(NA)  # how an N/A answer's value reads in the ratings table

# --- reads ------------------------------------------------------------------------------------


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


class _CountingRevision(NamedTuple):
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
) -> dict[int, _CountingRevision]:
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
    chosen: dict[int, _CountingRevision] = {}
    # Values that repeat across revisions (phase, rubric, batch) are kept once each,
    # not once per revision: a study can have hundreds of thousands of revisions.
    shared: dict[Any, Any] = {}

    def once(value):
        return shared.setdefault(value, value)

    def candidates() -> Iterator[AnswerCandidate]:
        """Fills `chosen` and yields what newest_rater_answers needs, row by row, so the
        candidates are never all held at once."""
        rows_that_count = counting_only((row for chunk in _raw_chunks(rows) for row in chunk), key=itemgetter(1, 2))
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
            at = _utc(at)
            revision_phase, batch = once(revision_phase), once(batch)
            rubric = once((once(rubric_key), version))
            chosen[revision_id] = _CountingRevision(
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

    for revision_id in newest_rater_answers(candidates()):
        chosen[revision_id] = chosen[revision_id]._replace(agreement=True)
    return chosen


def _raw_chunks(queryset) -> Iterator[list[tuple]]:
    return raw_chunks(queryset, chunk_size=ANSWER_CHUNK)


REVISION_SLICE = 900  # revision ids per query (SQLite allows 999 parameters in old builds)


def _by_revision(queryset, revision_order: list[int], every: bool = False) -> Iterator[tuple[int, list[tuple]]]:
    """(revision id, its rows) for every revision of `revision_order` that has rows (with
    `every`, for every revision, an empty list for one without), in that order.
    `queryset` is a values_list whose first column is the revision id, ordered by it
    first; it is read REVISION_SLICE revisions at a time, and the rows keep their first
    column."""
    first = itemgetter(0)
    for start in range(0, len(revision_order), REVISION_SLICE):
        part = revision_order[start : start + REVISION_SLICE]
        rows = chain.from_iterable(_raw_chunks(queryset.filter(revision_id__in=part)))
        found = {revision_id: list(group) for revision_id, group in groupby(rows, key=first)}
        for revision_id in part:
            if revision_id in found or every:
                yield revision_id, found.get(revision_id, [])


def _utc(value: datetime | str) -> datetime:
    """A raw datetime column as an aware UTC datetime (SQLite returns the stored UTC text)."""
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def _uuid_text(value) -> str | None:
    """A uuid column as the export writes it, from SQLite's hex text or a driver's UUID."""
    if value is None:
        return None
    if isinstance(value, str) and len(value) == 32:  # SQLite: the 32 hex digits; no parsing needed
        v = value.lower()
        return f"{v[:8]}-{v[8:12]}-{v[12:16]}-{v[16:20]}-{v[20:]}"
    return str(value if isinstance(value, uuid.UUID) else uuid.UUID(value))


def _json_column(text: str | None) -> str:
    """A JSON column read raw (text on every backend) as canonical JSON text: sorted
    keys, compact, UTF-8 as is (orjson; json for what orjson refuses, e.g. NaN)."""
    if text is None:
        return "null"
    try:
        return orjson.dumps(orjson.loads(text), option=orjson.OPT_SORT_KEYS).decode()
    except (orjson.JSONDecodeError, orjson.JSONEncodeError):
        return canonical_json(json.loads(text))


# --- the export ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class ExportResult:
    out_dir: Path
    files: tuple[Path, ...]
    counts: dict[str, int]
    withheld_sources: tuple[str, ...]

    def summary_line(self) -> str:
        counts = ", ".join(f"{n} {name}" for name, n in self.counts.items())
        withheld = f"; {len(self.withheld_sources)} source texts withheld" if self.withheld_sources else ""
        return f"Exported to {self.out_dir}: {counts}{withheld}."


@dataclass
class _Scores:
    """Scale answers collected while the ratings stream past, for the card's agreement
    figures: small integer codes in parallel arrays, not row objects (the export
    appends to the arrays directly)."""

    items: dict[tuple[str, str | None], int] = field(default_factory=dict)  # (summary key, finding)
    # 32-bit codes (16-bit for questions): half the memory of Python's "l" arrays.
    item: array = field(default_factory=lambda: array("i"))
    rater: array = field(default_factory=lambda: array("i"))
    question: array = field(default_factory=lambda: array("h"))
    phase: array = field(default_factory=lambda: array("b"))
    score: array = field(default_factory=lambda: array("d"))

    def code(self, item: tuple[str, str | None]) -> int:
        return self.items.setdefault(item, len(self.items))


def _check_options(formats, phase) -> tuple[str, ...]:
    formats = tuple(dict.fromkeys(formats))
    unknown = [f for f in formats if f not in FORMATS]
    if unknown or not formats:
        raise ExportError(f"formats must be some of {', '.join(FORMATS)}, got {', '.join(formats) or 'none'}")
    if phase not in PHASES:
        raise ExportError(f"phase must be one of {', '.join(PHASES)}, got {phase!r}")
    return tuple(f for f in FORMATS if f in formats)


def export_dataset(
    *,
    study: Study,
    out_dir: Path,
    formats: Iterable[str] = FORMATS,
    phase: str = "all",
    include_calibration: bool = False,
    include_restricted: bool = False,
) -> ExportResult:
    """Write the study's dataset folder (docs/export-format.md) into `out_dir`, which
    must be empty or not exist. Sources whose licence does not allow redistribution
    are exported as identifiers only unless `include_restricted`."""
    formats = _check_options(formats, phase)
    out_dir = Path(out_dir)
    if out_dir.exists() and any(out_dir.iterdir()):
        raise ExportError(f"{out_dir} is not empty; export into a new folder")
    for fmt in formats:
        (out_dir / fmt).mkdir(parents=True, exist_ok=True)
    # The answer tables, with ten or more rows per revision, are written in larger chunks.
    chunks = {"ratings": ANSWER_CHUNK, "spans": ANSWER_CHUNK}
    writers = {name: TableWriter(out_dir, name, formats, chunk=chunks.get(name, ITERATOR_CHUNK)) for name in TABLES}
    try:
        context = _write_tables(study, writers, phase, include_calibration, include_restricted)
    finally:
        for writer in writers.values():
            writer.close()
    counts = {name: w.count for name, w in writers.items()}
    files = [p for w in writers.values() for p in w.paths]
    context.update(counts=counts, formats=formats, phase=phase, include_calibration=include_calibration)
    manifest = build_manifest(study, context, include_restricted)
    (out_dir / "study.json").write_text(pretty_json(manifest), encoding="utf-8")
    (out_dir / "README.md").write_text(dataset_card(study, context, include_restricted), encoding="utf-8")
    (out_dir / "LICENSE").write_text(licence_notice(context["withheld"], include_restricted), encoding="utf-8")
    files += [out_dir / "study.json", out_dir / "README.md", out_dir / "LICENSE"]
    (out_dir / "SHA256SUMS").write_text(sha256sums(out_dir, files), encoding="utf-8")
    files.append(out_dir / "SHA256SUMS")
    return ExportResult(
        out_dir=out_dir,
        files=tuple(sorted(files)),
        counts=counts,
        withheld_sources=tuple(context["withheld"]),
    )


def _write_tables(study, writers, phase, include_calibration, include_restricted) -> dict[str, Any]:
    definition = RubricDefinition.from_dict(study.rubric.definition)
    pseudonyms = rater_pseudonyms(study=study)
    counting = counting_revisions(
        study=study, phase=phase, include_calibration=include_calibration, pseudonyms=pseudonyms
    )

    # sources and findings
    withheld: list[str] = []
    sources = []
    text_ok: dict[int, bool] = {}
    all_sources = Source.objects.filter(study=study).order_by("key")
    for source in all_sources.iterator(chunk_size=ITERATOR_CHUNK):
        allowed = include_restricted or licence_allows_text(source.licence)
        text_ok[source.pk] = allowed
        if not allowed:
            withheld.append(source.key)
        sources.append((source.key, source.title, source.attribution, source.licence, source.licence_url, allowed))
        sentences = [
            {"index": s.index, "start": s.start, "end": s.end, "text": s.text, "ref": s.ref} for s in source.sentences
        ]
        writers["sources"].write(
            (
                source.key,
                str(source.uuid),
                source.title,
                source.text if allowed else None,
                not allowed,
                source.licence,
                source.licence_url,
                source.attribution,
                source.copyright,
                canonical_json(source.external_ids),
                canonical_json(source.metadata),
                canonical_json(sentences) if allowed else None,
            )
        )
    for f in Finding.objects.filter(source__study=study).select_related("source").order_by("source__key", "index"):
        allowed = text_ok[f.source_id]
        writers["findings"].write(
            (
                f.source.key,
                f.index,
                str(f.uuid),
                f.external_id,
                f.intervention if allowed else None,
                f.comparator if allowed else None,
                f.outcome if allowed else None,
                f.label,
                f.start,
                f.end,
                f.evidence if allowed else None,
            )
        )

    # summaries and claims
    flagged: list[str] = []
    summaries = (
        # A comparison's item stands for the comparison (the comparisons table), not a summary.
        Summary.objects.filter(study=study, comparison__isnull=True)
        .order_by("key")
        .values_list("key", "uuid", "source_id", "source__key", "text", "generator", "metadata", "flags", "parent__key")
    )
    for chunk in _raw_chunks(summaries):  # raw: JSON columns as text, made canonical by orjson
        rows = []
        for key, uid, source_id, source_key, text, generator, metadata, flags, parent_key in chunk:
            from_withheld = not text_ok[source_id]
            if from_withheld:
                flagged.append(key)
            rows.append(
                (
                    key,
                    _uuid_text(uid),
                    source_key,
                    text,
                    generator,
                    _json_column(metadata),
                    _json_column(flags),
                    parent_key,
                    from_withheld,
                )
            )
        writers["summaries"].write_many(rows)
    claims = Claim.objects.filter(summary__study=study).select_related("summary").order_by("summary__key", "index")
    for c in claims.iterator(chunk_size=ITERATOR_CHUNK):
        # An explanation is the checker's critique against the source and may quote it:
        # blanked for a withheld source like a span's quote. The claim is the summary's.
        source_ok = text_ok[c.summary.source_id]
        writers["claims"].write(
            (
                c.summary.key,
                c.index,
                str(c.uuid),
                c.text,
                c.start,
                c.end,
                canonical_json(c.refs),
                c.verdict,
                c.explanation if source_ok else None,
                c.probability,
            )
        )

    _write_qualification_attempts(study, writers, pseudonyms)

    batches = Batch.objects.filter(study=study)
    if not include_calibration:
        batches = batches.exclude(kind__in=Batch.OUTSIDE_ANALYSIS)
    # A design records its parameters as given, raters by username (possibly renamed
    # since): the list is rebuilt from the batch's assignments, as pseudonyms.
    batch_raters: dict[int, set[str]] = {}
    for batch_id, uid in Assignment.objects.filter(study=study, batch__isnull=False).values_list(
        "batch_id", "rater_id"
    ):
        batch_raters.setdefault(batch_id, set()).add(pseudonyms.get(uid, "rater-not-in-export"))
    for b in batches.order_by("name"):
        design = dict(b.design)
        if "raters" in design:
            design["raters"] = sorted(batch_raters.get(b.pk, ()))
        writers["batches"].write(
            (
                b.name,
                str(b.uuid),
                b.kind,
                canonical_json(design),
                b.seed,
                b.raters_per_item,
                b.blinded,
                b.training,
                b.attention_every,
            )
        )

    compared = set(Comparison.objects.filter(study=study).values_list("key", flat=True))
    scores, per_rater, rubric_versions, newest = _write_answer_tables(
        writers, definition, pseudonyms, counting, text_ok, compared
    )
    _write_comparison_tables(study, writers, definition, counting)
    del counting  # a record per revision: its memory goes to the card's statistics below

    # raters
    roles: dict[int, set[str]] = {}
    for user_id, role in StudyMembership.objects.filter(study=study).values_list("user_id", "role"):
        roles.setdefault(user_id, set()).add(role)
    for uid, name in sorted(pseudonyms.items(), key=lambda kv: kv[1]):
        counts = per_rater.get(uid, {"assignments": set(), "revisions": set(), "answers": 0, "spans": 0})
        if not counts["revisions"] and name.startswith("rater-"):
            continue  # a rater whose answers are all outside this export (e.g. calibration only)
        default = "rater" if name.startswith("rater-") else "admin"
        writers["raters"].write(
            (
                name,
                ",".join(sorted(roles.get(uid) or {default})),
                len(counts["assignments"]),
                len(counts["revisions"]),
                counts["answers"],
                counts["spans"],
            )
        )

    _write_onboarding(study, writers["onboarding"], pseudonyms)

    # consensus: the latest decision per (batch, summary, question) is the answer
    consensus = ConsensusAnswer.objects.filter(batch__in=batches).select_related("batch", "summary", "rubric")
    latest: dict[tuple[str, str, str], ConsensusAnswer] = {}
    for answer in consensus.order_by("created_at", "pk"):
        latest[(answer.batch.name, answer.summary.key, answer.question)] = answer
    for key in sorted(latest):
        answer = latest[key]
        rubric_versions.add((answer.rubric.key, answer.rubric.version))
        writers["consensus"].write(
            (
                *key,
                canonical_json(answer.value),
                answer.rationale or None,
                pseudonyms.get(answer.decided_by_id),
                iso_timestamp(answer.created_at),
                answer.rubric.key,
                answer.rubric.version,
            )
        )

    _write_quality_tables(study, writers, pseudonyms)

    rubric_versions.add((study.rubric.key, study.rubric.version))
    rubrics = []
    for key, version in sorted(rubric_versions):
        rubric = Rubric.objects.get(key=key, version=version)
        rubrics.append(rubric)
        writers["rubric"].write((key, version, rubric.title, rubric.content_hash, canonical_json(rubric.definition)))

    return {
        "definition": definition,
        "sources": sources,
        "withheld": withheld,
        "flagged_summaries": flagged,
        "agreement": _agreement(scores, definition),
        # Raters with an answer or a highlight in the export (not adjudicators, nor raters
        # whose answers are all left out).
        "raters_answered": len(per_rater),
        "rubrics": rubrics,
        "newest": newest,
    }


def _write_qualification_attempts(study, writers, pseudonyms) -> None:
    """Every scored qualification attempt, by pseudonym (a rater who skipped every item
    has no answers, hence no pseudonym: `rater-not-in-export`)."""
    retries = Counter(QualificationRetry.objects.filter(study=study).values_list("rater_id", flat=True))
    attempts = QualificationAttempt.objects.filter(study=study).select_related("rule")
    rows = [
        (
            pseudonyms.get(a.rater_id, "rater-not-in-export"),
            a.number,
            iso_timestamp(a.created_at),
            a.matched,
            a.compared,
            a.score,
            a.passed,
            a.rule.version,
            canonical_json(
                {
                    "threshold": a.rule.threshold,
                    "questions": a.rule.questions,
                    "tolerances": a.rule.tolerances,
                    "attempts_allowed": a.rule.attempts_allowed,
                }
            ),
            retries[a.rater_id],
        )
        for a in attempts
    ]
    writers["qualification_attempts"].write_many(sorted(rows, key=lambda row: (row[0], row[1])))


def _write_quality_tables(study, writers, pseudonyms: dict[int, str]) -> None:
    """The exclusions and the raters' questions (docs/monitoring.md), with pseudonymous
    ids: a rater who flagged an item before answering anything has no `rater-NN` and is
    `flagger-NN` by their first flag; an admin who never rated is `study-admin`."""
    flaggers: dict[int, str] = {}
    flags = list(
        ItemFlag.objects.filter(study=study)
        .select_related("assignment__summary", "assignment__batch")
        .order_by("created_at", "pk")
    )
    for flag in flags:
        if flag.raised_by_id not in pseudonyms and flag.raised_by_id not in flaggers:
            flaggers[flag.raised_by_id] = f"flagger-{len(flaggers) + 1:02d}"

    def name(user_id: int | None) -> str | None:
        if user_id is None:
            return None
        return pseudonyms.get(user_id) or flaggers.get(user_id) or "study-admin"

    exclusions = RaterExclusion.objects.filter(batch__study=study).select_related("batch").order_by("created_at", "pk")
    for exclusion in exclusions:
        left_out = Assignment.objects.filter(
            batch=exclusion.batch_id, rater=exclusion.rater_id, state=Assignment.State.SUBMITTED
        ).count()
        writers["exclusions"].write(
            (
                exclusion.batch.name,
                name(exclusion.rater_id),
                exclusion.reason,
                name(exclusion.excluded_by_id),
                iso_timestamp(exclusion.created_at),
                left_out,
            )
        )
    for change in StudySettingChange.objects.filter(study=study).order_by("created_at", "pk"):
        writers["settings_changes"].write(
            (
                change.field,
                change.before,
                change.after,
                name(change.changed_by_id),
                change.via,
                iso_timestamp(change.created_at),
            )
        )
    for flag in flags:
        batch = flag.assignment.batch
        writers["flags"].write(
            (
                flag.assignment.summary.key,
                batch.name if batch is not None else None,
                name(flag.raised_by_id),
                flag.kind,
                flag.note,
                iso_timestamp(flag.created_at),
                flag.answer or None,
                name(flag.answered_by_id),
                iso_timestamp(flag.answered_at),
                flag.shared,
            )
        )


def _write_onboarding(study, writer, pseudonyms: dict[int, str]) -> None:
    """The onboarding table (recruit.selectors.onboarding_rows): raters by their export
    pseudonym; someone with an onboarding trace and no answer in the study (a participant who
    declined, say) is `onboarded-NN`, numbered in the order of their first trace."""
    rows = onboarding_rows(study=study)
    others = [r["user_id"] for r in rows if r["user_id"] not in pseudonyms]
    width = max(2, len(str(len(others))))
    names = dict(pseudonyms) | {uid: f"onboarded-{i:0{width}d}" for i, uid in enumerate(others, start=1)}
    for r in sorted(rows, key=lambda r: names[r["user_id"]]):
        consent = [
            {"version": c["version"], "accepted": c["accepted"], "at": iso_timestamp(c["at"])} for c in r["consent"]
        ]
        writer.write(
            (
                names[r["user_id"]],
                r["panel"],
                r["outcome"],
                canonical_json(consent),
                iso_timestamp(r["instructions_opened_at"]),
                iso_timestamp(r["instructions_acknowledged_at"]),
                canonical_json(r["questionnaire"]) if r["questionnaire"] is not None else None,
                iso_timestamp(r["answered_at"]),
            )
        )


def _write_comparison_tables(study, writers, definition, counting) -> None:
    """The comparisons and every counting answer to a comparison question: positions (the
    summaries on the left and right as that revision was answered), the preference by
    summary key and by side, strength, rationale, and the highlights in either summary.
    Comparisons are few next to the answers: plain queries, no streaming."""
    comparisons = Comparison.objects.filter(study=study).select_related("item", "source").order_by("key")
    keys = dict(Summary.objects.filter(study=study).values_list("uuid", "key"))
    keys = {str(u): k for u, k in keys.items()}
    item_ids = {}
    for c in comparisons:
        members = [keys[str(u)] for u in c.member_rows.order_by("index").values_list("summary__uuid", flat=True)]
        item_ids[c.item_id] = c.key
        writers["comparisons"].write((c.key, str(c.uuid), c.source.key, canonical_json(members)))
    revisions = {
        pk: (item_id, order)
        for pk, item_id, order in Revision.objects.filter(
            pk__in=list(counting), assignment__summary_id__in=list(item_ids)
        ).values_list("pk", "assignment__summary_id", "shown_order")
    }
    if not revisions:
        return
    asked = {q.key: q for q in definition.questions if q.about_comparisons}
    answers: dict[tuple[int, str], dict] = {}
    for revision_id, question, value, rationale in Rating.objects.filter(
        revision_id__in=list(revisions), question__in=list(asked)
    ).values_list("revision_id", "question", "value", "rationale__text"):
        answers[(revision_id, question)] = {"value": value or {}, "rationale": rationale, "spans": []}
    for revision_id, question, span in (
        (s.revision_id, s.question, s)
        for s in Span.objects.filter(revision_id__in=list(revisions), question__in=list(asked)).order_by(
            "revision_id", "question", "index"
        )
    ):
        entry = answers.setdefault((revision_id, question), {"value": {}, "rationale": None, "spans": []})
        entry["spans"].append(
            {
                "index": span.index,
                "summary_key": keys.get(str(span.summary_uuid)),
                "start": span.start,
                "end": span.end,
                "text": span.text,
                "answers": span.answers,
                "rationale": span.rationale,
            }
        )
    rows = []
    for (revision_id, question), entry in answers.items():
        item_id, order = revisions[revision_id]
        info = counting[revision_id]
        left, right = (keys.get(u) for u in (list(order) + [None, None])[:2])
        preferred = entry["value"].get("preferred")
        preferred_key = "tie" if preferred == "tie" else keys.get(preferred)
        side = "tie" if preferred == "tie" else "left" if preferred and preferred == (order or [None])[0] else "right"
        rows.append(
            (
                item_ids[item_id],
                question,
                left,
                right,
                preferred_key,
                side if preferred else None,
                entry["value"].get("strength"),
                entry["rationale"],
                canonical_json(entry["spans"]) if asked[question].highlights else None,
            )
            + info.columns
        )
    # By comparison, batch, rater, phase, question and revision (the columns' places).
    rows.sort(key=lambda r: (r[0], r[13] or "", r[12], r[9], r[1], r[14]))
    writers["comparison_answers"].write_many(rows)


def _unticked(rubric: tuple[str, int], compared: bool, cache: dict) -> tuple[str, ...]:
    """The tickbox questions of a rubric version asked about the item (summaries rated
    alone, or comparisons): the rating page stores nothing for one left unticked, and the
    export writes it as an explicit empty answer."""
    key = (rubric, compared)
    if key not in cache:
        definition = RubricDefinition.from_dict(Rubric.objects.get(key=rubric[0], version=rubric[1]).definition)
        cache[key] = tuple(
            q.key for q in definition.questions if q.several_options and q.asked(has_findings=True, comparison=compared)
        )
    return cache[key]


def _write_answer_tables(writers, definition, pseudonyms, counting, text_ok, compared_keys=frozenset()):
    """Stream the ratings and spans of the counting revisions into their tables.

    The hot path of a large export (one row per answer): rows come raw in chunks, the
    revision's columns are looked up once per revision, and each table writer takes a
    chunk at a time. A tickbox question the revision left unticked gets a row with an
    empty list: in the ratings table, no row means not answered. `compared_keys`: the
    keys of the comparisons (their answers are about a comparison, not a summary)."""
    tickboxes: dict = {}
    # The agreement figures take what the study report takes (analysis.services):
    # every scale-valued question, each finding of a per-finding question as an item
    # of its own, N/A as its code where the rubric counts it as a category.
    scale_questions = [q for q in definition.questions if q.is_scale]
    scale_index = {q.key: i for i, q in enumerate(scale_questions)}
    na_codes = {q.key: float(q.na_code) for q in scale_questions if q.na_code is not None}
    ranks = {uid: i for i, uid in enumerate(sorted(pseudonyms, key=lambda u: pseudonyms[u]))}
    scores = _Scores()
    per_rater: dict[int, dict[str, Any]] = {}
    rubric_versions: set[tuple[str, int]] = set()
    newest: datetime | None = None

    def tally(revision_id: int, info: _CountingRevision, kind: str, n: int) -> None:
        nonlocal newest
        counts = per_rater.setdefault(
            info.rater_id, {"assignments": set(), "revisions": set(), "answers": 0, "spans": 0}
        )
        counts["assignments"].add(info.assignment_id)
        counts["revisions"].add(revision_id)
        counts[kind] += n
        rubric_versions.add(info.rubric)
        if newest is None or info.submitted_at > newest:
            newest = info.submitted_at

    def table_order(revision_id: int) -> tuple:
        """By summary, batch (none first), rater pseudonym, phase, then the assignment's
        uuid (only for two assignments that agree on all of those)."""
        info = counting[revision_id]
        phase, batch = info.columns[0], info.columns[4]
        return (info.summary_key, batch is not None, batch or "", ranks[info.rater_id], phase, info.assignment_uuid)

    # The counting revisions in table order; their answers are read a slice of
    # revisions at a time by revision id (an index), each revision's in question and
    # finding order. That is the order one query sorted by summary, batch, rater and
    # phase would give, without sorting every answer of the study in the database
    # (faster for a million answers on SQLite), and the
    # answers of revisions that do not count are never read.
    revision_order = sorted(counting, key=table_order)
    ratings = Rating.objects.order_by("revision_id", "question", F("finding__index").asc(nulls_first=True)).values_list(
        "revision_id",
        "question",
        "finding__uuid",
        "score",
        "value",
        "rationale__text",
    )
    write = writers["ratings"].write_many
    last_key = None
    item = 0
    add_item, add_rater, add_question = scores.item.append, scores.rater.append, scores.question.append
    add_phase, add_score = scores.phase.append, scores.score.append
    for revision_id, answers in _by_revision(ratings, revision_order, every=True):
        rows = []
        info = counting[revision_id]
        summary_key, columns = info.summary_key, info.columns
        unticked = set(_unticked(info.rubric, summary_key in compared_keys, tickboxes)) - {a[1] for a in answers}
        if not answers and not unticked:
            continue
        tally(revision_id, info, "answers", len(answers) + len(unticked))
        rank, phase_code, agrees = ranks[info.rater_id], PHASE_ORDER.get(columns[0], 0), info.agreement
        for _, question, finding, score, value, rationale in answers:
            if finding is not None:
                finding = _uuid_text(finding)
            # A scale answer is its score; anything else its JSON value, made canonical.
            text = str(score) if score is not None else _json_column(value)
            rows.append((summary_key, question, finding, score, text, rationale) + columns)
            if agrees and question in scale_index:
                if (summary_key, finding) != last_key:
                    last_key = (summary_key, finding)
                    item = scores.code(last_key)
                add_item(item)
                add_rater(rank)
                add_question(scale_index[question])
                add_phase(phase_code)
                if score is None:
                    add_score(na_codes.get(question, math.nan) if text == _NA_JSON else math.nan)
                else:
                    add_score(score)
        if unticked:
            rows += [(summary_key, key, None, None, "[]", None) + columns for key in unticked]
            rows.sort(key=lambda row: row[1])  # stable: a question's findings keep their order
        write(rows)

    spans = Span.objects.order_by("revision_id", "question", "index").values_list(
        "revision_id",
        "revision__assignment__summary__source_id",
        "question",
        "index",
        "target",
        "start",
        "end",
        "text",
        "link_start",
        "link_end",
        "link_text",
        "answers",
        "rationale",
    )
    write = writers["spans"].write_many
    for revision_id, found in _by_revision(spans, revision_order):
        rows = []
        info = counting[revision_id]
        tally(revision_id, info, "spans", len(found))
        for row in found:
            source_id, question, index, target, start, end, text = row[1:8]
            link_start, link_end, link_text, answers, rationale = row[8:]
            # Quotes of a withheld source are source text: offsets stay, the words go.
            source_ok = text_ok[source_id]
            rows.append(
                (
                    info.summary_key,
                    question,
                    index,
                    target,
                    start,
                    end,
                    text if target != Span.Target.SOURCE or source_ok else None,
                    link_start,
                    link_end,
                    (link_text if source_ok else None) if link_start is not None else None,
                    _json_column(answers),
                    rationale or None,
                )
                + info.columns
            )
        write(rows)
    return scores, per_rater, rubric_versions, newest


def _agreement(scores: _Scores, definition: RubricDefinition) -> list[dict[str, Any]]:
    """Agreement per scale-valued question, over each rater's answer per item (the
    post-discussion one where it exists; of several assignments to one summary, the
    newest submitted), each finding an item, N/A missing or a category as the rubric
    says: the choices and numbers of the analysis app (docs/statistics.md)."""
    import numpy as np
    import pandas as pd

    from stats.agreement import AgreementInputError, agreement_report

    def column(values: array):  # a view of the collected codes, not a copy
        return np.frombuffer(values, dtype=values.typecode if values.typecode == "d" else f"i{values.itemsize}")

    item, rater, question = column(scores.item), column(scores.rater), column(scores.question)
    phase, value = column(scores.phase), column(scores.score)
    # By item, rater and question, the later phase last (post-discussion over initial);
    # one question at a time, so only its rows are ever copied.
    order = np.lexsort((phase, question, rater, item))
    question_in_order = question[order]
    results = []
    for index, q in enumerate(q for q in definition.questions if q.is_scale):
        rows = order[question_in_order == index]
        items, raters = item[rows], rater[rows]
        last = np.ones(len(rows), dtype=bool)  # the last row of each (item, rater)
        last[:-1] = (items[1:] != items[:-1]) | (raters[1:] != raters[:-1])
        part = pd.DataFrame({"item": items[last], "rater": raters[last], "value": value[rows][last]})
        scale = q.analysis_scale
        entry: dict[str, Any] = {"question": q.key, "scale": list(scale), "report": None, "error": None}
        try:
            entry["report"] = agreement_report(part, [float(v) for v in scale], pairwise=False)
        except AgreementInputError as exc:
            entry["error"] = str(exc)
        results.append(entry)
    return results
