"""Importing clinical questions (docs/import-format.md, "Questions").

Two layouts, CSV or JSON Lines:

- ours: `key`, `question`, `gold_answer`, `references`, `exclude`, `published`, `metadata`;
- the PubMedRS-200 benchmark as published in the Clinfo.ai repository: `specialty,
  SubTopic, Title, Abstract, Introduction, Methods, Results, Conclusion, PMID, Ref_PMIDs,
  Ref_DOIs, questions, PublishedDate, HumanQuestions, HumanAnswer`, recognised by its
  `Ref_PMIDs` and `questions` columns. The review's PMID is the identifier to exclude and
  names the question (`pmid-<PMID>`); `Ref_PMIDs` (a Python-style list of strings) are the
  references; `questions` is the question (`HumanQuestions` when `questions` is empty);
  `HumanAnswer` is the gold answer; `PublishedDate` the review's publication day; the
  review's specialty, subtopic, title and DOIs are kept as metadata. The review's own
  text columns (Abstract ... Conclusion) may be absent or empty and are not stored: they
  would hand the answer to anyone who reads the question.

All or nothing, idempotent by key, errors naming the line and the field.
"""

from __future__ import annotations

import ast
import csv
import io
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date, datetime

from django.db import transaction

from annotate.models import Study
from core.exceptions import ApplicationError
from datasets.pipeline import Fields, ImportLineError, ImportResult, RowWriter, batches, json_objects, set_changed
from literature.models import Question
from stats.csvinput import quoting_problem

PUBMEDRS_COLUMNS = (
    "specialty",
    "SubTopic",
    "Title",
    "Abstract",
    "Introduction",
    "Methods",
    "Results",
    "Conclusion",
    "PMID",
    "Ref_PMIDs",
    "Ref_DOIs",
    "questions",
    "PublishedDate",
    "HumanQuestions",
    "HumanAnswer",
)
OUR_FIELDS = ("key", "question", "gold_answer", "references", "exclude", "published", "metadata")
KEY_RE = re.compile(r"^[A-Za-z0-9._:-]+$")
IDENTIFIER_MAX = 200
# The day layouts accepted, each with the name the import's summary gives it. PubMedRS-200
# as published writes every PublishedDate month/day/year without leading zeros
# (`11/1/2021`, `3/15/2020`); a slash date with the year last is always read that way,
# never day/month/year (a day/month/year file fails on its first day above 12, naming it).
DATE_LAYOUTS = (
    ("ISO (year-month-day)", re.compile(r"^\d{4}-\d{1,2}-\d{1,2}$"), "%Y-%m-%d"),
    ("ISO (year-month-day)", re.compile(r"^\d{4}-\d{1,2}-\d{1,2}[T ]\d{1,2}:\d{2}:\d{2}$"), None),
    ("year/month/day", re.compile(r"^\d{4}/\d{1,2}/\d{1,2}$"), "%Y/%m/%d"),
    ("month/day/year", re.compile(r"^\d{1,2}/\d{1,2}/\d{4}$"), "%m/%d/%Y"),
    ("month/day/year", re.compile(r"^\d{1,2}/\d{1,2}/\d{4} \d{1,2}:\d{2}(:\d{2})?$"), None),
    ("day month year", re.compile(r"^\d{1,2} [A-Za-z]+ \d{4}$"), "%d %B %Y"),
    ("month day, year", re.compile(r"^[A-Za-z]+ \d{1,2}, \d{4}$"), "%B %d, %Y"),
)


@dataclass(frozen=True)
class QuestionRow:
    line: int
    key: str
    text: str
    gold_answer: str
    reference_ids: list[str]
    exclude_ids: list[str]
    published_on: date | None
    metadata: dict
    key_field: str = "key"  # the column the key came from, for error messages
    date_layout: str = ""  # the layout its date was written in (DATE_LAYOUTS), "" without one


# --- reading ---------------------------------------------------------------------------


def read_rows(text: str, *, name: str = "") -> list[QuestionRow]:
    """Every question of a file's text, checked, or ImportLineError. CSV when the name ends
    in .csv or the text does not start with "{"; JSON Lines otherwise."""
    is_csv = name.lower().endswith(".csv") or not text.lstrip().startswith("{")
    rows = _csv_rows(text) if is_csv else [_our_row(Fields(n, d)) for n, d in json_objects(io.StringIO(text))]
    if not rows:
        raise ApplicationError("The file holds no questions.")
    seen: dict[str, int] = {}
    for row in rows:
        if row.key in seen:
            raise ImportLineError(row.line, row.key_field, f"duplicates line {seen[row.key]}")
        seen[row.key] = row.line
    return rows


