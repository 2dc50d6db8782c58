"""The export of a study into a dataset folder (a service), and its Celery/admin entry
point. See the package docstring for the choices it makes."""

from __future__ import annotations

import math
from array import array
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Case, F, IntegerField, Min, Prefetch, Value, When
from django.utils import timezone

from annotate.exporting.card import build_manifest, dataset_card, licence_notice
from annotate.exporting.folder import (
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
from annotate.exporting.licences import licence_allows_text
from annotate.models import (
    Assignment,
    Batch,
    Claim,
    ConsensusAnswer,
    Finding,
    Rating,
    Revision,
    Rubric,
    Source,
    SourceSentence,
    Span,
    Study,
    StudyMembership,
    Summary,
)
from annotate.rubrics import RubricDefinition

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


def counting_revision_ids(*, study: Study, phase: str, include_calibration: bool) -> set[int]:
    """Ids of the answers that count: per assignment and phase, the newest submitted
    revision (the rule of annotate.selectors.latest_submitted_revisions), read as ids
    only so that a large study stays small in memory."""
    revisions = Revision.objects.filter(assignment__study=study, status=Revision.Status.SUBMITTED)
    if not include_calibration:
        revisions = revisions.exclude(assignment__batch__kind=Batch.Kind.CALIBRATION)
    if phase != "all":
        revisions = revisions.filter(phase=phase)
    chosen: dict[tuple[int, str], int] = {}
    rows = revisions.order_by("assignment_id", "phase", "-number").values_list("id", "assignment_id", "phase")
    for revision_id, assignment_id, revision_phase in rows.iterator(chunk_size=ITERATOR_CHUNK):
        chosen.setdefault((assignment_id, revision_phase), revision_id)
    return set(chosen.values())


def _rater_rank(path: str, pseudonyms: dict[int, str]) -> Case:
    """Order by pseudonym (not by user id, which differs between instances)."""
    ranked = sorted(pseudonyms, key=lambda uid: pseudonyms[uid])
    whens = [When(**{path: uid}, then=Value(i)) for i, uid in enumerate(ranked)]
    return Case(*whens, default=Value(len(ranked)), output_field=IntegerField())


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
    figures: small integer codes in arrays, not row objects."""

    items: dict[str, int] = field(default_factory=dict)
    item: array = field(default_factory=lambda: array("l"))
    rater: array = field(default_factory=lambda: array("l"))
    question: array = field(default_factory=lambda: array("l"))
    phase: array = field(default_factory=lambda: array("b"))
    score: array = field(default_factory=lambda: array("d"))

    def add(self, item: str, rater: int, question: int, phase: str, score: float) -> None:
        self.item.append(self.items.setdefault(item, len(self.items)))
        self.rater.append(rater)
        self.question.append(question)
        self.phase.append(PHASE_ORDER.get(phase, 0))
        self.score.append(score)


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
    writers = {name: TableWriter(out_dir, name, formats) for name in TABLES}
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
    counting = counting_revision_ids(study=study, phase=phase, include_calibration=include_calibration)

    # sources and findings
    withheld: list[str] = []
    sources = []
    text_ok: dict[int, bool] = {}
    sentence_order = Prefetch("sentences", queryset=SourceSentence.objects.order_by("index"))
    all_sources = Source.objects.filter(study=study).prefetch_related(sentence_order).order_by("key")
    for source in all_sources.iterator(chunk_size=ITERATOR_CHUNK):
        allowed = include_restricted or licence_allows_text(source.licence)
        text_ok[source.pk] = allowed
        if not allowed:
            withheld.append(source.key)
        sources.append((source.key, source.title, source.attribution, source.licence, source.licence_url, allowed))
        sentences = [
            {"index": s.index, "start": s.start, "end": s.end, "text": s.text, "ref": s.ref}
            for s in source.sentences.all()
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
    summaries = Summary.objects.filter(study=study).select_related("source", "parent").order_by("key")
    for s in summaries.iterator(chunk_size=ITERATOR_CHUNK):
        from_withheld = not text_ok[s.source_id]
        if from_withheld:
            flagged.append(s.key)
        writers["summaries"].write(
            (
                s.key,
                str(s.uuid),
                s.source.key,
                s.text,
                s.generator,
                canonical_json(s.metadata),
                canonical_json(s.flags),
                s.parent.key if s.parent_id else None,
                from_withheld,
            )
        )
    claims = Claim.objects.filter(summary__study=study).select_related("summary").order_by("summary__key", "index")
    for c in claims.iterator(chunk_size=ITERATOR_CHUNK):
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
                c.explanation,
                c.probability,
            )
        )

    batches = Batch.objects.filter(study=study)
    if not include_calibration:
        batches = batches.exclude(kind=Batch.Kind.CALIBRATION)
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

    scores, per_rater, rubric_versions, newest = _write_answers(
        study, writers, definition, pseudonyms, counting, text_ok
    )

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
        "rubrics": rubrics,
        "newest": newest,
    }


def _write_answers(study, writers, definition, pseudonyms, counting, text_ok):
    """Stream the ratings and spans of the counting revisions into their tables."""
    scale_keys = [q.key for q in definition.questions if q.kind == "scale"]
    scale_index = {key: i for i, key in enumerate(scale_keys)}
    ranks = {uid: i for i, uid in enumerate(sorted(pseudonyms, key=lambda u: pseudonyms[u]))}
    scores = _Scores()
    per_rater: dict[Any, Any] = {}
    rubric_versions: set[tuple[str, int]] = set()
    newest: datetime | None = None

    def tally(uid: int, assignment_id: int, revision_id: int, kind: str) -> None:
        counts = per_rater.setdefault(uid, {"assignments": set(), "revisions": set(), "answers": 0, "spans": 0})
        counts["assignments"].add(assignment_id)
        counts["revisions"].add(revision_id)
        counts[kind] += 1

    order = [
        "revision__assignment__summary__key",
        F("revision__assignment__batch__name").asc(nulls_first=True),
        "rank",
        "revision__phase",
        "question",
    ]
    ratings = (
        Rating.objects.filter(revision__assignment__study=study, revision__status=Revision.Status.SUBMITTED)
        .annotate(rank=_rater_rank("revision__assignment__rater_id", pseudonyms))
        .order_by(*order, F("finding__index").asc(nulls_first=True))
        .values_list(
            "revision_id",
            "revision__assignment_id",
            "revision__assignment__rater_id",
            "revision__assignment__summary__key",
            "question",
            "finding__uuid",
            "score",
            "value",
            "rationale__text",
            "revision__phase",
            "revision__rubric__key",
            "revision__rubric__version",
            "revision__assignment__batch__name",
            "revision__number",
            "revision__submitted_at",
            "revision__assisted",
        )
    )
    write = writers["ratings"].write
    last_revision = None
    for row in ratings.iterator(chunk_size=ITERATOR_CHUNK):
        (revision_id, assignment_id, uid, summary_key, question, finding, score, value, rationale) = row[:9]
        if revision_id not in counting:
            continue
        phase, rubric_key, rubric_version, batch, number, submitted_at, assisted = row[9:]
        if revision_id != last_revision:
            last_revision = revision_id
            rubric_versions.add((rubric_key, rubric_version))
            if newest is None or submitted_at > newest:
                newest = submitted_at
        answer = score if score is not None else value
        write(
            (
                summary_key,
                question,
                str(finding) if finding is not None else None,
                score,
                canonical_json(answer),
                rationale,
                phase,
                rubric_key,
                rubric_version,
                pseudonyms[uid],
                batch,
                number,
                iso_timestamp(submitted_at),
                assisted,
            )
        )
        tally(uid, assignment_id, revision_id, "answers")
        if finding is None and question in scale_index:
            scores.add(summary_key, ranks[uid], scale_index[question], phase, math.nan if score is None else score)

    spans = (
        Span.objects.filter(revision__assignment__study=study, revision__status=Revision.Status.SUBMITTED)
        .annotate(rank=_rater_rank("revision__assignment__rater_id", pseudonyms))
        .order_by(*order, "index")
        .values_list(
            "revision_id",
            "revision__assignment_id",
            "revision__assignment__rater_id",
            "revision__assignment__summary__key",
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
            "revision__phase",
            "revision__rubric__key",
            "revision__rubric__version",
            "revision__assignment__batch__name",
            "revision__number",
            "revision__submitted_at",
            "revision__assisted",
        )
    )
    for row in spans.iterator(chunk_size=ITERATOR_CHUNK):
        revision_id, assignment_id, uid, summary_key, source_id, question, index, target = row[:8]
        if revision_id not in counting:
            continue
        start, end, text, link_start, link_end, link_text, answers, rationale = row[8:16]
        phase, rubric_key, rubric_version, batch, number, submitted_at, assisted = row[16:]
        rubric_versions.add((rubric_key, rubric_version))
        if newest is None or submitted_at > newest:
            newest = submitted_at
        # Quotes of a withheld source are source text: offsets stay, the words go.
        source_ok = text_ok[source_id]
        writers["spans"].write(
            (
                summary_key,
                question,
                index,
                target,
                start,
                end,
                text if target != Span.Target.SOURCE or source_ok else None,
                link_start,
                link_end,
                (link_text if source_ok else None) if link_start is not None else None,
                canonical_json(answers),
                rationale or None,
                phase,
                rubric_key,
                rubric_version,
                pseudonyms[uid],
                batch,
                number,
                iso_timestamp(submitted_at),
                assisted,
            )
        )
        tally(uid, assignment_id, revision_id, "spans")
    return scores, per_rater, rubric_versions, newest


def _agreement(scores: _Scores, definition: RubricDefinition) -> list[dict[str, Any]]:
    """Agreement per scale question, over each rater's newest answer per item (the
    post-discussion one where it exists), N/A as a missing rating: the choices of the
    analysis app (docs/statistics.md)."""
    import numpy as np
    import pandas as pd

    from analysis.agreement import AgreementInputError, agreement_report

    frame = pd.DataFrame(
        {
            "item": np.asarray(scores.item),
            "rater": np.asarray(scores.rater),
            "question": np.asarray(scores.question),
            "phase": np.asarray(scores.phase),
            "value": np.asarray(scores.score),
        }
    )
    frame = frame.sort_values(["item", "rater", "question", "phase"], kind="stable")
    frame = frame.drop_duplicates(["item", "rater", "question"], keep="last")
    results = []
    for index, q in enumerate(q for q in definition.questions if q.kind == "scale"):
        part = frame[frame["question"] == index][["item", "rater", "value"]]
        entry: dict[str, Any] = {"question": q.key, "scale": list(q.values), "report": None, "error": None}
        try:
            entry["report"] = agreement_report(part, [float(v) for v in q.values])
        except AgreementInputError as exc:
            entry["error"] = str(exc)
        results.append(entry)
    return results


# --- Celery / admin entry point -------------------------------------------------------------------


def export_folder(*, study: Study) -> Path:
    """A fresh folder for an export started from the admin: var/exports/<slug>/<time>/."""
    stamp = timezone.now().astimezone(UTC).strftime("%Y%m%dT%H%M%S%fZ")
    return Path(settings.BASE_DIR) / "var" / "exports" / study.slug / stamp


def request_dataset_export(*, study: Study, phase: str = "all", include_calibration: bool = False) -> Path:
    """Enqueue a CC BY export of the study (restricted sources withheld) once the
    current transaction commits; returns the folder it will be written to."""
    from annotate.tasks import export_dataset_task

    out_dir = export_folder(study=study)
    transaction.on_commit(
        lambda: export_dataset_task.delay(
            study.pk, str(out_dir), formats=list(FORMATS), phase=phase, include_calibration=include_calibration
        )
    )
    return out_dir
