"""The table writer of the dataset export, on hostile text: every format must give
back exactly the rows it was given (Python's json, csv and pyarrow are the oracles)."""

import csv
import json
from datetime import UTC

import pyarrow.parquet as pq
import pytest

from annotate.exporting.folder import JSONL_BATCH, TABLES, TableWriter, iso_timestamp

NASTY = [
    'a "quoted" word',
    'ends with },{"summary_key":"x"',  # the batch separator, inside a string
    '},{"',
    "line\nbreak\r\nand\ttab",
    'back\\slash \\" and \\',
    "control \x00\x01\x1f and del \x7f",
    "unicode é ✓ 𝛼 🙂 \u2028 \u2029",
    "",
    "{}[],:",
]


def _rows(n: int) -> list[tuple]:
    rows = []
    for i in range(n):
        text = NASTY[i % len(NASTY)]
        rows.append(
            (
                f"S{i:05d}",
                str(i),
                None if i % 3 else text,  # title
                text,  # text
                bool(i % 2),
                "CC BY 4.0",
                None,
                text,
                "",
                json.dumps({"doi": text}),
                "{}",
                None,
            )
        )
    return rows


@pytest.mark.parametrize("n", [0, 1, JSONL_BATCH - 1, JSONL_BATCH, JSONL_BATCH + 1, 2 * JSONL_BATCH + 7])
def test_every_format_gives_back_the_rows(tmp_path, n):
    for fmt in ("jsonl", "csv", "parquet"):
        (tmp_path / fmt).mkdir()
    writer = TableWriter(tmp_path, "sources", ("jsonl", "csv", "parquet"))
    rows = _rows(n)
    writer.write_many(rows[: n // 2])
    for row in rows[n // 2 :]:
        writer.write(row)
    writer.close()
    names = [name for name, _ in TABLES["sources"]]
    expected = [dict(zip(names, row, strict=True)) for row in rows]

    lines = (tmp_path / "jsonl" / "sources.jsonl").read_bytes().split(b"\n")
    assert lines[-1] == b""  # every line ends with a newline, including the last
    assert [json.loads(line) for line in lines[:-1]] == expected
    # The same bytes as Python's json module writes, compact and UTF-8 as is.
    reference = "".join(json.dumps(row, ensure_ascii=False, separators=(",", ":")) + "\n" for row in expected).encode()
    assert (tmp_path / "jsonl" / "sources.jsonl").read_bytes() == reference

    with (tmp_path / "csv" / "sources.csv").open(encoding="utf-8", newline="") as handle:
        read = list(csv.reader(handle))
    assert read[0] == names
    for got, row in zip(read[1:], rows, strict=True):
        want = ["" if v is None else ("true" if v is True else "false" if v is False else str(v)) for v in row]
        assert got == want

    assert pq.read_table(tmp_path / "parquet" / "sources.parquet").to_pylist() == expected


def test_a_nested_value_is_written_row_by_row(tmp_path):
    """The batch split relies on scalar values; a row that breaks that rule (a nested
    JSON value passed by mistake) must still come out as one valid line per row."""
    (tmp_path / "jsonl").mkdir()
    writer = TableWriter(tmp_path, "rubric", ("jsonl",))
    rows = [("k", 1, "t", "h", [{"a": 1}, {"b": 2}]), ("k", 2, "t", "h", {"x": [{"y": '},{"'}]})]
    writer.write_many(rows)
    writer.close()
    lines = (tmp_path / "jsonl" / "rubric.jsonl").read_text(encoding="utf-8").splitlines()
    assert [json.loads(line)["definition"] for line in lines] == [rows[0][4], rows[1][4]]


def test_timestamps_are_utc_with_microseconds():
    from datetime import datetime, timedelta, timezone

    moment = datetime(2026, 3, 4, 5, 6, 7, tzinfo=timezone(timedelta(hours=2)))
    assert iso_timestamp(moment) == moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    assert iso_timestamp(moment) == "2026-03-04T03:06:07.000000Z"
    assert iso_timestamp(None) is None