def _csv_rows(text: str) -> list[QuestionRow]:
    problem = quoting_problem(text)
    if problem is not None:  # csv.DictReader would read an unclosed quote as a cut cell
        raise ImportLineError(problem[0], None, problem[1])
    reader = csv.DictReader(io.StringIO(text, newline=""), strict=True)
    header = reader.fieldnames or []
    if not header:
        raise ApplicationError("The file holds no questions.")
    pubmedrs = "Ref_PMIDs" in header and "questions" in header
    if not pubmedrs:
        unknown = sorted(set(header) - set(OUR_FIELDS))
        if unknown:
            raise ImportLineError(
                1,
                unknown[0],
                "is not a column of either layout (ours: "
                + ", ".join(OUR_FIELDS)
                + "; PubMedRS-200: Ref_PMIDs and questions with the benchmark's other columns)",
            )
    rows = []
    line = 2  # the line the next record starts on (the header is line 1)
    for record in reader:
        start, line = line, reader.line_num + 1
        if all(not (v or "").strip() for v in record.values() if isinstance(v, str)):
            continue
        if None in record:  # more cells than the header has columns
            raise ImportLineError(start, None, f"{len(header) + len(record[None])} cells, the header has {len(header)}")
        cells = {k: (v or "") for k, v in record.items()}
        rows.append(_pubmedrs_row(start, cells) if pubmedrs else _our_csv_row(start, cells))
    return rows


def _our_csv_row(line: int, cells: dict[str, str]) -> QuestionRow:
    data: dict = {k: v for k, v in cells.items() if v.strip()}
    for name in ("references", "exclude"):
        if name in data:
            data[name] = _id_list_cell(line, name, data[name])
    if "metadata" in data:
        try:
            data["metadata"] = json.loads(data["metadata"])
        except json.JSONDecodeError:
            raise ImportLineError(line, "metadata", "must be a JSON object") from None
    return _our_row(Fields(line, data))


def _id_list_cell(line: int, name: str, cell: str) -> list[str]:
    """A CSV cell of identifiers: a JSON or Python-style list, or values separated by ";"."""
    cell = cell.strip()
    if cell.startswith("["):
        return _literal_list(line, name, cell)
    return [part.strip() for part in cell.split(";") if part.strip()]


def _literal_list(line: int, name: str, cell: str) -> list[str]:
    """A Python-style or JSON list of strings or whole numbers, parsed without evaluating code."""
    try:
        value = ast.literal_eval(cell)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        raise ImportLineError(line, name, "must be a list such as ['12345', '67890']") from None
    if not isinstance(value, list | tuple) or not all(
        (isinstance(v, str) and v.strip()) or (isinstance(v, int) and not isinstance(v, bool)) for v in value
    ):
        raise ImportLineError(line, name, "must be a list of identifiers such as ['12345', '67890']")
    return [str(v).strip() for v in value]


def _our_row(f: Fields) -> QuestionRow:
    f.unknown_fields(set(OUR_FIELDS))
    key = f.string("key", max_length=200, pattern=KEY_RE)
    published_on, layout = _dated(f.line, "published", f.data.get("published"))
    return QuestionRow(
        line=f.line,
        key=key,
        text=f.string("question"),
        gold_answer=f.string("gold_answer", required=False),
        reference_ids=_identifiers(f, "references", f.data.get("references", [])),
        exclude_ids=_identifiers(f, "exclude", f.data.get("exclude", [])),
        published_on=published_on,
        metadata=f.mapping("metadata"),
        date_layout=layout,
    )


def _identifiers(f: Fields, name: str, value) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        f.fail(name, "must be a list of non-empty strings (PMIDs or source keys)")
    return _checked_ids(f.line, name, value)


def _checked_ids(line: int, name: str, values: list[str]) -> list[str]:
    out: list[str] = []
    for v in values:
        v = v.strip()
        if len(v) > IDENTIFIER_MAX:
            raise ImportLineError(line, name, f"an identifier is longer than {IDENTIFIER_MAX} characters")
        if v not in out:
            out.append(v)
    return out


