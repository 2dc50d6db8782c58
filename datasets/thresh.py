"""Import of span annotations made with Thresh (thresh.tools), so a study annotated
there can be analysed and exported here. The mapping is in docs/thresh-mapping.md.

Thresh's JSON output is a list of entries, one per annotated (source, target) pair:
`{"source", "target", "annotator" (or "user", or "metadata": {"annotator"}), "edits": [{"category", "id",
"input_idx": [[start, end], ...], "output_idx": [...], "annotation": {...}}]}`. Each
edit becomes one span per character range; the map says which span question an edit
category answers and where each span sub-answer and the rationale come from.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone

from annotate.models import Assignment, Batch, Revision, Study, StudyMembership, Summary
from annotate.rubrics import AnswerContext, Question, RubricDefinition
from annotate.services.ratings import build_span
from core.exceptions import ApplicationError
from core.text_validation import find_problem
from datasets.pipeline import RowWriter


class ThreshImportError(ApplicationError):
    """The Thresh file or the map cannot be imported; nothing was written."""


@dataclass(frozen=True)
class SubAnswer:
    key: str  # our span sub-question
    path: str  # dotted path into the edit's annotation
    values: dict[str, str] | None  # Thresh value -> our option value (None: taken as is)


@dataclass(frozen=True)
class EditMapping:
    category: str
    question: Question
    answers: tuple[SubAnswer, ...]
    rationale: str | None


@dataclass(frozen=True)
class ThreshMap:
    match_field: str | None  # entry field holding the summary key; None: match by target text
    ignore: frozenset[str]
    edits: dict[str, EditMapping]


def parse_map(raw: dict | None, definition: RubricDefinition) -> ThreshMap:
    """The rubric map (docs/thresh-mapping.md). Without one, an edit category answers
    the span question of the same key and each sub-question reads the annotation key of
    the same name."""
    spans = {q.key: q for q in definition.questions if q.highlights}
    if raw is None:
        raw = {
            "edits": {
                key: {"question": key, "answers": {sq.key: sq.key for sq in q.span_questions}}
                for key, q in spans.items()
            }
        }
    if not isinstance(raw, dict) or not isinstance(raw.get("edits"), dict):
        raise ThreshImportError("map: needs an 'edits' mapping of Thresh categories to span questions")
    match = raw.get("match", "target")
    if match == "target":
        match_field = None
    elif isinstance(match, dict) and isinstance(match.get("field"), str):
        match_field = match["field"]
    else:
        raise ThreshImportError("map: match must be 'target' or {field: NAME}")
    edits = {}
    for category, spec in raw["edits"].items():
        where = f"map: edits.{category}"
        if not isinstance(spec, dict) or spec.get("question") not in spans:
            raise ThreshImportError(f"{where}: question must be one of the rubric's span questions {sorted(spans)}")
        question = spans[spec["question"]]
        known = {sq.key: sq for sq in question.span_questions}
        answers = []
        for key, source in (spec.get("answers") or {}).items():
            if key not in known:
                raise ThreshImportError(f"{where}.answers: {key!r} is not a span question of {question.key!r}")
            if isinstance(source, str):
                answers.append(SubAnswer(key, source, None))
            elif isinstance(source, dict) and isinstance(source.get("from"), str):
                values = source.get("values")
                if values is not None and not isinstance(values, dict):
                    raise ThreshImportError(f"{where}.answers.{key}: values must be a mapping")
                answers.append(SubAnswer(key, source["from"], {str(k): v for k, v in (values or {}).items()} or None))
            else:
                raise ThreshImportError(f"{where}.answers.{key}: give an annotation key or {{from: KEY, values: {{}}}}")
        rationale = spec.get("rationale")
        if rationale is not None and not isinstance(rationale, str):
            raise ThreshImportError(f"{where}.rationale: must be an annotation key")
        edits[str(category)] = EditMapping(str(category), question, tuple(answers), rationale)
    return ThreshMap(match_field=match_field, ignore=frozenset(map(str, raw.get("ignore") or ())), edits=edits)


def utf16_to_code_points(text: str, offset: Any, where: str) -> int:
    """Thresh runs in the browser, where string offsets count UTF-16 code units; ours
    count code points. An offset inside a surrogate pair, or past the end, is an error."""
    if not isinstance(offset, int) or isinstance(offset, bool) or offset < 0:
        raise ThreshImportError(f"{where}: offsets must be whole numbers ≥ 0")
    units = 0
    for index, char in enumerate(text):
        if units == offset:
            return index
        units += 2 if ord(char) > 0xFFFF else 1
        if units > offset:
            raise ThreshImportError(f"{where}: offset {offset} falls inside a character")
    if units == offset:
        return len(text)
    raise ThreshImportError(f"{where}: offset {offset} is past the end of the text ({units} UTF-16 units)")


def _lookup(annotation: Any, path: str) -> Any:
    """The value at a dotted path; a Thresh question-tree node {"val": ...} gives its val."""
    node = annotation
    for part in path.split("."):
        if not isinstance(node, dict):
            return None
        node = node.get(part)
    if isinstance(node, dict) and "val" in node:
        node = node["val"]
    return node


def rater_username(*, study: Study, annotator: str) -> str:
    """A stable account name for a Thresh annotator that does not reveal the name (an
    HMAC with the instance's secret key, per study)."""
    digest = hmac.new(settings.SECRET_KEY.encode(), f"{study.slug}\0{annotator}".encode(), hashlib.sha256)
    return f"thresh-{digest.hexdigest()[:12]}"


@dataclass(frozen=True)
class ThreshImportResult:
    batch: Batch
    raters: int
    revisions: int
    spans: int
    skipped_edits: int

    def summary_line(self) -> str:
        return (
            f"Imported into batch {self.batch.name!r}: {self.revisions} annotations by {self.raters} raters, "
            f"{self.spans} spans ({self.skipped_edits} edits ignored by the map)."
        )


def _ranges(edit: dict, field: str, where: str) -> list[tuple[Any, Any]]:
    raw = edit.get(field) or []
    if not isinstance(raw, list) or not all(isinstance(r, list | tuple) and len(r) == 2 for r in raw):
        raise ThreshImportError(f"{where}: {field} must be a list of [start, end] pairs")
    return [tuple(r) for r in raw]


def _pair_ranges(outputs: list[tuple], inputs: list[tuple]) -> list[tuple[tuple, tuple]]:
    """(summary range, source range) pairs for a linked edit with several ranges (Thresh
    lets an annotator select a discontinuous phrase on either side). One span per summary
    range: with as many source ranges as summary ranges, they pair in order; with one
    source range, every summary range links to it; otherwise, in order, and the summary
    ranges left over link to the last source range. Source ranges left over (more source
    than summary ranges) become spans of their own linked to the last summary range, so
    no selected text is dropped. Documented in docs/thresh-mapping.md."""
    pairs = [(output, inputs[min(i, len(inputs) - 1)]) for i, output in enumerate(outputs)]
    pairs += [(outputs[-1], link) for link in inputs[len(outputs) :]]
    return pairs


def _annotator(entry: dict) -> Any:
    """Thresh writes the annotator as `annotator` or `user`; exports of published
    datasets (SALSA as shipped with Thresh) keep it in `metadata.annotator`."""
    metadata = entry.get("metadata")
    nested = metadata.get("annotator") if isinstance(metadata, dict) else None
    return entry.get("annotator", entry.get("user", nested))


def _span(text: str, pair: tuple, where: str) -> dict[str, Any]:
    start = utf16_to_code_points(text, pair[0], where)
    end = utf16_to_code_points(text, pair[1], where)
    if start >= end:
        raise ThreshImportError(f"{where}: empty or reversed range {list(pair)}")
    return {"start": start, "end": end, "text": text[start:end]}


def _source_side(source: str | None, where: str) -> str:
    if source is None:
        raise ThreshImportError(f"{where}: input_idx needs the entry's source to equal the summary's source text")
    return source


def _entry_spans(
    entry: dict, summary_text: str, source: str | None, mapping: ThreshMap, where: str
) -> tuple[dict[str, list], int]:
    """Our span answers from one entry's edits; `source` is None when the entry's
    source text is not the summary's source (its input offsets then mean nothing here)."""
    answers: dict[str, list] = {}
    skipped = 0
    edits = entry.get("edits") or []
    if not isinstance(edits, list):
        raise ThreshImportError(f"{where}: edits must be a list")
    for number, edit in enumerate(edits, start=1):
        here = f"{where}, edit {number}"
        if not isinstance(edit, dict):
            raise ThreshImportError(f"{here}: must be an object")
        category = str(edit.get("category"))
        if category in mapping.ignore:
            skipped += 1
            continue
        spec = mapping.edits.get(category)
        if spec is None:
            raise ThreshImportError(f"{here}: category {category!r} is not in the map (map it or list it under ignore)")
        if "constituent_edits" in edit:
            raise ThreshImportError(f"{here}: composite edits ({category!r}) cannot be mapped; list them under ignore")
        annotation = edit.get("annotation") or {}
        sub = {}
        for item in spec.answers:
            value = _lookup(annotation, item.path)
            if value is None:
                continue
            if item.values is not None:
                if str(value) not in item.values:
                    raise ThreshImportError(f"{here}: {item.path} = {value!r} has no entry in the map's values")
                value = item.values[str(value)]
            sub[item.key] = value
        rationale = _lookup(annotation, spec.rationale) if spec.rationale else None
        base = {"answers": sub, "rationale": rationale if isinstance(rationale, str) else ""}
        outputs, inputs = _ranges(edit, "output_idx", here), _ranges(edit, "input_idx", here)
        target = spec.question.target
        target_text = summary_text
        if target == "linked":
            if not outputs or not inputs:
                raise ThreshImportError(f"{here}: a linked span needs output_idx and input_idx ranges")
            source_text = _source_side(source, here)
            spans = []
            for output, link in _pair_ranges(outputs, inputs):
                span = {**_span(target_text, output, here), **base}
                span["link"] = _span(source_text, link, here)
                spans.append(span)
        else:
            if target == "summary":
                side, text = outputs, target_text
            else:
                side, text = inputs, _source_side(source, here)
            if not side:
                field = "output_idx" if target == "summary" else "input_idx"
                raise ThreshImportError(f"{here}: {spec.question.key!r} marks the {target}, so {field} is needed")
            spans = [{**_span(text, pair, here), **base} for pair in side]
        answers.setdefault(spec.question.key, []).extend(spans)
    return answers, skipped


def _check_text(entries: list, rubric_map: Any) -> None:
    """Refuse text that cannot be stored (a lone surrogate, a NUL) anywhere in the map or
    the entries before anything reads them: later messages quote names from both, and
    the annotator's name is hashed as UTF-8."""
    found = find_problem(rubric_map)
    if found is not None:
        where, problem = found
        raise ThreshImportError(f"map: {where or 'the map'} {problem}")
    for number, entry in enumerate(entries, start=1):
        found = find_problem(entry)
        if found is not None:
            where, problem = found
            raise ThreshImportError(f"entry {number}: {where or 'the entry'} {problem}")


@transaction.atomic
def import_thresh(*, study: Study, entries: Any, rubric_map: dict | None = None, batch_name: str = "thresh"):
    """Import Thresh entries into `study` as one batch of submitted revisions, one per
    (annotator, summary). Every span is checked against the rubric (as a draft: Thresh
    typologies rarely cover every required question of a rubric). All or nothing."""
    definition = RubricDefinition.from_dict(study.rubric.definition)
    if not isinstance(entries, list) or not entries:
        raise ThreshImportError("the file must hold a non-empty JSON list of Thresh entries")
    _check_text(entries, rubric_map)
    mapping = parse_map(rubric_map, definition)
    if Batch.objects.filter(study=study, name=batch_name).exists():
        raise ThreshImportError(f"study {study.slug!r} already has a batch {batch_name!r}; choose another --batch")
    planned, entry_of, skipped = _plan(study, entries, mapping, definition)
    names = _refuse_imported_twice(study, planned, entry_of)
    users = _rater_accounts(study, names)
    batch, spans = _write_batch(study, batch_name, planned, users)
    return ThreshImportResult(
        batch=batch, raters=len(users), revisions=len(planned), spans=len(spans), skipped_edits=skipped
    )


def _plan(study: Study, entries: list, mapping, definition: RubricDefinition):
    """Each entry's checked answers by (annotator, summary id), with its place in the file
    (for messages) and the number of edits the map skips."""
    summaries = list(Summary.objects.filter(study=study).select_related("source"))
    by_text: dict[str, list[Summary]] = {}
    for s in summaries:
        by_text.setdefault(s.text, []).append(s)
    by_key = {s.key: s for s in summaries}
    planned: dict[tuple[str, int], tuple[Summary, dict]] = {}
    entry_of: dict[tuple[str, int], str] = {}
    skipped = 0
    for number, entry in enumerate(entries, start=1):
        where = f"entry {number}"
        if not isinstance(entry, dict) or not isinstance(entry.get("target"), str):
            raise ThreshImportError(f"{where}: must be an object with a target text")
        annotator = _entry_annotator(entry, where)
        summary = _entry_summary(entry, mapping, by_text, by_key, where)
        source = summary.source.text if entry.get("source") == summary.source.text else None
        answers, n_skipped = _entry_spans(entry, summary.text, source, mapping, where)
        skipped += n_skipped
        key = (annotator, summary.pk)
        if key in planned:
            raise ThreshImportError(f"{where}: this annotator already annotated summary {summary.key!r}")
        context = AnswerContext(summary_text=summary.text, source_text=summary.source.text)
        try:
            clean = definition.validate(answers, None, final=False, context=context)
        except ApplicationError as exc:
            fields = exc.extra.get("fields", {})
            raise ThreshImportError(f"{where}: " + "; ".join(f"{k}: {v}" for k, v in sorted(fields.items()))) from None
        planned[key] = (summary, clean.values)
        entry_of[key] = where
    return planned, entry_of, skipped


def _entry_annotator(entry: dict, where: str) -> str:
    annotator = _annotator(entry)
    if isinstance(annotator, int) and not isinstance(annotator, bool):
        annotator = str(annotator)  # some exports number their annotators
    if not isinstance(annotator, str) or not annotator:
        raise ThreshImportError(f"{where}: no annotator (annotator, user or metadata.annotator)")
    return annotator


def _entry_summary(entry: dict, mapping, by_text: dict, by_key: dict, where: str) -> Summary:
    """The summary an entry annotates: by its target text, or by the map's match field."""
    if mapping.match_field is None:
        found = by_text.get(entry["target"], [])
        if len(found) != 1:
            raise ThreshImportError(f"{where}: {len(found)} summaries of the study have this target text")
        summary = found[0]
    else:
        summary = by_key.get(str(entry.get(mapping.match_field)))
        if summary is None:
            raise ThreshImportError(f"{where}: no summary {entry.get(mapping.match_field)!r} in the study")
        if summary.text != entry["target"]:
            raise ThreshImportError(f"{where}: the target text differs from summary {summary.key!r}")
    return summary


def _refuse_imported_twice(study: Study, planned: dict, entry_of: dict) -> dict[str, str]:
    """The annotators' usernames; ThreshImportError for an annotation already imported."""
    # One live assignment per (summary, rater): an annotator whose annotation of a summary
    # is already here (an earlier import, under another batch name) is not imported twice.
    names = {annotator: rater_username(study=study, annotator=annotator) for annotator, _ in planned}
    live = {
        (username, summary_id): batch
        for username, summary_id, batch in Assignment.objects.filter(study=study, rater__username__in=names.values())
        .exclude(state=Assignment.State.WITHDRAWN)
        .values_list("rater__username", "summary_id", "batch__name")
    }
    for key, (summary, _) in planned.items():
        found = live.get((names[key[0]], summary.pk), False)
        if found is not False:
            raise ThreshImportError(
                f"{entry_of[key]}: this annotator's annotation of summary {summary.key!r} is already imported "
                f"(batch {found!r}); withdraw it there first to import it again"
            )
    return names


def _rater_accounts(study: Study, names: dict[str, str]) -> dict:
    """Each annotator's account (made without a usable password) and rater membership."""
    annotators = sorted(names)
    user_model = get_user_model()
    users = {}
    for annotator in annotators:
        user, created = user_model.objects.get_or_create(username=names[annotator])
        if created:
            user.set_unusable_password()
            user.save(update_fields=["password"])
        StudyMembership.objects.get_or_create(
            study=study, user=user, role=StudyMembership.Role.RATER, defaults={"order_seed": 0}
        )
        users[annotator] = user
    return users


def _write_batch(study: Study, batch_name: str, planned: dict, users: dict):
    """The batch, and its submitted assignments, revisions and spans; returns the batch and
    the spans."""
    per_item: dict[int, int] = {}
    for _, summary_id in planned:
        per_item[summary_id] = per_item.get(summary_id, 0) + 1
    batch = Batch.objects.create(
        study=study,
        name=batch_name,
        design={"design": "imported", "tool": "thresh"},
        seed=0,
        raters_per_item=max(per_item.values()),
    )
    now = timezone.now()
    positions: dict[str, int] = {}
    ordered = sorted(planned.items(), key=lambda kv: (kv[0][0], kv[1][0].key))
    assignments = []
    for (annotator, _), (summary, _) in ordered:
        assignments.append(
            Assignment(
                study=study,
                batch=batch,
                summary=summary,
                rater=users[annotator],
                position=positions.setdefault(annotator, 0),
                state=Assignment.State.SUBMITTED,
                submitted_at=now,
            )
        )
        positions[annotator] += 1
    # Through the import pipeline's writer: a fixed number of statements per batch of rows.
    writer = RowWriter()
    writer.create(assignments)
    revisions = writer.create(
        [
            Revision(
                assignment=assignment,
                number=1,
                status=Revision.Status.SUBMITTED,
                rubric=study.rubric,
                submitted_at=now,
            )
            for assignment in assignments
        ]
    )
    spans = [
        build_span(revision=revision, question=question, index=index, answer=span)
        for revision, (_, (_, values)) in zip(revisions, ordered, strict=True)
        for question, items in values.items()
        for index, span in enumerate(items)
    ]
    writer.create(spans)
    return batch, spans
