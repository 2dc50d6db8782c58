"""The dataset folder: export of a study (a service) and its re-import into an empty
instance. The format is documented in docs/export-format.md.

Export streams every table from database iterators into all requested formats at
once (JSON Lines, CSV, Parquet in row groups), so a study with a million answers never
sits in Python objects. Everything is sorted by data, never by database ids or export
time, so exporting the same study twice gives byte-identical files.

Two choices the issue leaves open, argued in docs/export-format.md:
- raters are numbered `rater-01`, `rater-02`, ... in the order of their first submitted
  answer in the study (ties by account), which is stable across exports, survives a
  re-import, and says nothing about who they are;
- summaries written from a withheld source stay in the export, flagged
  `source_withheld`: they are the study's own output and the object that was rated.

The agreement figures of the dataset card come from `analysis.agreement`, which is
pure (no ORM, no import of annotate), so this is the one place annotate reads a
statistic: the card must carry the same numbers as the analysis app.
"""

from __future__ import annotations

import csv
import hashlib
import json
import math
import re
from array import array
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction
from django.db.models import Case, F, IntegerField, Min, Prefetch, Value, When
from django.utils import timezone

from annotate.exceptions import ApplicationError
from annotate.models import (
    Assignment,
    Batch,
    Claim,
    ConsensusAnswer,
    Finding,
    Rating,
    Rationale,
    Revision,
    Rubric,
    Source,
    SourceSentence,
    Span,
    Study,
    StudyMembership,
    Summary,
)
from annotate.rubrics import NA, AnswerContext, RubricDefinition

FORMAT_VERSION = 1
FORMATS = ("jsonl", "csv", "parquet")
PHASES = ("initial", "post_discussion", "all")
PHASE_ORDER = {"initial": 0, "post_discussion": 1}
ITERATOR_CHUNK = 5000
ROW_GROUP = 65536
LICENCE_URL = "https://creativecommons.org/licenses/by/4.0/"
LEGAL_CODE_URL = "https://creativecommons.org/licenses/by/4.0/legalcode"


class ExportError(ApplicationError):
    """The export cannot be made as asked."""


class DatasetImportError(ApplicationError):
    """The folder cannot be imported; nothing was written."""


# --- the tables ---------------------------------------------------------------------------

# Column kinds: str, int, bool, float, json (JSON text in every format, so one column has
# one type in Parquet and the Hugging Face loader; see docs/export-format.md).
# Where an answer came from: the columns ratings and spans share.
_REVISION_COLUMNS = (
    ("phase", "str"),
    ("rubric_key", "str"),
    ("rubric_version", "int"),
    ("rater", "str"),
    ("batch", "str"),
    ("revision_number", "int"),
    ("submitted_at", "str"),
    ("assisted", "bool"),
)

TABLES: dict[str, tuple[tuple[str, str], ...]] = {
    "sources": (
        ("source_key", "str"),
        ("uuid", "str"),
        ("title", "str"),
        ("text", "str"),
        ("text_withheld", "bool"),
        ("licence", "str"),
        ("licence_url", "str"),
        ("attribution", "str"),
        ("copyright", "str"),
        ("external_ids", "json"),
        ("metadata", "json"),
        ("sentences", "json"),
    ),
    "findings": (
        ("source_key", "str"),
        ("index", "int"),
        ("uuid", "str"),
        ("external_id", "str"),
        ("intervention", "str"),
        ("comparator", "str"),
        ("outcome", "str"),
        ("label", "str"),
        ("start", "int"),
        ("end", "int"),
        ("evidence", "str"),
    ),
    "summaries": (
        ("summary_key", "str"),
        ("uuid", "str"),
        ("source_key", "str"),
        ("text", "str"),
        ("generator", "str"),
        ("metadata", "json"),
        ("flags", "json"),
        ("parent_key", "str"),
        ("source_withheld", "bool"),
    ),
    "claims": (
        ("summary_key", "str"),
        ("index", "int"),
        ("uuid", "str"),
        ("text", "str"),
        ("start", "int"),
        ("end", "int"),
        ("refs", "json"),
        ("verdict", "str"),
        ("explanation", "str"),
        ("probability", "float"),
    ),
    "batches": (
        ("batch", "str"),
        ("uuid", "str"),
        ("kind", "str"),
        ("design", "json"),
        ("seed", "int"),
        ("raters_per_item", "int"),
        ("blinded", "bool"),
        ("training", "bool"),
        ("attention_every", "int"),
    ),
    "ratings": (
        ("summary_key", "str"),
        ("question", "str"),
        ("finding", "str"),
        ("score", "int"),
        ("value", "json"),
        ("rationale", "str"),
        *_REVISION_COLUMNS,
    ),
    "spans": (
        ("summary_key", "str"),
        ("question", "str"),
        ("index", "int"),
        ("target", "str"),
        ("start", "int"),
        ("end", "int"),
        ("text", "str"),
        ("link_start", "int"),
        ("link_end", "int"),
        ("link_text", "str"),
        ("answers", "json"),
        ("rationale", "str"),
        *_REVISION_COLUMNS,
    ),
    "raters": (
        ("rater", "str"),
        ("roles", "str"),
        ("n_assignments", "int"),
        ("n_revisions", "int"),
        ("n_answers", "int"),
        ("n_spans", "int"),
    ),
    "rubric": (
        ("rubric_key", "str"),
        ("version", "int"),
        ("title", "str"),
        ("content_hash", "str"),
        ("definition", "json"),
    ),
    "consensus": (
        ("batch", "str"),
        ("summary_key", "str"),
        ("question", "str"),
        ("value", "json"),
        ("rationale", "str"),
        ("decided_by", "str"),
        ("decided_at", "str"),
        ("rubric_key", "str"),
        ("rubric_version", "int"),
    ),
}


