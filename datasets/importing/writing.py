"""Building the rows of cleaned records and writing them through the import pipeline's
writer, matched by their keys; `import_records`, the import of a JSON Lines file."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from django.db import transaction

from annotate.models import (
    Claim,
    Comparison,
    Finding,
    Rating,
    Revision,
    Source,
    Study,
    StudySettingChange,
    Summary,
)
from annotate.rubrics import RubricDefinitionError
from annotate.services.rubrics import rubric_by_key
from annotate.services.summaries import create_comparison
from annotate.study_settings import update_study_settings
from core.collection import fewer_collections
from core.exceptions import ApplicationError
from datasets.importing.records import CLEANERS, Record, parse_lines
from datasets.pipeline import (
    Fields,
    ImportLineError,
    ImportResult,
    RowWriter,
    batch_size,
    set_changed,
)

# A cleaned record's values that are stored as they are (a source's sentences in its row).
_SOURCE_FIELDS = tuple(
    "title licence licence_url attribution copyright external_ids metadata text sentence_spans".split()
)
_SUMMARY_FIELDS = ("source", "text", "generator", "metadata", "flags", "parent")
_CLAIM_FIELDS = ("text", "start", "end", "refs", "verdict", "explanation", "probability")
FINDING_FIELDS = ("external_id", "intervention", "comparator", "outcome", "label", "start", "end", "evidence")


def _identity(kind: str, d: dict) -> tuple:
    """What makes a record the same record: its key within its parent."""
    if kind == "study":
        return ("study", d["slug"])
    if kind == "claim":
        return ("claim", d["study"], d["summary"], d["index"])
    if kind == "finding":
        return ("finding", d["study"], d["source"], d["index"])
    return (kind, d["study"], d["key"])


class RecordWriter:
    """import_records' builder: checks each cleaned record against the database and the
    file so far, and hands the rows it makes to the pipeline's RowWriter.

    Sources, summaries, claims and findings are queued and written in chunks of up to the
    import batch size of each kind (existing rows looked up once per chunk), a chunk's
    sources first, then its summaries, claims and findings, so a file that alternates
    source, summary, source, ... costs what one grouped by kind does. The file's order
    still decides what a record may refer to: a row created in the chunk at a later line
    than the record that names it is refused as unknown (`born`), and a summary whose
    parent is still queued waits for the next chunk (its parent's id must exist first)."""

    KINDS = ("source", "summary", "claim", "finding")

    def __init__(self, progress: Callable[[int, int], None] | None = None):
        self.rows = RowWriter()
        self.result = self.rows.result
        self.chunk = batch_size()
        self.progress = progress
        self.written = 0
        self.last_line = 0  # of the last record added
        self.studies: dict[str, Study] = {}
        # rows of the current chunk by (study slug, key), and the pairs looked up and not found
        self.sources: dict[tuple[str, str], Source] = {}
        self.summaries: dict[tuple[str, str], Summary] = {}
        self.absent: dict[type, set[tuple[str, str]]] = {Source: set(), Summary: set()}
        self.queue: list[tuple[str, int, dict]] = []
        self.queued = dict.fromkeys(self.KINDS, 0)
        self.queued_keys: set[tuple[str, str]] = set()
        self.born: dict[tuple[str, str, str], int] = {}  # (kind, study, key) created in this chunk -> line

    def count(self, kind: str, created: bool, changed: bool) -> None:
        self.rows.count(kind, created=created, changed=changed)

    # --- look-ups ---

    def study(self, line: int, slug: str) -> Study:
        study = self.known_study(slug)
        if study is None:
            raise ImportLineError(line, "study", f"no study {slug!r} (define it earlier in the file)")
        return study

    def known_study(self, slug: str) -> Study | None:
        if slug not in self.studies:
            study = Study.objects.filter(slug=slug).first()
            if study is None:
                return None
            self.studies[slug] = study
        return self.studies[slug]

    def source(self, line: int, study: Study, key: str) -> Source:
        if (study.slug, key) not in self.sources:
            absent = (study.slug, key) in self.absent[Source]
            source = None if absent else Source.objects.filter(study=study, key=key).first()
            if source is None:
                raise ImportLineError(line, "source", f"no source {key!r} in study {study.slug!r}")
            self.sources[(study.slug, key)] = source
        return self.sources[(study.slug, key)]

    def summary(self, line: int, study: Study, key: str, field_name: str = "summary") -> Summary:
        if (study.slug, key) not in self.summaries:
            absent = (study.slug, key) in self.absent[Summary]
            summary = None if absent else Summary.objects.filter(study=study, key=key).first()
            if summary is None:
                raise ImportLineError(line, field_name, f"no summary {key!r} in study {study.slug!r}")
            self.summaries[(study.slug, key)] = summary
        return self.summaries[(study.slug, key)]

    def _prefetch(self, model, cache: dict, pairs: Iterable[tuple[Study, str]]) -> None:
        """Fill `cache` ((study slug, key) -> row) with the `model` rows of `pairs` it lacks,
        in one query; the pairs not found are remembered as absent (not looked up again)."""
        absent = self.absent[model]
        missing = {(study.slug, key): study for study, key in pairs}
        missing = {pair: study for pair, study in missing.items() if pair not in cache and pair not in absent}
        if not missing:
            return
        by_id = {study.pk: study for study in missing.values()}
        # A study with no such rows yet (a first import) is answered by one cheap query
        # instead of a look-up of every key of the chunk.
        if model.objects.filter(study__in=by_id).exists():
            for row in model.objects.filter(study__in=by_id, key__in={key for _, key in missing}):
                cache.setdefault((by_id[row.study_id].slug, row.key), row)
        absent.update(pair for pair in missing if pair not in cache)

    def _not_yet(self, kind: str, line: int, study: Study, key: str, field_name: str) -> None:
        """Refuse a reference to a row this chunk creates at a later line of the file."""
        born = self.born.get((kind, study.slug, key))
        if born is not None and born > line:
            raise ImportLineError(line, field_name, f"no {kind} {key!r} in study {study.slug!r}")

    # --- records written one by one (few, and studies must exist before their rows) ---

    def write_study(self, line: int, d: dict) -> None:
        try:
            rubric = rubric_by_key(key=d["rubric"])
        except RubricDefinitionError as exc:
            raise ImportLineError(line, "rubric", exc.message) from None
        study = Study.objects.filter(slug=d["slug"]).select_related("rubric").first()
        if study is None:
            values = {k: d[k] for k in ("title", "guidelines", "description", "licence", "assisted")}
            study = Study.objects.create(slug=d["slug"], rubric=rubric, **values)
            self.count("study", True, False)
        else:
            if study.rubric.key != rubric.key:
                raise ImportLineError(line, "rubric", f"study {study.slug!r} already uses rubric {study.rubric.key!r}")
            # Only the settings the line gives, each change recorded and reported (a line
            # that changes nothing costs no query: re-importing a file stays cheap).
            given = {k: d[k] for k in d["given"] if getattr(study, k) != d[k]}
            try:
                changes = update_study_settings(study=study, values=given, via=StudySettingChange.Via.IMPORT)
            except ApplicationError as exc:
                field_name = next(iter(exc.extra.get("fields", {})), None)
                raise ImportLineError(line, field_name, exc.message) from None
            self.result.settings_changes.extend((study.slug, change) for change in changes)
            self.count("study", False, bool(changes))
        self.studies[study.slug] = study

    def write_comparison(self, line: int, d: dict) -> None:
        """A comparison of summaries already written (or earlier in the file): made once;
        the same record again is unchanged; other summaries under its key are refused
        (its answers would then be about other summaries)."""
        study = self.study(line, d["study"])
        summaries = [
            Summary.objects.filter(study=study, key=key, comparison__isnull=True).select_related("source").first()
            for key in d["summaries"]
        ]
        missing = [key for key, s in zip(d["summaries"], summaries, strict=True) if s is None]
        if missing:
            raise ImportLineError(line, "summaries", f"no summary {missing[0]!r} in study {study.slug!r}")
        wrong = [s.key for s in summaries if s.source.key != d["source"]]
        if wrong:
            raise ImportLineError(line, "summaries", f"summary {wrong[0]!r} is not of source {d['source']!r}")
        existing = Comparison.objects.filter(study=study, key=d["key"]).first()
        if existing is not None:
            keys = list(existing.member_rows.order_by("index").values_list("summary__key", flat=True))
            if keys != d["summaries"]:
                raise ImportLineError(
                    line, "summaries", f"comparison {d['key']!r} exists with other summaries ({', '.join(keys)})"
                )
            self.count("comparison", False, False)
            return
        try:
            create_comparison(study=study, key=d["key"], summaries=summaries)
        except ApplicationError as exc:
            field_name, _, message = exc.message.partition(": ")
            raise ImportLineError(line, field_name if message else None, message or exc.message) from None
        self.count("comparison", True, False)

    # --- records written in chunks ---

    def add(self, kind: str, line: int, d: dict) -> None:
        parent_queued = kind == "summary" and d["parent"] and (d["study"], d["parent"]) in self.queued_keys
        if self.queued[kind] >= self.chunk or parent_queued:
            self.flush()
        self.queued[kind] += 1
        self.last_line = line
        self.queue.append((kind, line, d))
        if kind == "summary":
            self.queued_keys.add((d["study"], d["key"]))

    def flush(self) -> None:
        queue, self.queue, self.queued_keys = self.queue, [], set()
        self.queued = dict.fromkeys(self.KINDS, 0)
        writers = {
            "source": self._write_sources,
            "summary": self._write_summaries,
            "claim": self._write_claims,
            "finding": self._write_findings,
        }
        for kind in self.KINDS:
            records = [(line, d) for k, line, d in queue if k == kind]
            if records:
                writers[kind](records)
        # The chunk's rows (with their texts) are written: forget them, so memory stays
        # flat in the file's size. A later record that names one looks it up again with
        # its chunk (one query per chunk and kind).
        self.born = {}
        self.sources.clear()
        self.summaries.clear()
        for absent in self.absent.values():
            absent.clear()
        if queue:
            self.written += len(queue)
            if self.progress is not None:
                self.progress(self.written, self.last_line)

    def _write_sources(self, queue: list[tuple[int, dict]]) -> None:
        studies = {line: self.study(line, d["study"]) for line, d in queue}
        self._prefetch(Source, self.sources, ((studies[line], d["key"]) for line, d in queue))
        created, updated = [], []
        for line, d in queue:
            study = studies[line]
            values = {k: d[k] for k in _SOURCE_FIELDS}
            source = self.sources.get((study.slug, d["key"]))
            if source is None:
                source = Source(study_id=study.pk, key=d["key"], **values)
                created.append(source)
                self.sources[(study.slug, d["key"])] = source
                self.born[("source", study.slug, d["key"])] = line
            else:
                updated.append((line, d, source, values))
        _refuse_rated_sources(updated)
        changed = []
        for _line, _d, source, values in updated:
            is_changed = set_changed(source, values)  # the text and its sentences are among the values
            if is_changed:
                changed.append(source)
            self.count("source", False, is_changed)
        self.rows.update(changed, _SOURCE_FIELDS)
        self.rows.create(created, kind="source")

    def _summary_values(self, line: int, d: dict, study: Study) -> dict:
        source = self.source(line, study, d["source"])
        self._not_yet("source", line, study, d["source"], "source")
        parent = None
        if d["parent"]:
            self._not_yet("summary", line, study, d["parent"], "parent")
            parent = self.summary(line, study, d["parent"], "parent")
        return {  # ids, not objects: comparing an object would load the stored one
            "source_id": source.pk,
            "text": d["text"],
            "generator": d["generator"],
            "metadata": d["metadata"],
            "flags": d["flags"],
            "parent_id": parent.pk if parent else None,
        }

    def _write_summaries(self, queue: list[tuple[int, dict]]) -> None:
        studies = {line: self.study(line, d["study"]) for line, d in queue}
        self._prefetch(Source, self.sources, ((studies[line], d["source"]) for line, d in queue))
        named = [(studies[line], d["key"]) for line, d in queue]
        named += [(studies[line], d["parent"]) for line, d in queue if d["parent"]]
        self._prefetch(Summary, self.summaries, named)
        created, updated = [], []
        for line, d in queue:
            study = studies[line]
            values = self._summary_values(line, d, study)
            summary = self.summaries.get((study.slug, d["key"]))
            if summary is None:
                summary = Summary(study_id=study.pk, key=d["key"], **values)
                created.append(summary)
                self.summaries[(study.slug, d["key"])] = summary
                self.born[("summary", study.slug, d["key"])] = line
            else:
                updated.append((line, d, summary, values))
        _refuse_rated_summaries(updated)
        changed = []
        for _line, _d, summary, values in updated:
            is_changed = set_changed(summary, values)
            if is_changed:
                changed.append(summary)
            self.count("summary", False, is_changed)
        self.rows.update(changed, _SUMMARY_FIELDS)
        self.rows.create(created, kind="summary")

    def _write_claims(self, queue: list[tuple[int, dict]]) -> None:
        studies = {line: self.study(line, d["study"]) for line, d in queue}
        self._prefetch(Summary, self.summaries, ((studies[line], d["summary"]) for line, d in queue))
        targets = {line: self.summary(line, studies[line], d["summary"]) for line, d in queue}
        for line, d in queue:
            self._not_yet("summary", line, studies[line], d["summary"], "summary")
        existing = {
            (claim.summary_id, claim.index): claim
            for claim in Claim.objects.filter(summary__in={s.pk for s in targets.values()})
        }
        created, changed = [], []
        for line, d in queue:
            summary = targets[line]
            if d["end"] is not None and d["end"] > len(summary.text):
                raise ImportLineError(line, "end", f"is beyond the summary's {len(summary.text)} characters")
            values = {k: d[k] for k in _CLAIM_FIELDS}
            claim = existing.get((summary.pk, d["index"]))
            if claim is None:
                created.append(Claim(summary_id=summary.pk, index=d["index"], **values))
                continue
            is_changed = set_changed(claim, values)
            if is_changed:
                changed.append(claim)
            self.count("claim", False, is_changed)
        self.rows.update(changed, _CLAIM_FIELDS)
        self.rows.create(created, kind="claim")

    def _write_findings(self, queue: list[tuple[int, dict]]) -> None:
        studies = {line: self.study(line, d["study"]) for line, d in queue}
        self._prefetch(Source, self.sources, ((studies[line], d["source"]) for line, d in queue))
        targets = {line: self.source(line, studies[line], d["source"]) for line, d in queue}
        for line, d in queue:
            self._not_yet("source", line, studies[line], d["source"], "source")
        existing = {
            (finding.source_id, finding.index): finding
            for finding in Finding.objects.filter(source__in={s.pk for s in targets.values()})
        }
        created, changed = [], []
        for line, d in queue:
            source = targets[line]
            values = {k: d[k] for k in FINDING_FIELDS if k not in ("start", "end")}
            values["start"], values["end"] = _evidence_span(line, d, source.text)
            finding = existing.get((source.pk, d["index"]))
            if finding is None:
                created.append(Finding(source_id=source.pk, index=d["index"], **values))
                continue
            is_changed = set_changed(finding, values)
            if is_changed:
                changed.append((line, "index", finding))
            self.count("finding", False, is_changed)
        refuse_rated_findings(changed)
        self.rows.update([f for _, _, f in changed], FINDING_FIELDS)
        self.rows.create(created, kind="finding")


def _refuse_rated_sources(updated: list[tuple[int, dict, Source, dict]]) -> None:
    """A source whose text would change may not have ratings (human work is protected)."""
    changed = [
        (line, source)
        for line, d, source, _ in updated
        if source.text != d["text"] or source.sentence_spans != d["sentence_spans"]
    ]
    for line, source in _rated(changed, "assignment__summary__source"):
        raise ImportLineError(line, "sentences", f"source {source.key!r} has ratings; its text cannot change")


def _refuse_rated_summaries(updated: list[tuple[int, dict, Summary, dict]]) -> None:
    """A summary with ratings keeps its text and its source."""
    moved = [
        (line, summary)
        for line, d, summary, values in updated
        if summary.text != d["text"] or summary.source_id != values["source_id"]
    ]
    for line, summary in _rated(moved, "assignment__summary"):
        raise ImportLineError(
            line, "text", f"summary {summary.key!r} has ratings; import a changed text under a new key"
        )


def _rated(changed: list[tuple[int, Any]], path: str) -> list[tuple[int, Any]]:
    """The (line, row) pairs of `changed` whose row has a revision through `path`, in order."""
    if not changed:
        return []
    rated = set(
        Revision.objects.filter(**{f"{path}__in": [row for _, row in changed]}).values_list(f"{path}_id", flat=True)
    )
    return [(line, row) for line, row in changed if row.pk in rated]


def refuse_rated_findings(changed: list[tuple[int, str, Finding]]) -> None:
    """A finding that was rated cannot change; `changed` holds (line, field, finding)."""
    if not changed:
        return
    rated = set(Rating.objects.filter(finding__in=[f for _, _, f in changed]).values_list("finding_id", flat=True))
    for line, field_name, finding in changed:
        if finding.pk in rated:
            raise ImportLineError(line, field_name, "this finding has ratings; it cannot change")


def _evidence_span(line: int, d: dict, text: str) -> tuple[int, int]:
    """The finding's evidence span in its source's text: as given (it must quote the text
    exactly), or, without start and end, where the evidence occurs (exactly once)."""
    evidence = d["evidence"]
    if d["start"] is not None:
        if d["end"] > len(text) or text[d["start"] : d["end"]] != evidence:
            raise ImportLineError(line, "start", "start and end do not give the evidence in the source's text")
        return d["start"], d["end"]
    found = text.count(evidence)
    if found == 0:
        raise ImportLineError(line, "evidence", "is not in the source's text (quote it exactly)")
    if found > 1:
        raise ImportLineError(line, "evidence", f"occurs {found} times in the source's text; give start and end")
    start = text.index(evidence)
    return start, start + len(evidence)


def _check_one_study(record: Record, d: dict, slug: str) -> None:
    if record.type == "study":
        # The study's own line (a whole file made for `import_jsonl`) updates the title,
        # guidelines, description, licence and assisted flag it gives; its rubric must be the
        # study's (write_study checks). Another study cannot be made or changed here.
        if d["slug"] != slug:
            raise ImportLineError(
                record.line,
                "slug",
                f"must be {slug!r}, the study this file is imported into (create other studies on the new-study page)",
            )
        return
    if d["study"] != slug:
        raise ImportLineError(record.line, "study", f"must be {slug!r}, the study this file is imported into")


def import_records(
    *, lines: Iterable[str], only_study: str | None = None, progress: Callable[[int, int], None] | None = None
) -> ImportResult:
    """Import JSON Lines text: all of it, or (on any error) none of it. Studies are
    written one by one (there are few); sources, summaries and claims in chunks.

    The lines are read as they come, one chunk at a time, inside one transaction: memory
    holds a chunk of records and the keys seen so far (for duplicates), not the file. The
    first bad line in file order stops the import and everything is rolled back.
    `progress(records, line)` is called after each chunk is written.

    `only_study` (imports over the API and the import page, by a study admin): every
    record must belong to that existing study; the file may hold that study's own line
    (which updates its text fields, with the same rubric) but no other study's.

    A finding's identity is its source and index (as the Evidence Inference importer's);
    one that was rated cannot change."""
    seen: dict[tuple, int] = {}
    writer = RecordWriter(progress=progress)
    with transaction.atomic(), fewer_collections():
        for record in parse_lines(lines):
            d = CLEANERS[record.type](Fields(record.line, record.data))
            if only_study is not None:
                _check_one_study(record, d, only_study)
            ident = _identity(record.type, d)
            if ident in seen:
                name = "index" if record.type in ("claim", "finding") else "slug" if record.type == "study" else "key"
                raise ImportLineError(record.line, name, f"duplicates line {seen[ident]}")
            seen[ident] = record.line
            if record.type == "study":
                writer.flush()
                writer.write_study(record.line, d)
            elif record.type == "comparison":
                # Few, and naming summaries that may still be queued: written one by one.
                writer.flush()
                writer.write_comparison(record.line, d)
            else:
                writer.add(record.type, record.line, d)
        if not seen:
            raise ApplicationError("The file holds no records.")
        writer.flush()
    return writer.result
