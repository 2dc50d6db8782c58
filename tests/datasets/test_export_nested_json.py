"""Nested values in the dataset export (docs/export-format.md): the JSON columns are JSON
values in the JSON Lines files and JSON text in CSV and Parquet (one type per column);
pyarrow reads the tables; the re-import reads every form, older folders included."""

import csv
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.json as pj
import pyarrow.parquet as pq
import pytest
import yaml
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command

from annotate.models import Rating, Study
from datasets.demo import DEMO_STUDY, FACTPICO_STUDY
from datasets.exporting import TABLES, sha256sums
from datasets.exporting.folder import arrow_schema, canonical_json
from tests.datasets.test_export import all_files, export, jsonl_rows, rate_demo

SLUGS = (DEMO_STUDY, FACTPICO_STUDY)


@pytest.fixture
def rated(transactional_db):  # the re-import tests flush the database
    rate_demo()


def json_columns(table: str) -> list[str]:
    return [name for name, kind in TABLES[table] if kind == "json"]


def csv_rows(folder: Path, table: str) -> list[dict]:
    with (folder / "csv" / f"{table}.csv").open(encoding="utf-8", newline="") as handle:
        return list(csv.DictReader(handle))


def rechecksum(folder: Path) -> None:
    files = [p for p in folder.rglob("*") if p.is_file() and p.name != "SHA256SUMS"]
    (folder / "SHA256SUMS").write_text(sha256sums(folder, files), encoding="utf-8")


def test_json_lines_hold_values_and_csv_and_parquet_their_json_text(rated, tmp_path):
    seen = set()
    for slug in SLUGS:
        out = export(slug, tmp_path / slug, include_calibration=True).out_dir
        for table in TABLES:
            lines, texts = jsonl_rows(out, table), pq.read_table(out / "parquet" / f"{table}.parquet")
            cells = csv_rows(out, table)
            assert texts.schema == arrow_schema(TABLES[table]), table  # JSON columns: strings
            for line, text, cell in zip(lines, texts.to_pylist(), cells, strict=True):
                for column in json_columns(table):
                    if text[column] is None:
                        assert line[column] is None and cell[column] == "", (table, column)
                        continue
                    # The same value in every format: nested in JSON Lines, its text elsewhere.
                    assert line[column] == json.loads(text[column]) == json.loads(cell[column]), (table, column)
                    assert text[column] == cell[column] == canonical_json(line[column]), (table, column)
                    if not isinstance(line[column], str) or table == "ratings":
                        seen.add((table, column, type(line[column]).__name__))
    ratings = jsonl_rows(tmp_path / DEMO_STUDY, "ratings")
    by_question = {r["question"]: r["value"] for r in ratings}
    # A scale answer is its number, a tickbox a list, a text a string, never a string of JSON.
    assert isinstance(by_question["overall"], int) and isinstance(by_question["failure_modes"], list)
    assert isinstance(by_question["feedback"], str) and not by_question["feedback"].startswith('"')
    na = [r for r in jsonl_rows(tmp_path / FACTPICO_STUDY, "ratings") if r["value"] == "na"]
    assert na and all(r["score"] is None for r in na)
    assert {
        ("ratings", "value", "int"),
        ("ratings", "value", "list"),
        ("ratings", "value", "str"),
        ("spans", "answers", "dict"),
        ("rubric", "definition", "dict"),
        ("sources", "sentences", "list"),
        ("batches", "design", "dict"),
    } <= seen


def test_pyarrow_reads_every_table(rated, tmp_path):
    """Parquet: every table, with the documented types. JSON Lines: pyarrow's JSON reader
    (which `load_dataset` uses for JSON Lines) reads every table whose JSON columns hold
    one kind of value, and refuses the ratings' values (numbers, strings and lists) and
    the rubric's option values: the reason the card's `configs` name the Parquet files."""
    refused = {}
    for slug in SLUGS:
        out = export(slug, tmp_path / slug, include_calibration=True).out_dir
        for table, columns in TABLES.items():
            parquet = pq.read_table(out / "parquet" / f"{table}.parquet")
            assert parquet.schema == arrow_schema(columns) and parquet.num_rows == len(jsonl_rows(out, table))
            path = out / "jsonl" / f"{table}.jsonl"
            if not path.stat().st_size:
                continue
            try:
                read = pj.read_json(path)
            except pa.ArrowInvalid as exc:
                refused[(slug, table)] = str(exc)
                continue
            assert read.num_rows == parquet.num_rows and read.column_names == [name for name, _ in columns]
        header = yaml.safe_load((out / "README.md").read_text(encoding="utf-8").split("---\n", 2)[1])
        assert {f["path"] for c in header["configs"] for f in c["data_files"]} == {
            f"parquet/{c['config_name']}.parquet" for c in header["configs"]
        }
    assert {table for _, table in refused} == {"ratings", "rubric"}
    assert all("changed from" in message for message in refused.values())


