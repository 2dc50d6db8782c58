"""The export of a study into a dataset folder (a service). The API and the admin run it
through datasets.export_runs. See the package docstring for the choices it makes."""

from __future__ import annotations

import math
from array import array
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from django.db.models import F

from annotate.models import (
    Comparison,
    Rating,
    Revision,
    Rubric,
    Span,
    Study,
    Summary,
)
from annotate.rubrics import NA, RubricDefinition
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
    pretty_json,
    sha256sums,
)
from datasets.exporting.reading import (
    CountingRevision,
    by_revision,
    counting_revisions,
    json_column,
    rater_pseudonyms,
    uuid_text,
)
from datasets.exporting.tables import (
    write_batches,
    write_consensus,
    write_onboarding,
    write_qualification_attempts,
    write_quality_tables,
    write_raters,
    write_rubrics,
    write_sources_and_findings,
    write_summaries_and_claims,
)
from planning.selectors import protocol_records

_NA_JSON = canonical_json(NA)  # how an N/A answer's value reads in the ratings table

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
    protocols = protocol_records(study)
    context["protocol"] = protocols[-1] if protocols else None
    if protocols:
        (out_dir / "protocol.json").write_text(pretty_json({"protocols": protocols}), encoding="utf-8")
        files.append(out_dir / "protocol.json")
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

    sources, withheld, text_ok = write_sources_and_findings(study, writers, include_restricted)
    flagged = write_summaries_and_claims(study, writers, text_ok)
    write_qualification_attempts(study, writers, pseudonyms)
    batches = write_batches(study, writers, pseudonyms, include_calibration)
    compared = set(Comparison.objects.filter(study=study).values_list("key", flat=True))
    scores, per_rater, rubric_versions, newest = _write_answer_tables(
        writers, definition, pseudonyms, counting, text_ok, compared
    )
    _write_comparison_tables(study, writers, definition, counting)
    del counting  # a record per revision: its memory goes to the card's statistics below

    write_raters(study, writers, pseudonyms, per_rater)
    write_onboarding(study, writers["onboarding"], pseudonyms)
    write_consensus(writers, batches, pseudonyms, rubric_versions)
    write_quality_tables(study, writers, pseudonyms)
    rubrics = write_rubrics(study, writers, rubric_versions)

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


@dataclass
class _Tally:
    """What the answer tables tell the raters table and the card, gathered as they stream:
    per rater their assignments, revisions, answers and spans; the rubric versions used;
    the newest submission."""

    per_rater: dict[int, dict[str, Any]] = field(default_factory=dict)
    rubric_versions: set[tuple[str, int]] = field(default_factory=set)
    newest: datetime | None = None

    def add(self, revision_id: int, info: CountingRevision, kind: str, n: int) -> None:
        counts = self.per_rater.setdefault(
            info.rater_id, {"assignments": set(), "revisions": set(), "answers": 0, "spans": 0}
        )
        counts["assignments"].add(info.assignment_id)
        counts["revisions"].add(revision_id)
        counts[kind] += n
        self.rubric_versions.add(info.rubric)
        if self.newest is None or info.submitted_at > self.newest:
            self.newest = info.submitted_at


def _write_answer_tables(writers, definition, pseudonyms, counting, text_ok, compared_keys=frozenset()):
    """Stream the ratings and spans of the counting revisions into their tables.

    The hot path of a large export (one row per answer): rows come raw in chunks, the
    revision's columns are looked up once per revision, and each table writer takes a
    chunk at a time. `compared_keys`: the keys of the comparisons (their answers are
    about a comparison, not a summary)."""
    ranks = {uid: i for i, uid in enumerate(sorted(pseudonyms, key=lambda u: pseudonyms[u]))}

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
    tally = _Tally()
    scores = _write_ratings(writers["ratings"], definition, ranks, counting, revision_order, compared_keys, tally)
    _write_spans(writers["spans"], counting, revision_order, text_ok, tally)
    return scores, tally.per_rater, tally.rubric_versions, tally.newest


def _write_ratings(writer, definition, ranks, counting, revision_order, compared_keys, tally: _Tally) -> _Scores:
    """The ratings table, and the scale answers the card's agreement figures take. A
    tickbox question the revision left unticked gets a row with an empty list: in the
    ratings table, no row means not answered."""
    tickboxes: dict = {}
    # The agreement figures take what the study report takes (analysis.services):
    # every scale-valued question, each finding of a per-finding question as an item
    # of its own, N/A as its code where the rubric counts it as a category.
    scale_questions = [q for q in definition.questions if q.is_scale]
    scale_index = {q.key: i for i, q in enumerate(scale_questions)}
    na_codes = {q.key: float(q.na_code) for q in scale_questions if q.na_code is not None}
    scores = _Scores()
    ratings = Rating.objects.order_by("revision_id", "question", F("finding__index").asc(nulls_first=True)).values_list(
        "revision_id",
        "question",
        "finding__uuid",
        "score",
        "value",
        "rationale__text",
    )
    write = writer.write_many
    last_key = None
    item = 0
    add_item, add_rater, add_question = scores.item.append, scores.rater.append, scores.question.append
    add_phase, add_score = scores.phase.append, scores.score.append
    for revision_id, answers in by_revision(ratings, revision_order, every=True):
        rows = []
        info = counting[revision_id]
        summary_key, columns = info.summary_key, info.columns
        unticked = set(_unticked(info.rubric, summary_key in compared_keys, tickboxes)) - {a[1] for a in answers}
        if not answers and not unticked:
            continue
        tally.add(revision_id, info, "answers", len(answers) + len(unticked))
        rank, phase_code, agrees = ranks[info.rater_id], PHASE_ORDER.get(columns[0], 0), info.agreement
        for _, question, finding, score, value, rationale in answers:
            if finding is not None:
                finding = uuid_text(finding)
            # A scale answer is its score; anything else its JSON value, made canonical.
            text = str(score) if score is not None else json_column(value)
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
    return scores


def _write_spans(writer, counting, revision_order, text_ok, tally: _Tally) -> None:
    """The spans table: a withheld source's quoted words left out, their offsets kept."""
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
    write = writer.write_many
    for revision_id, found in by_revision(spans, revision_order):
        rows = []
        info = counting[revision_id]
        tally.add(revision_id, info, "spans", len(found))
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
                    json_column(answers),
                    rationale or None,
                )
                + info.columns
            )
        write(rows)


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