def _json(value: Any) -> str:
    """Canonical JSON text: sorted keys, no spaces, UTF-8 as is (byte-stable)."""
    return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"), allow_nan=False)


def _timestamp(value: datetime | None) -> str | None:
    if value is None:
        return None
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _arrow_schema(columns):
    import pyarrow as pa

    types = {"str": pa.string(), "json": pa.string(), "int": pa.int64(), "bool": pa.bool_(), "float": pa.float64()}
    return pa.schema([pa.field(name, types[kind]) for name, kind in columns])


class _TableWriter:
    """Writes one table's rows (tuples in column order) to every requested format as
    they arrive; Parquet is buffered one row group at a time."""

    def __init__(self, out_dir: Path, name: str, formats: tuple[str, ...]):
        self.name = name
        self.columns = TABLES[name]
        self.names = [c for c, _ in self.columns]
        self.count = 0
        self.paths: list[Path] = []
        self._jsonl = self._csv = self._csv_handle = self._parquet = None
        self._buffer: list[tuple] = []
        self._bools = [i for i, (_, kind) in enumerate(self.columns) if kind == "bool"]
        self._encode = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode
        if "jsonl" in formats:
            path = out_dir / "jsonl" / f"{name}.jsonl"
            self._jsonl = path.open("w", encoding="utf-8", newline="\n")
            self.paths.append(path)
        if "csv" in formats:
            path = out_dir / "csv" / f"{name}.csv"
            self._csv_handle = path.open("w", encoding="utf-8", newline="")
            self._csv = csv.writer(self._csv_handle, lineterminator="\n")
            self._csv.writerow(self.names)
            self.paths.append(path)
        if "parquet" in formats:
            import pyarrow.parquet as pq

            path = out_dir / "parquet" / f"{name}.parquet"
            self._schema = _arrow_schema(self.columns)
            # Fixed options: the file depends only on the rows and the pyarrow version
            # (which is pinned and named in the file's created_by field).
            self._parquet = pq.ParquetWriter(
                path, self._schema, compression="zstd", compression_level=3, version="2.6", write_statistics=True
            )
            self.paths.append(path)

    def write(self, row: tuple) -> None:
        self.count += 1
        if self._jsonl is not None:
            self._jsonl.write(self._encode(dict(zip(self.names, row, strict=True))))
            self._jsonl.write("\n")
        if self._csv is not None:
            if self._bools:
                row_list = list(row)
                for i in self._bools:
                    if row_list[i] is not None:
                        row_list[i] = "true" if row_list[i] else "false"
                self._csv.writerow(row_list)
            else:
                self._csv.writerow(row)
        if self._parquet is not None:
            self._buffer.append(row)
            if len(self._buffer) >= ROW_GROUP:
                self._flush()

    def _flush(self) -> None:
        import pyarrow as pa

        columns = list(zip(*self._buffer, strict=True)) if self._buffer else [() for _ in self.names]
        arrays = [pa.array(col, type=f.type) for col, f in zip(columns, self._schema, strict=True)]
        self._parquet.write_table(pa.Table.from_arrays(arrays, schema=self._schema), row_group_size=ROW_GROUP)
        self._buffer = []

    def close(self) -> None:
        if self._jsonl is not None:
            self._jsonl.close()
        if self._csv_handle is not None:
            self._csv_handle.close()
        if self._parquet is not None:
            if self._buffer or self.count == 0:
                self._flush()
            self._parquet.close()


# --- licences -------------------------------------------------------------------------------

_RESTRICTING = {"NC", "ND", "SA", "NONCOMMERCIAL", "NODERIVS", "NODERIVATIVES", "SHAREALIKE"}


def licence_allows_text(licence: str) -> bool:
    """Whether a source's text may go into a CC BY 4.0 dataset: CC BY of any version
    (also "CC BY (version not stated)" and ported versions), CC0, or public domain.
    NC, ND and SA variants, other licences and a missing licence do not."""
    words = re.findall(r"[A-Z0-9.]+", licence.upper().replace("-", " ").replace("_", " "))
    if not words or _RESTRICTING & set(words):
        return False
    joined = " ".join(words)
    if joined.startswith(("CC BY", "CREATIVE COMMONS ATTRIBUTION")):
        return True
    if words[0] == "CC0" or joined.startswith(("CC 0", "CC ZERO", "PUBLIC DOMAIN", "PDM")):
        return True
    return "PUBLIC DOMAIN" in joined


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
    writers = {name: _TableWriter(out_dir, name, formats) for name in TABLES}
    try:
        context = _write_tables(study, writers, phase, include_calibration, include_restricted)
    finally:
        for writer in writers.values():
            writer.close()
    counts = {name: w.count for name, w in writers.items()}
    files = [p for w in writers.values() for p in w.paths]
    context.update(counts=counts, formats=formats, phase=phase, include_calibration=include_calibration)
    manifest = _manifest(study, context, include_restricted)
    (out_dir / "study.json").write_text(_json_pretty(manifest), encoding="utf-8")
    (out_dir / "README.md").write_text(_dataset_card(study, context, include_restricted), encoding="utf-8")
    (out_dir / "LICENSE").write_text(_licence_text(context["withheld"], include_restricted), encoding="utf-8")
    files += [out_dir / "study.json", out_dir / "README.md", out_dir / "LICENSE"]
    (out_dir / "SHA256SUMS").write_text(sha256sums(out_dir, files), encoding="utf-8")
    files.append(out_dir / "SHA256SUMS")
    return ExportResult(
        out_dir=out_dir,
        files=tuple(sorted(files)),
        counts=counts,
        withheld_sources=tuple(context["withheld"]),
    )


