"""Re-import of a dataset folder into an instance that does not have the study yet."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.contrib.auth import get_user_model
from django.db import transaction

from annotate.models import (
    Batch,
    Claim,
    Comparison,
    ComparisonMember,
    ConsensusAnswer,
    Finding,
    Rubric,
    Source,
    Study,
    StudyMembership,
    Summary,
    sentence_spans,
)
from annotate.rubrics import RubricDefinition
from annotate.services.summaries import comparison_item_text
from core.text_validation import InvalidTextError, find_problem, length_problem, loads
from datasets.exporting.answer_import import AnswerTables, parse_time
from datasets.exporting.folder import (
    FORMAT_VERSION,
    OPTIONAL_TABLES,
    READABLE_VERSIONS,
    ROW_GROUP,
    TABLES,
    DatasetImportError,
    json_columns,
    sha256sums,
)
from datasets.pipeline import RowWriter

# --- the folder's tables and checksums, as the re-import reads them ----------------------------


def read_table(folder: Path, name: str, format_version: int = FORMAT_VERSION) -> Iterator[dict[str, Any]]:
    """Rows of one table of a dataset folder, from its JSON Lines file or else its
    Parquet file (CSV is for people: it cannot tell an empty text from a missing one),
    with every JSON column as its value, whichever file it came from: the JSON Lines
    file of format 2 holds the values, Parquet and the JSON Lines file of format 1 hold
    JSON text, decoded here. Text that is not JSON, or nested too deeply, is an error
    naming the file, line or row, and column."""
    jsonl = folder / "jsonl" / f"{name}.jsonl"
    parquet = folder / "parquet" / f"{name}.parquet"
    as_text = json_columns(name) if name in TABLES else ()
    if jsonl.exists():
        rows = _jsonl_rows(jsonl)
        if format_version >= 2:
            yield from (row for _, row in rows)
            return
    elif parquet.exists():
        rows = _parquet_rows(parquet)
    else:
        raise DatasetImportError(f"{folder}: table {name!r} has no jsonl/{name}.jsonl or parquet/{name}.parquet")
    for where, row in rows:
        for column in as_text:
            text = row.get(column)
            if text is None:
                continue
            if not isinstance(text, str):
                raise DatasetImportError(f"{where}: {column} must be JSON text, not {type(text).__name__}")
            try:
                row[column] = loads(text, field=column)
            except json.JSONDecodeError as exc:
                raise DatasetImportError(f"{where}: {column} is not valid JSON ({exc.msg})") from None
            except InvalidTextError as exc:
                raise DatasetImportError(f"{where}: {exc.message}") from None
        yield row


def _jsonl_rows(path: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    """(where, row) for each line of a JSON Lines table."""
    with path.open(encoding="utf-8-sig") as handle:  # a byte-order mark is allowed
        for number, line in enumerate(handle, start=1):
            try:
                row = loads(line)
            except json.JSONDecodeError as exc:
                raise DatasetImportError(f"{path}: line {number}: not valid JSON ({exc.msg})") from None
            except InvalidTextError as exc:  # bad text or absurd nesting: never a crash
                raise DatasetImportError(f"{path}: line {number}: {exc.message}") from None
            if not isinstance(row, dict):
                raise DatasetImportError(f"{path}: line {number}: not a JSON object")
            yield f"{path}: line {number}", row


def _parquet_rows(path: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    """(where, row) for each row of a Parquet table."""
    import pyarrow.parquet as pq

    number = 0
    for batch in pq.ParquetFile(path).iter_batches(batch_size=ROW_GROUP):
        for row in batch.to_pylist():
            number += 1
            yield f"{path}: row {number}", row


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


# --- re-import of a dataset folder ---------------------------------------------------------------


@dataclass(frozen=True)
class DatasetImportResult:
    study: Study
    counts: dict[str, int]

    def summary_line(self) -> str:
        counts = ", ".join(f"{n} {name}" for name, n in self.counts.items())
        return f"Imported study {self.study.slug!r}: {counts}."


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
    try:
        manifest = loads(manifest_path.read_text(encoding="utf-8-sig"))
    except json.JSONDecodeError as exc:
        raise DatasetImportError(f"study.json: not valid JSON ({exc.msg})") from None
    except InvalidTextError as exc:
        raise DatasetImportError(f"study.json: {exc.message}") from None
    version = manifest.get("format_version")
    if version not in READABLE_VERSIONS:
        raise DatasetImportError(f"study.json: format_version {version!r} is not supported")
    meta = manifest["study"]
    if Study.objects.filter(slug=meta["slug"]).exists():
        raise DatasetImportError(f"study {meta['slug']!r} already exists in this database")
    with transaction.atomic():
        return _DatasetImporter(folder, meta, allow_withheld, version).run()


class _DatasetImporter(AnswerTables):
    def __init__(self, folder: Path, meta: dict, allow_withheld: bool, format_version: int):
        self.folder = folder
        self.format_version = format_version
        self.meta = meta
        self.allow_withheld = allow_withheld
        self.counts: dict[str, int] = {}
        self.rubrics: dict[tuple[str, int], Rubric] = {}
        self.definitions: dict[tuple[str, int], RubricDefinition] = {}
        self.writer = RowWriter()

    def table(self, name: str) -> list[dict[str, Any]]:
        """The rows of one table, its JSON columns as values (read_table). Text that
        cannot be stored (a lone surrogate, a NUL: core/text_validation.py) is refused,
        in the row and inside its JSON columns (Parquet rows come here unchecked)."""
        rows = []
        if name in OPTIONAL_TABLES and not any(
            (self.folder / fmt / f"{name}.{fmt}").exists() for fmt in ("jsonl", "parquet")
        ):
            self.counts[name] = 0
            return rows  # exported before the table existed
        for number, row in enumerate(read_table(self.folder, name, self.format_version), start=1):
            found = find_problem(row)
            if found is not None:
                self.fail(f"{name} row {number}: {found[0] or 'the row'} {found[1]}")
            rows.append(row)
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
        self.import_comparisons()
        self.import_batches()
        self.import_raters()
        self.import_answers()
        self.import_consensus()
        return DatasetImportResult(study=self.study, counts=self.counts)

    def import_rubrics(self) -> None:
        for row in self.table("rubric"):
            key, version = row["rubric_key"], row["version"]
            definition = row["definition"]
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
        rows = self.table("sources")
        uuids = Source.objects.filter(uuid__in=[r["uuid"] for r in rows]).values_list("uuid", flat=True)
        taken = {str(u) for u in uuids}
        for row in rows:
            key = row["source_key"]
            if row["text"] is None:
                if not self.allow_withheld:
                    self.fail(
                        f"source {key!r}: its text was withheld (licence {row['licence'] or 'none'}); "
                        "import with --allow-withheld to store it without text"
                    )
                self.withheld.add(key)
            if row["text"] and length_problem(row["text"], "source"):
                self.fail(f'source {key!r}: field "text" {length_problem(row["text"], "source")}')
            if str(row["uuid"]) in taken:
                self.fail(f"source {key!r}: uuid {row['uuid']} already exists in this database")
            try:
                spans = sentence_spans(
                    row["text"] or "",
                    [(s["start"], s["end"], s["text"], s["ref"]) for s in row["sentences"] or ()],
                )
            except (KeyError, TypeError):
                self.fail(
                    f'source {key!r}: field "sentences": each sentence must be an object with start, end, text, ref'
                )
            except ValueError as exc:
                self.fail(f'source {key!r}: field "sentences": {exc}')
            self.sources[key] = Source(
                uuid=row["uuid"],
                study=self.study,
                key=key,
                title=row["title"],
                text=row["text"] or "",
                external_ids=row["external_ids"],
                licence=row["licence"],
                licence_url=row["licence_url"],
                attribution=row["attribution"],
                copyright=row["copyright"],
                metadata=row["metadata"],
                sentence_spans=spans,
            )
        self.writer.create(list(self.sources.values()))
        self.findings: dict[str, Finding] = {}
        for row in self.table("findings"):
            source = self.sources.get(row["source_key"])
            if source is None:
                self.fail(f"finding {row['uuid']}: no source {row['source_key']!r}")
            self.findings[row["uuid"]] = Finding(
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
        self.writer.create(list(self.findings.values()))

    def import_summaries(self) -> None:
        self.summaries: dict[str, Summary] = {}
        rows = self.table("summaries")
        for row in rows:
            source = self.sources.get(row["source_key"])
            if source is None:
                self.fail(f"summary {row['summary_key']!r}: no source {row['source_key']!r}")
            if length_problem(row["text"] or "", "summary"):
                self.fail(f'summary {row["summary_key"]!r}: field "text" {length_problem(row["text"], "summary")}')
            self.summaries[row["summary_key"]] = Summary(
                uuid=row["uuid"],
                study=self.study,
                source=source,
                key=row["summary_key"],
                text=row["text"],
                generator=row["generator"],
                metadata=row["metadata"],
                flags=row["flags"],
            )
        self.writer.create(list(self.summaries.values()))
        children = []
        for row in rows:
            if row["parent_key"] is not None:
                parent = self.summaries.get(row["parent_key"])
                if parent is None:
                    self.fail(f"summary {row['summary_key']!r}: no parent {row['parent_key']!r}")
                child = self.summaries[row["summary_key"]]
                child.parent = parent
                children.append(child)
        self.writer.update(children, ["parent"])
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
                    refs=row["refs"],
                    verdict=row["verdict"],
                    explanation=row["explanation"] or "",  # null: withheld with its source
                    probability=row["probability"],
                )
            )
        self.writer.create(claims)

    def import_comparisons(self) -> None:
        """Comparisons, their item summary (in the summaries table under the comparison's
        key) and their members; then the sides each answer was given on, and the summary
        each highlight of a compared summary is in (comparison_answers)."""
        comparisons = []
        items = []
        for row in self.table("comparisons"):
            where = f"comparison {row['comparison_key']!r}"
            members = [self.summary(key, where) for key in row["summary_keys"] or []]
            item = self.summaries.get(row["comparison_key"])  # a format-1 export lists it
            if item is None and members:
                # The summary row that stands for the comparison, as create_comparison makes
                # it; its uuid is derived from the comparison's, so a re-export matches.
                item = Summary(
                    uuid=uuid.uuid5(uuid.UUID(str(row["uuid"])), "item"),
                    study=self.study,
                    source=members[0].source,
                    key=row["comparison_key"],
                    text=comparison_item_text(len(members)),
                    generator=Comparison.ITEM_GENERATOR,
                    metadata={"comparison": True},
                    flags=[],
                )
                self.summaries[row["comparison_key"]] = item
                items.append(item)
            if item is None:
                self.fail(f"{where}: no summary {row['comparison_key']!r} in the summaries table")
            if len(members) < 2 or any(m.source_id != item.source_id for m in members):
                self.fail(f"{where}: needs two or more summaries of its source {row['source_key']!r}")
            comparison = Comparison(
                uuid=row["uuid"], study=self.study, source_id=item.source_id, key=row["comparison_key"], item=item
            )
            comparisons.append((comparison, members))
        self.writer.create(items)
        self.writer.create([comparison for comparison, _ in comparisons])
        self.writer.create(
            ComparisonMember(comparison=comparison, summary=m, index=i)
            for comparison, members in comparisons
            for i, m in enumerate(members)
        )
        self.shown: dict[tuple, list[str]] = {}
        self.span_summaries: dict[tuple, str] = {}
        for number, row in enumerate(self.table("comparison_answers"), start=1):
            key = (row["batch"], row["comparison_key"], row["rater"], row["phase"], row["revision_number"])
            sides = [row["left_key"], row["right_key"]]
            if all(sides):
                self.shown[key] = [str(self.summary(k, f"comparison_answers row {number}").uuid) for k in sides]
            for span in row["spans"] or []:
                if span.get("summary_key"):
                    summary = self.summary(span["summary_key"], f"comparison_answers row {number}")
                    self.span_summaries[(*key, row["question"], span["index"])] = str(summary.uuid)

    def summary(self, key: str, what: str) -> Summary:
        summary = self.summaries.get(key)
        if summary is None:
            self.fail(f"{what}: no summary {key!r} in the summaries table")
        return summary

    def import_batches(self) -> None:
        self.batches: dict[str | None, Batch | None] = {None: None}
        for row in self.table("batches"):
            self.batches[row["batch"]] = Batch(
                uuid=row["uuid"],
                study=self.study,
                name=row["batch"],
                kind=row["kind"],
                design=row["design"],
                seed=row["seed"],
                raters_per_item=row["raters_per_item"],
                blinded=row["blinded"],
                training=row["training"],
                attention_every=row["attention_every"],
            )
        self.writer.create([batch for batch in self.batches.values() if batch is not None])

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
        usernames = {name: f"{name}@{self.study.slug}" for name in sorted(names)}
        taken = set(user_model.objects.filter(username__in=usernames.values()).values_list("username", flat=True))
        self.users = {}
        memberships = []
        for name, username in usernames.items():
            if username in taken:
                self.fail(f"rater {name!r}: an account {username!r} already exists")
            user = user_model(username=username)
            user.set_unusable_password()
            self.users[name] = user
            default = "rater" if name.startswith("rater-") else "admin"
            for role in sorted(set((roles.get(name) or default).split(","))):
                if role not in StudyMembership.Role.values:
                    self.fail(f"rater {name!r}: unknown role {role!r}")
                memberships.append(StudyMembership(study=self.study, user=user, role=role, order_seed=0))
        self.writer.create(list(self.users.values()))
        self.writer.create(memberships)

    def import_consensus(self) -> None:
        answers, decided = [], []
        for number, row in enumerate(self.consensus_rows, start=1):
            where = f"consensus row {number}"
            rubric = self.rubrics.get((row["rubric_key"], row["rubric_version"]))
            if rubric is None or row["decided_by"] not in self.users:
                self.fail(f"{where}: unknown rubric version or decider")
            answer = ConsensusAnswer(
                batch=self.batch(row["batch"], where),
                summary=self.summary(row["summary_key"], where),
                question=row["question"],
                value=row["value"],
                rationale=row["rationale"] or "",
                decided_by=self.users[row["decided_by"]],
                rubric=rubric,
            )
            answers.append(answer)
            decided.append(parse_time(row["decided_at"], where))
        # auto_now_add stamps the import time on insert; the decision's own time is data.
        self.writer.create(answers)
        for answer, decided_at in zip(answers, decided, strict=True):
            answer.created_at = decided_at
        self.writer.update(answers, ["created_at"])