def _dated(line: int, name: str, value) -> tuple[date | None, str]:
    """The day a cell holds and the name of the layout it was written in (DATE_LAYOUTS)."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None, ""
    if isinstance(value, str):
        text = value.strip()
        for layout, pattern, fmt in DATE_LAYOUTS:
            if not pattern.match(text):
                continue
            day_part = text.split("T")[0].split(" ")[0] if fmt is None else text
            day_fmt = fmt or ("%m/%d/%Y" if "/" in day_part else "%Y-%m-%d")
            try:
                return datetime.strptime(day_part, day_fmt).date(), layout  # noqa: DTZ007 (a calendar day)
            except ValueError:
                raise ImportLineError(line, name, f"{text!r} is not a day in the {layout} layout") from None
    raise ImportLineError(line, name, f"must be a date such as 2021-03-15 or 3/15/2021 (month/day/year), got {value!r}")


def date_layouts(rows: Iterable[QuestionRow]) -> str:
    """How the file's dates were read, for the import's summary: "dates read as
    month/day/year (209)", or "no dates"."""
    counts: dict[str, int] = {}
    for row in rows:
        if row.date_layout:
            counts[row.date_layout] = counts.get(row.date_layout, 0) + 1
    if not counts:
        return "no dates"
    return "dates read as " + ", ".join(f"{layout} ({n})" for layout, n in counts.items())


def _pubmedrs_row(line: int, cells: dict[str, str]) -> QuestionRow:
    pmid = cells.get("PMID", "").strip()
    if not re.fullmatch(r"\d+", pmid):
        raise ImportLineError(line, "PMID", f"must be the review's PubMed id (digits), got {pmid!r}")
    text = cells.get("questions", "").strip() or cells.get("HumanQuestions", "").strip()
    if not text:
        raise ImportLineError(line, "questions", "is empty (and so is HumanQuestions)")
    references = cells.get("Ref_PMIDs", "").strip()
    dois = cells.get("Ref_DOIs", "").strip()
    published_on, layout = _dated(line, "PublishedDate", cells.get("PublishedDate"))
    return QuestionRow(
        line=line,
        key=f"pmid-{pmid}",
        text=text,
        gold_answer=cells.get("HumanAnswer", "").strip(),
        reference_ids=_checked_ids(line, "Ref_PMIDs", _literal_list(line, "Ref_PMIDs", references))
        if references
        else [],
        exclude_ids=[pmid],
        published_on=published_on,
        metadata={
            k: v
            for k, v in (
                ("layout", "PubMedRS-200"),
                ("review_pmid", pmid),
                ("specialty", cells.get("specialty", "").strip()),
                ("subtopic", cells.get("SubTopic", "").strip()),
                ("review_title", cells.get("Title", "").strip()),
                ("human_question", cells.get("HumanQuestions", "").strip()),
                ("reference_dois", _literal_list(line, "Ref_DOIs", dois) if dois else []),
            )
            if v
        },
        key_field="PMID",
        date_layout=layout,
    )


# --- writing ---------------------------------------------------------------------------


FIELDS = ("text", "gold_answer", "reference_ids", "exclude_ids", "published_on", "metadata")


def summary_line(result: ImportResult) -> str:
    c, u, n = (result.created["question"], result.updated["question"], result.unchanged["question"])
    return f"question: {c} created, {u} updated, {n} unchanged"


@transaction.atomic
def import_questions(*, study: Study, rows: Iterable[QuestionRow]) -> ImportResult:
    """Create or update the study's questions by key, through the import pipeline's
    writer: per batch of rows, one lookup, then the new ones created and the changed
    ones updated in batches."""
    writer = RowWriter()
    for chunk in batches(rows):
        existing = {q.key: q for q in Question.objects.filter(study=study, key__in=[r.key for r in chunk])}
        created, changed = [], []
        for row in chunk:
            values = {name: getattr(row, name) for name in FIELDS}
            question = existing.get(row.key)
            if question is None:
                created.append(Question(study=study, key=row.key, **values))
            elif set_changed(question, values):
                changed.append(question)
                writer.count("question", created=False, changed=True)
            else:
                writer.count("question", created=False)
        writer.create(created, kind="question")
        writer.update(changed, FIELDS)
    return writer.result