def _json_pretty(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, indent=2) + "\n"


def sha256sums(root: Path, files: Iterable[Path]) -> str:
    """`sha256sum -c` format: one `<hex>  <relative path>` line per file, sorted by path."""
    lines = []
    for path in sorted(files, key=lambda p: p.relative_to(root).as_posix()):
        digest = hashlib.sha256()
        with path.open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
        lines.append(f"{digest.hexdigest()}  {path.relative_to(root).as_posix()}\n")
    return "".join(lines)


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
                _json(source.external_ids),
                _json(source.metadata),
                _json(sentences) if allowed else None,
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
                _json(s.metadata),
                _json(s.flags),
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
                _json(c.refs),
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
                _json(design),
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
                _json(answer.value),
                answer.rationale or None,
                pseudonyms.get(answer.decided_by_id),
                _timestamp(answer.created_at),
                answer.rubric.key,
                answer.rubric.version,
            )
        )

    rubric_versions.add((study.rubric.key, study.rubric.version))
    rubrics = []
    for key, version in sorted(rubric_versions):
        rubric = Rubric.objects.get(key=key, version=version)
        rubrics.append(rubric)
        writers["rubric"].write((key, version, rubric.title, rubric.content_hash, _json(rubric.definition)))

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
                _json(answer),
                rationale,
                phase,
                rubric_key,
                rubric_version,
                pseudonyms[uid],
                batch,
                number,
                _timestamp(submitted_at),
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
                _json(answers),
                rationale or None,
                phase,
                rubric_key,
                rubric_version,
                pseudonyms[uid],
                batch,
                number,
                _timestamp(submitted_at),
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


# --- the card, the licence, the manifest --------------------------------------------------------