def test_the_card_points_the_loader_at_csv_when_there_is_no_parquet(rated, tmp_path):
    out = export(DEMO_STUDY, tmp_path / "out", formats=["jsonl", "csv"]).out_dir
    header = yaml.safe_load((out / "README.md").read_text(encoding="utf-8").split("---\n", 2)[1])
    paths = [f["path"] for c in header["configs"] for f in c["data_files"]]
    assert "csv/ratings.csv" in paths and all(p.startswith("csv/") and (out / p).is_file() for p in paths)


@pytest.mark.parametrize("formats", [["parquet"], ["jsonl"]])
def test_a_folder_of_one_format_round_trips_byte_for_byte(rated, tmp_path, formats):
    for slug in SLUGS:
        export(slug, tmp_path / "first" / slug, include_calibration=True, formats=formats)
    call_command("flush", interactive=False)
    for slug in SLUGS:
        call_command("import_dataset", str(tmp_path / "first" / slug))
        again = export(slug, tmp_path / "again" / slug, include_calibration=True, formats=formats).out_dir
        assert all_files(again) == all_files(tmp_path / "first" / slug)


def as_format_1(folder: Path) -> None:
    """Rewrite a JSON Lines export as format 1 wrote it: JSON columns as JSON text."""
    for table in TABLES:
        path = folder / "jsonl" / f"{table}.jsonl"
        rows = jsonl_rows(folder, table)
        for row in rows:
            for column in json_columns(table):
                if row[column] is not None:
                    row[column] = canonical_json(row[column])
        path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    manifest = json.loads((folder / "study.json").read_text(encoding="utf-8"))
    manifest["format_version"] = 1
    (folder / "study.json").write_text(json.dumps(manifest), encoding="utf-8")
    rechecksum(folder)


def test_a_format_1_folder_still_imports_and_exports_as_format_2(rated, tmp_path):
    for slug in SLUGS:
        export(slug, tmp_path / "first" / slug, include_calibration=True, formats=["jsonl"])
        old = tmp_path / "old" / slug
        export(slug, old, include_calibration=True, formats=["jsonl"])
        as_format_1(old)
        assert isinstance(jsonl_rows(old, "ratings")[0]["value"], str)
    call_command("flush", interactive=False)
    for slug in SLUGS:
        call_command("import_dataset", str(tmp_path / "old" / slug))
        again = export(slug, tmp_path / "again" / slug, include_calibration=True, formats=["jsonl"]).out_dir
        assert all_files(again) == all_files(tmp_path / "first" / slug)
        assert json.loads((again / "study.json").read_text())["format_version"] == 2


def test_json_text_that_is_not_json_in_parquet_is_refused_naming_row_and_column(rated, tmp_path):
    folder = export(DEMO_STUDY, tmp_path / "out", formats=["parquet"]).out_dir
    path = folder / "parquet" / "ratings.parquet"
    table = pq.read_table(path)
    values = table.column("value").to_pylist()
    values[2] = '["unclosed"'
    pq.write_table(table.set_column(table.column_names.index("value"), "value", pa.array(values, pa.string())), path)
    rechecksum(folder)
    call_command("flush", interactive=False)
    with pytest.raises(CommandError, match=r"ratings\.parquet: row 3: value is not valid JSON"):
        call_command("import_dataset", str(folder))
    assert not Study.objects.exists() and not Rating.objects.exists() and not get_user_model().objects.exists()


def test_an_unknown_format_version_is_refused(rated, tmp_path):
    folder = export(DEMO_STUDY, tmp_path / "out", formats=["jsonl"]).out_dir
    manifest = json.loads((folder / "study.json").read_text(encoding="utf-8"))
    manifest["format_version"] = 3
    (folder / "study.json").write_text(json.dumps(manifest), encoding="utf-8")
    rechecksum(folder)
    call_command("flush", interactive=False)
    with pytest.raises(CommandError, match="format_version 3 is not supported"):
        call_command("import_dataset", str(folder))
    assert not Study.objects.exists()