_SIZE_CATEGORIES = ((1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K"), (1_000_000, "100K<n<1M"))


def _size_category(n: int) -> str:
    for limit, name in _SIZE_CATEGORIES:
        if n < limit:
            return name
    return "1M<n<10M" if n < 10_000_000 else "n>10M"


def _manifest(study: Study, context: dict, include_restricted: bool) -> dict[str, Any]:
    return {
        "format_version": FORMAT_VERSION,
        "study": {
            "slug": study.slug,
            "uuid": str(study.uuid),
            "title": study.title,
            "description": study.description,
            "guidelines": study.guidelines,
            "licence": study.licence,
            "assisted": study.assisted,
            "rubric_key": study.rubric.key,
            "rubric_version": study.rubric.version,
        },
        "phase": context["phase"],
        "include_calibration": context["include_calibration"],
        "include_restricted": include_restricted,
        "formats": list(context["formats"]),
        "tables": context["counts"],
        "withheld_sources": context["withheld"],
    }


def _fmt(value: float | None) -> str:
    return "–" if value is None or not math.isfinite(value) else f"{value:.4f}"


def _dataset_card(study: Study, context: dict, include_restricted: bool) -> str:
    import yaml

    counts = context["counts"]
    withheld = context["withheld"]
    restricted_inside = include_restricted and any(not licence_allows_text(s[3]) for s in context["sources"])
    data_format = "parquet" if "parquet" in context["formats"] else context["formats"][0]
    header: dict[str, Any] = {"license": "other" if restricted_inside else "cc-by-4.0"}
    if restricted_inside:
        header["license_name"] = "cc-by-4.0-with-restricted-sources"
        header["license_link"] = "LICENSE"
    header.update(
        {
            "language": ["en"],
            "pretty_name": study.title,
            "task_categories": ["summarization", "text-classification"],
            "tags": ["human-evaluation", "summarization-evaluation", "factuality", "inter-annotator-agreement"],
            "size_categories": [_size_category(counts["ratings"])],
            "configs": [
                {"config_name": name, "data_files": [{"split": "train", "path": f"{data_format}/{name}.{data_format}"}]}
                for name in TABLES
                if counts[name]
            ],
        }
    )
    front = yaml.safe_dump(header, sort_keys=False, allow_unicode=True, width=1000)
    phase_text = {
        "all": "both phases (initial and after discussion)",
        "initial": "the initial phase only",
        "post_discussion": "the post-discussion phase only",
    }[context["phase"]]
    lines = [
        "---",
        front.rstrip("\n"),
        "---",
        "",
        f"# {study.title}",
        "",
        f"Human ratings of LLM-written summaries from the study `{study.slug}`: "
        f"{counts['summaries']} summaries of {counts['sources']} sources, "
        f"{counts['ratings']} answers and {counts['spans']} highlighted spans by "
        f"{counts['raters']} raters, with their rationales, under the rubric "
        f"`{study.rubric.key}` (version {study.rubric.version}).",
        "",
        "## How the data was made",
        "",
    ]
    if study.description:
        lines += [study.description.strip(), ""]
    lines += [
        "Raters read each summary beside the context it was written from and answered the "
        "rubric below in a web application; every answer is kept with its revision history, "
        "and this export holds the answers that count: for each assignment and phase, the "
        f"newest submitted revision. It covers {phase_text}; calibration (pilot) batches are "
        + ("included." if context["include_calibration"] else "left out."),
        "",
    ]
    if study.guidelines:
        lines += ["Guidelines shown to the raters:", "", *[f"> {g}" for g in study.guidelines.strip().splitlines()], ""]
    lines += [
        "Raters appear only as pseudonyms (`rater-01`, ...), numbered by their first submitted "
        "answer; no names, usernames or e-mail addresses are included. Free-text answers and "
        "rationales are exported as the raters wrote them.",
        "",
        "## Files",
        "",
        "| table | rows | what |",
        "|---|---|---|",
    ]
    what = {
        "sources": "the contexts, with licence and attribution (text withheld where the licence forbids)",
        "findings": "results of each source that per-finding questions ask about",
        "summaries": "the rated summaries, with generator and pipeline metadata",
        "claims": "statements of the summaries with their verification verdicts",
        "batches": "the rating designs",
        "ratings": "one row per answer (per finding for per-finding questions)",
        "spans": "one row per highlighted span, with offsets, sub-answers and rationale",
        "raters": "pseudonyms, roles and counts",
        "rubric": "each rubric version that was answered, as a JSON definition",
        "consensus": "adjudicated answers (the latest decision per item and question)",
    }
    for name in TABLES:
        lines.append(f"| `{name}` | {counts[name]} | {what[name]} |")
    formats = ", ".join(f"`{f}/`" for f in context["formats"])
    lines += [
        "",
        f"Every table is in {formats}. Nested values (metadata, answers, definitions) are "
        "JSON text. `study.json` describes the export; `SHA256SUMS` lists a checksum of every "
        "file (`sha256sum -c SHA256SUMS`). The format is documented in the platform's "
        "`docs/export-format.md`.",
        "",
        "## The rubric",
        "",
    ]
    for q in context["definition"].questions:
        lines.append(f"- **`{q.key}`** ({q.kind}{', required' if q.required else ''}): {q.prompt}")
        if q.options:
            lines.append("  " + "; ".join(f"{o.value} = {o.label}" for o in q.options))
        if q.na:
            lines.append(f"  N/A allowed (stored as `{NA}`)")
        for sq in q.span_questions:
            values = f" ({', '.join(str(v) for v in sq.values)})" if sq.values else ""
            lines.append(f"  - span question `{sq.key}`: {sq.prompt}{values}")
    lines += ["", "## Agreement", ""]
    agreement = context["agreement"]
    if not agreement:
        lines += ["The rubric has no scale questions, so no agreement is reported.", ""]
    else:
        lines += [
            "Per scale question, over each rater's newest answer per summary (after discussion "
            "where there was one); N/A is a missing rating. Computed by the platform's analysis "
            "app (Fleiss and Randolph on the items with the modal number of ratings; "
            "Krippendorff's alpha at the ordinal level).",
            "",
            "| question | items | raters | % agreement | Fleiss κ | Randolph κ | Gwet AC1 | PABAK | α ordinal |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for entry in agreement:
            r = entry["report"]
            if r is None:
                lines.append(f"| `{entry['question']}` | – | – | {entry['error']} | | | | | |")
                continue
            lines.append(
                f"| `{entry['question']}` | {r.n_items} | {r.n_raters} | {_fmt(r.percent_agreement)} | "
                f"{_fmt(r.fleiss_kappa.value)} | {_fmt(r.randolph_kappa.value)} | {_fmt(r.gwet_ac1)} | "
                f"{_fmt(r.pabak)} | {_fmt(r.krippendorff_alpha.ordinal)} |"
            )
        lines.append("")
    lines += ["## Licence", ""]
    if restricted_inside:
        lines += [
            "This export was made with `--include-restricted`: it contains the text of sources whose "
            "licence is not CC BY, CC0 or public domain (marked below). It must not be published as a "
            "CC BY 4.0 dataset. The ratings, rationales, spans and summaries are under CC BY 4.0.",
            "",
        ]
    else:
        lines += [
            f"The ratings, rationales, spans, summaries, claims and rubric are released under CC BY 4.0 "
            f"({LICENCE_URL}); see `LICENSE`. Source texts keep their own licences (CC BY, CC0 or public "
            "domain), listed below with the attribution each requires.",
            "",
        ]
    if withheld:
        lines += [
            f"**Withheld sources ({len(withheld)}).** Their licence does not allow redistribution under "
            "CC BY 4.0 (or none is recorded), so only their identifiers, title, attribution and licence "
            "are included; their text, sentences, findings' wording and quoted source spans are empty:",
            "",
            *[f"- `{key}`" for key in withheld],
            "",
        ]
    if context["flagged_summaries"]:
        lines += [
            "Summaries written from a withheld source are included (they are the study's own output "
            "and what was rated) and flagged `source_withheld`: "
            + ", ".join(f"`{k}`" for k in context["flagged_summaries"])
            + ".",
            "",
        ]
    lines += ["## Attribution", ""]
    for key, title, attribution, licence, url, allowed in context["sources"]:
        mark = "" if allowed else " — *text withheld*"
        credit = attribution or title or "(no attribution recorded)"
        licence_text = f"[{licence}]({url})" if licence and url else licence or "no licence recorded"
        lines.append(f"- `{key}`: {credit} Licence: {licence_text}.{mark}")
    year = context["newest"].year if context["newest"] else None
    lines += [
        "",
        "## Citation",
        "",
        "```bibtex",
        f"@misc{{{re.sub(r'[^A-Za-z0-9]', '_', study.slug)},",
        f"  title = {{{study.title}}},",
        "  howpublished = {Dataset of human ratings of LLM-written summaries},",
        *([f"  year = {{{year}}},"] if year else []),
        "  note = {Released under CC BY 4.0}",
        "}",
        "```",
        "",
        "Please also cite the source articles listed under Attribution.",
        "",
    ]
    return "\n".join(lines)


def _licence_text(withheld: list[str], include_restricted: bool) -> str:
    text = (
        "Creative Commons Attribution 4.0 International (CC BY 4.0)\n"
        "\n"
        "The ratings, rationales, highlighted spans, consensus answers, summaries, claims and\n"
        "rubric in this folder are licensed under the Creative Commons Attribution 4.0\n"
        f"International licence: {LICENCE_URL}\n"
        f"Full legal code: {LEGAL_CODE_URL}\n"
        "\n"
        "You are free to share (copy and redistribute the material in any medium or format)\n"
        "and adapt (remix, transform and build upon the material) for any purpose, even\n"
        "commercially, under the following term: Attribution. You must give appropriate\n"
        "credit, provide a link to the licence, and indicate if changes were made. You may\n"
        "not apply legal terms or technological measures that legally restrict others from\n"
        "doing anything the licence permits. The legal code linked above is the licence;\n"
        "this notice is a summary of it.\n"
        "\n"
        "Source texts are not covered by this notice: each keeps its own licence (CC BY,\n"
        "CC0 or public domain), listed with its attribution in README.md.\n"
    )
    if include_restricted:
        text += (
            "\nThis folder was exported with --include-restricted and contains source texts\n"
            "under other licences (see README.md). Do not redistribute it as CC BY 4.0.\n"
        )
    elif withheld:
        text += f"\nThe text of {len(withheld)} source(s) under other licences was withheld (see README.md).\n"
    return text


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


# --- re-import of a dataset folder ---------------------------------------------------------------


@dataclass(frozen=True)
class DatasetImportResult:
    study: Study
    counts: dict[str, int]

    def summary_line(self) -> str:
        counts = ", ".join(f"{n} {name}" for name, n in self.counts.items())
        return f"Imported study {self.study.slug!r}: {counts}."


def read_table(folder: Path, name: str) -> Iterator[dict[str, Any]]:
    """Rows of one table of a dataset folder, from its JSON Lines file or else its
    Parquet file (CSV is for people: it cannot tell an empty text from a missing one)."""
    jsonl = folder / "jsonl" / f"{name}.jsonl"
    parquet = folder / "parquet" / f"{name}.parquet"
    if jsonl.exists():
        with jsonl.open(encoding="utf-8") as handle:
            for number, line in enumerate(handle, start=1):
                try:
                    yield json.loads(line)
                except json.JSONDecodeError as exc:
                    raise DatasetImportError(f"{jsonl}: line {number}: not valid JSON ({exc.msg})") from None
    elif parquet.exists():
        import pyarrow.parquet as pq

        for batch in pq.ParquetFile(parquet).iter_batches(batch_size=ROW_GROUP):
            yield from batch.to_pylist()
    else:
        raise DatasetImportError(f"{folder}: table {name!r} has no jsonl/{name}.jsonl or parquet/{name}.parquet")


def verify_checksums(folder: Path) -> None:
    """Check every file listed in SHA256SUMS; raise on a missing or changed file."""
    sums = folder / "SHA256SUMS"
    if not sums.exists():
        raise DatasetImportError(f"{folder}: no SHA256SUMS; is this a dataset folder?")
    for line in sums.read_text(encoding="utf-8").splitlines():
        expected, _, relative = line.partition("  ")
        path = folder / relative
        if not path.is_file():
            raise DatasetImportError(f"{relative}: listed in SHA256SUMS but missing")
        if sha256sums(folder, [path]).split("  ", 1)[0] != expected:
            raise DatasetImportError(f"{relative}: checksum does not match SHA256SUMS (the file was changed)")


def _parse_time(value: str | None, where: str) -> datetime | None:
    if value is None:
        return None
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        raise DatasetImportError(f"{where}: {value!r} is not an ISO 8601 time") from None


def import_dataset(*, folder: Path, allow_withheld: bool = False) -> DatasetImportResult:
    """Recreate a study from its dataset folder: rubric versions, sources, findings,
    summaries, claims, batches, pseudonymous rater accounts (no usable password),
    assignments, submitted revisions, ratings, rationales, spans and consensus answers.

    All or nothing. Public uuids are kept, so the study must not exist here yet. A
    source whose text was withheld is an error unless `allow_withheld` (it is then
    stored without text, and answers about it are not checked against it). Every
    revision is checked against its rubric version as a draft would be: each value
    must be allowed, completeness was decided where the answers were submitted.
    """
    folder = Path(folder)
    manifest_path = folder / "study.json"
    if not manifest_path.exists():
        raise DatasetImportError(f"{folder}: no study.json; is this a dataset folder?")
    verify_checksums(folder)
    manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    if manifest.get("format_version") != FORMAT_VERSION:
        raise DatasetImportError(f"study.json: format_version {manifest.get('format_version')!r} is not supported")
    meta = manifest["study"]
    if Study.objects.filter(slug=meta["slug"]).exists():
        raise DatasetImportError(f"study {meta['slug']!r} already exists in this database")
    with transaction.atomic():
        return _DatasetImporter(folder, meta, allow_withheld).run()


class _DatasetImporter:
    def __init__(self, folder: Path, meta: dict, allow_withheld: bool):
        self.folder = folder
        self.meta = meta
        self.allow_withheld = allow_withheld
        self.counts: dict[str, int] = {}
        self.rubrics: dict[tuple[str, int], Rubric] = {}
        self.definitions: dict[tuple[str, int], RubricDefinition] = {}

    def table(self, name: str) -> list[dict[str, Any]]:
        rows = list(read_table(self.folder, name))
        self.counts[name] = len(rows)
        return rows

    def fail(self, message: str):
        raise DatasetImportError(message)

    def run(self) -> DatasetImportResult:
        self.import_rubrics()
        meta = self.meta
        study_rubric = self.rubrics.get((meta["rubric_key"], meta["rubric_version"]))
        if study_rubric is None:
            self.fail(f"study.json: rubric {meta['rubric_key']} v{meta['rubric_version']} is not in the rubric table")
        if Study.objects.filter(uuid=meta["uuid"]).exists():
            self.fail(f"study {meta['uuid']} already exists here under another slug")
        self.study = Study.objects.create(
            uuid=meta["uuid"],
            slug=meta["slug"],
            title=meta["title"],
            description=meta.get("description", ""),
            guidelines=meta.get("guidelines", ""),
            licence=meta.get("licence", ""),
            assisted=bool(meta.get("assisted", False)),
            rubric=study_rubric,
        )
        self.import_sources()
        self.import_summaries()
        self.import_batches()
        self.import_raters()
        self.import_answers()
        self.import_consensus()
        return DatasetImportResult(study=self.study, counts=self.counts)

    def import_rubrics(self) -> None:
        for row in self.table("rubric"):
            key, version = row["rubric_key"], row["version"]
            definition = json.loads(row["definition"])
            parsed = RubricDefinition.from_dict(definition)
            if parsed.key != key:
                self.fail(f"rubric {key} v{version}: the definition's key is {parsed.key!r}")
            stored = Rubric.objects.filter(key=key, version=version).first()
            if stored is None:
                stored = Rubric.objects.create(
                    key=key,
                    version=version,
                    title=parsed.title,
                    definition=definition,
                    content_hash=parsed.content_hash,
                )
            elif stored.content_hash != parsed.content_hash:
                self.fail(f"rubric {key} v{version} exists here with a different definition")
            self.rubrics[(key, version)] = stored
            self.definitions[(key, version)] = parsed

    def import_sources(self) -> None:
        self.sources: dict[str, Source] = {}
        self.withheld: set[str] = set()
        for row in self.table("sources"):
            key = row["source_key"]
            if row["text"] is None:
                if not self.allow_withheld:
                    self.fail(
                        f"source {key!r}: its text was withheld (licence {row['licence'] or 'none'}); "
                        "import with --allow-withheld to store it without text"
                    )
                self.withheld.add(key)
            if Source.objects.filter(uuid=row["uuid"]).exists():
                self.fail(f"source {key!r}: uuid {row['uuid']} already exists in this database")
            source = Source.objects.create(
                uuid=row["uuid"],
                study=self.study,
                key=key,
                title=row["title"],
                text=row["text"] or "",
                external_ids=json.loads(row["external_ids"]),
                licence=row["licence"],
                licence_url=row["licence_url"],
                attribution=row["attribution"],
                copyright=row["copyright"],
                metadata=json.loads(row["metadata"]),
            )
            sentences = json.loads(row["sentences"]) if row["sentences"] is not None else []
            SourceSentence.objects.bulk_create(SourceSentence(source=source, **s) for s in sentences)
            self.sources[key] = source
        self.findings: dict[str, Finding] = {}
        for row in self.table("findings"):
            source = self.sources.get(row["source_key"])
            if source is None:
                self.fail(f"finding {row['uuid']}: no source {row['source_key']!r}")
            self.findings[row["uuid"]] = Finding.objects.create(
                uuid=row["uuid"],
                source=source,
                index=row["index"],
                external_id=row["external_id"],
                intervention=row["intervention"] or "",
                comparator=row["comparator"] or "",
                outcome=row["outcome"] or "",
                label=row["label"],
                start=row["start"],
                end=row["end"],
                evidence=row["evidence"] or "",
            )

    def import_summaries(self) -> None:
        self.summaries: dict[str, Summary] = {}
        rows = self.table("summaries")
        for row in rows:
            source = self.sources.get(row["source_key"])
            if source is None:
                self.fail(f"summary {row['summary_key']!r}: no source {row['source_key']!r}")
            self.summaries[row["summary_key"]] = Summary.objects.create(
                uuid=row["uuid"],
                study=self.study,
                source=source,
                key=row["summary_key"],
                text=row["text"],
                generator=row["generator"],
                metadata=json.loads(row["metadata"]),
                flags=json.loads(row["flags"]),
            )
        for row in rows:
            if row["parent_key"] is not None:
                parent = self.summaries.get(row["parent_key"])
                if parent is None:
                    self.fail(f"summary {row['summary_key']!r}: no parent {row['parent_key']!r}")
                Summary.objects.filter(pk=self.summaries[row["summary_key"]].pk).update(parent=parent)
        claims = []
        for row in self.table("claims"):
            summary = self.summary(row["summary_key"], "claim")
            claims.append(
                Claim(
                    uuid=row["uuid"],
                    summary=summary,
                    index=row["index"],
                    text=row["text"],
                    start=row["start"],
                    end=row["end"],
                    refs=json.loads(row["refs"]),
                    verdict=row["verdict"],
                    explanation=row["explanation"],
                    probability=row["probability"],
                )
            )
        Claim.objects.bulk_create(claims)

    def summary(self, key: str, what: str) -> Summary:
        summary = self.summaries.get(key)
        if summary is None:
            self.fail(f"{what}: no summary {key!r} in the summaries table")
        return summary

    def import_batches(self) -> None:
        self.batches: dict[str | None, Batch | None] = {None: None}
        for row in self.table("batches"):
            self.batches[row["batch"]] = Batch.objects.create(
                uuid=row["uuid"],
                study=self.study,
                name=row["batch"],
                kind=row["kind"],
                design=json.loads(row["design"]),
                seed=row["seed"],
                raters_per_item=row["raters_per_item"],
                blinded=row["blinded"],
                training=row["training"],
                attention_every=row["attention_every"],
            )

    def batch(self, name: str | None, what: str) -> Batch | None:
        if name not in self.batches:
            self.fail(f"{what}: no batch {name!r} in the batches table")
        return self.batches[name]

    def import_raters(self) -> None:
        """One account per pseudonym, `<pseudonym>@<study slug>`, without a usable
        password, created in pseudonym order (so a re-export numbers them the same)."""
        self.ratings_rows = self.table("ratings")
        self.span_rows = self.table("spans")
        self.consensus_rows = self.table("consensus")
        roles = {row["rater"]: row["roles"] for row in self.table("raters")}
        names = set(roles)
        names |= {r["rater"] for r in self.ratings_rows} | {r["rater"] for r in self.span_rows}
        names |= {r["decided_by"] for r in self.consensus_rows if r["decided_by"]}
        user_model = get_user_model()
        self.users = {}
        for name in sorted(names):
            username = f"{name}@{self.study.slug}"
            if user_model.objects.filter(username=username).exists():
                self.fail(f"rater {name!r}: an account {username!r} already exists")
            user = user_model(username=username)
            user.set_unusable_password()
            user.save()
            self.users[name] = user
            default = "rater" if name.startswith("rater-") else "admin"
            for role in sorted(set((roles.get(name) or default).split(","))):
                if role not in StudyMembership.Role.values:
                    self.fail(f"rater {name!r}: unknown role {role!r}")
                StudyMembership.objects.create(study=self.study, user=user, role=role, order_seed=0)

    def import_answers(self) -> None:
        # Revisions and their assignments, keyed by what identifies them in the tables.
        revisions: dict[tuple, dict[str, Any]] = {}
        for table, rows in (("ratings", self.ratings_rows), ("spans", self.span_rows)):
            for number, row in enumerate(rows, start=1):
                where = f"{table} row {number}"
                key = (row["batch"], row["summary_key"], row["rater"], row["phase"], row["revision_number"])
                rubric_key = (row["rubric_key"], row["rubric_version"])
                if rubric_key not in self.rubrics:
                    self.fail(f"{where}: rubric {rubric_key[0]} v{rubric_key[1]} is not in the rubric table")
                if row["phase"] not in Revision.Phase.values:
                    self.fail(f"{where}: unknown phase {row['phase']!r}")
                info = revisions.setdefault(
                    key,
                    {
                        "rubric": rubric_key,
                        "submitted_at": _parse_time(row["submitted_at"], where),
                        "assisted": bool(row["assisted"]),
                        "ratings": [],
                        "spans": [],
                    },
                )
                info[table].append(row)
        assignments: dict[tuple, Assignment] = {}
        positions: dict[str, int] = {}
        for key in sorted(revisions, key=lambda k: (k[2], k[1], k[0] or "", k[3], k[4])):
            batch_name, summary_key, rater, _, _ = key
            akey = (batch_name, summary_key, rater)
            if akey not in assignments:
                summary = self.summary(summary_key, f"answers of {rater}")
                submitted = max(info["submitted_at"] for k, info in revisions.items() if (k[0], k[1], k[2]) == akey)
                assignments[akey] = Assignment.objects.create(
                    study=self.study,
                    batch=self.batch(batch_name, f"answers of {rater} on {summary_key}"),
                    summary=summary,
                    rater=self.users[rater],
                    position=positions.setdefault(rater, 0),
                    state=Assignment.State.SUBMITTED,
                    submitted_at=submitted,
                )
                positions[rater] += 1
        ratings: list[Rating] = []
        rationales: list[str | None] = []
        spans: list[Span] = []
        for key, info in revisions.items():
            batch_name, summary_key, rater, phase, number = key
            assignment = assignments[(batch_name, summary_key, rater)]
            rubric = self.rubrics[info["rubric"]]
            revision = Revision.objects.create(
                assignment=assignment,
                number=number,
                status=Revision.Status.SUBMITTED,
                phase=phase,
                rubric=rubric,
                submitted_at=info["submitted_at"],
                assisted=info["assisted"],
            )
            self.check_revision(key, info, assignment.summary)
            definition = self.definitions[info["rubric"]]
            for row in info["ratings"]:
                q = definition.question(row["question"])
                value = json.loads(row["value"])
                finding = self.findings[row["finding"]] if row["finding"] is not None else None
                is_score = q.is_scale and value != NA
                low, high = q.scale_bounds if is_score else (None, None)
                ratings.append(
                    Rating(
                        revision=revision,
                        question=q.key,
                        finding=finding,
                        score=value if is_score else None,
                        scale_min=low,
                        scale_max=high,
                        value=None if is_score else value,
                    )
                )
                rationales.append(row["rationale"])
            for row in info["spans"]:
                spans.append(
                    Span(
                        revision=revision,
                        question=row["question"],
                        index=row["index"],
                        target=row["target"],
                        start=row["start"],
                        end=row["end"],
                        text=row["text"] or "",
                        link_start=row["link_start"],
                        link_end=row["link_end"],
                        link_text=row["link_text"] or "",
                        answers=json.loads(row["answers"]),
                        rationale=row["rationale"] or "",
                    )
                )
        created = Rating.objects.bulk_create(ratings, batch_size=ITERATOR_CHUNK)
        Rationale.objects.bulk_create(
            (Rationale(rating=r, text=t) for r, t in zip(created, rationales, strict=True) if t),
            batch_size=ITERATOR_CHUNK,
        )
        Span.objects.bulk_create(spans, batch_size=ITERATOR_CHUNK)
        self.counts["assignments"] = len(assignments)
        self.counts["revisions"] = len(revisions)

    def check_revision(self, key: tuple, info: dict, summary: Summary) -> None:
        """The revision's answers, rebuilt as the rubric takes them, must be allowed by
        its rubric version (checked as a draft: values, not completeness)."""
        batch_name, summary_key, rater, phase, number = key
        where = f"answers of {rater} on {summary_key} ({phase}, revision {number})"
        definition = self.definitions[info["rubric"]]
        answers: dict[str, Any] = {}
        rationales: dict[str, Any] = {}
        for row in info["ratings"]:
            try:
                q = definition.question(row["question"])
            except KeyError:
                self.fail(f"{where}: {row['question']!r} is not a question of rubric {definition.key}")
            value = json.loads(row["value"])
            if row["finding"] is not None:
                if row["finding"] not in self.findings:
                    self.fail(f"{where}: no finding {row['finding']} in the findings table")
                answers.setdefault(q.key, {})[row["finding"]] = value
                if row["rationale"]:
                    rationales.setdefault(q.key, {})[row["finding"]] = row["rationale"]
            else:
                answers[q.key] = value
                if row["rationale"]:
                    rationales[q.key] = row["rationale"]
        for row in info["spans"]:
            span = {
                "target": row["target"],
                "start": row["start"],
                "end": row["end"],
                "text": row["text"],
                "answers": json.loads(row["answers"]),
                "rationale": row["rationale"] or "",
            }
            if row["link_start"] is not None:
                span["link"] = {"start": row["link_start"], "end": row["link_end"], "text": row["link_text"]}
            answers.setdefault(row["question"], []).append(span)
        if summary.source.key in self.withheld:
            return  # no text to check offsets against
        context = AnswerContext(
            summary_text=summary.text,
            source_text=summary.source.text,
            finding_ids=tuple(str(u) for u in summary.source.findings.order_by("index").values_list("uuid", flat=True)),
        )
        try:
            definition.validate(answers, rationales, final=False, context=context)
        except ApplicationError as exc:
            detail = "; ".join(f"{k}: {v}" for k, v in sorted(exc.extra.get("fields", {}).items())) or exc.message
            self.fail(f"{where}: {detail}")

    def import_consensus(self) -> None:
        for number, row in enumerate(self.consensus_rows, start=1):
            where = f"consensus row {number}"
            rubric = self.rubrics.get((row["rubric_key"], row["rubric_version"]))
            if rubric is None or row["decided_by"] not in self.users:
                self.fail(f"{where}: unknown rubric version or decider")
            answer = ConsensusAnswer.objects.create(
                batch=self.batch(row["batch"], where),
                summary=self.summary(row["summary_key"], where),
                question=row["question"],
                value=json.loads(row["value"]),
                rationale=row["rationale"] or "",
                decided_by=self.users[row["decided_by"]],
                rubric=rubric,
            )
            # auto_now_add stamped the import time; the decision's own time is data.
            ConsensusAnswer.objects.filter(pk=answer.pk).update(created_at=_parse_time(row["decided_at"], where))
