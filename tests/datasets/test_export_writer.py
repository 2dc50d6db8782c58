"""The table writer of the dataset export, on hostile text: every format must give
back exactly the rows it was given (Python's json, csv and pyarrow are the oracles)."""

import csv
import json
import math
import random
from datetime import UTC

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from datasets.exporting.folder import (
    JSONL_BATCH,
    ROW_GROUP,
    TABLES,
    TableWriter,
    canonical_json,
    iso_timestamp,
    json_columns,
)

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
                canonical_json({"doi": text}),  # JSON columns come as canonical JSON text
                "{}" if i % 4 else canonical_json([{"a": text}, {"b": [text, i]}]),  # `},{"` inside
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
    expected = [dict(zip(names, row, strict=True)) for row in rows]  # JSON columns as text
    nested = [
        {k: json.loads(v) if k in json_columns("sources") and v is not None else v for k, v in row.items()}
        for row in expected
    ]

    lines = (tmp_path / "jsonl" / "sources.jsonl").read_bytes().split(b"\n")
    assert lines[-1] == b""  # every line ends with a newline, including the last
    # JSON Lines: a JSON column is the JSON value itself, not a string of it.
    assert [json.loads(line) for line in lines[:-1]] == nested
    # The same bytes as Python's json module writes, compact and UTF-8 as is.
    reference = "".join(json.dumps(row, ensure_ascii=False, separators=(",", ":")) + "\n" for row in nested).encode()
    assert (tmp_path / "jsonl" / "sources.jsonl").read_bytes() == reference

    with (tmp_path / "csv" / "sources.csv").open(encoding="utf-8", newline="") as handle:
        read = list(csv.reader(handle))
    assert read[0] == names
    for got, row in zip(read[1:], rows, strict=True):
        want = ["" if v is None else ("true" if v is True else "false" if v is False else str(v)) for v in row]
        assert got == want

    assert pq.read_table(tmp_path / "parquet" / "sources.parquet").to_pylist() == expected


def test_a_list_of_objects_is_written_row_by_row(tmp_path):
    """The batch split counts `},{"` between rows; a nested value holding a list of
    objects has more, so its batch is written row by row, still one valid line per row."""
    for fmt in ("jsonl", "parquet"):
        (tmp_path / fmt).mkdir()
    writer = TableWriter(tmp_path, "rubric", ("jsonl", "parquet"))
    values = [[{"a": 1}, {"b": 2}], {"x": [{"y": '},{"'}, {"z": None}]}, "text", 4, None, []]
    rows = [("k", i, "t", "h", canonical_json(v)) for i, v in enumerate(values)]
    writer.write_many(rows)
    writer.close()
    lines = (tmp_path / "jsonl" / "rubric.jsonl").read_text(encoding="utf-8").splitlines()
    assert [json.loads(line)["definition"] for line in lines] == values
    # Parquet keeps one type per column: the JSON text.
    assert [r["definition"] for r in pq.read_table(tmp_path / "parquet" / "rubric.parquet").to_pylist()] == [
        r[4] for r in rows
    ]


def test_timestamps_are_utc_with_microseconds():
    from datetime import datetime, timedelta, timezone

    moment = datetime(2026, 3, 4, 5, 6, 7, tzinfo=timezone(timedelta(hours=2)))
    assert iso_timestamp(moment) == moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    assert iso_timestamp(moment) == "2026-03-04T03:06:07.000000Z"
    assert iso_timestamp(None) is None


FLOATS = [0.1, 1 / 3, 5e-324, 1e-300, 1.7976931348623157e308, -0.0, 0.30000000000000004, None]


def _claims(n: int) -> list[tuple]:
    rng = random.Random(n)
    return [
        (
            f"T{i:06d}",
            i,
            f"u{i}",
            NASTY[i % len(NASTY)],
            2**63 - 1 if i % 11 == 0 else -(2**63) if i % 13 == 0 else i,
            None,
            "[]",
            "supported",
            None,
            FLOATS[i] if i < len(FLOATS) else rng.random() * 10 ** rng.randint(-30, 30),
        )
        for i in range(n)
    ]


def _write_claims(folder, rows, chunk: int) -> bytes:
    (folder / "parquet").mkdir(parents=True)
    writer = TableWriter(folder, "claims", ("parquet",))
    for start in range(0, len(rows), chunk):
        writer.write_many(rows[start : start + chunk])
    writer.close()
    return (folder / "parquet" / "claims.parquet").read_bytes()


def test_parquet_keeps_every_value_and_its_row_groups_do_not_depend_on_the_chunks(tmp_path):
    rows = _claims(2 * ROW_GROUP + 5)
    one = _write_claims(tmp_path / "a", rows, 20_000)
    two = _write_claims(tmp_path / "b", rows, 777)
    assert one == two
    parquet = pq.ParquetFile(tmp_path / "a" / "parquet" / "claims.parquet")
    sizes = [parquet.metadata.row_group(i).num_rows for i in range(parquet.metadata.num_row_groups)]
    assert sizes == [ROW_GROUP, ROW_GROUP, 5]
    names = [name for name, _ in TABLES["claims"]]
    got = parquet.read().to_pylist()
    assert got == [dict(zip(names, row, strict=True)) for row in rows]
    # -0.0 == 0.0 in Python: the sign is checked on its own.
    assert math.copysign(1, got[5]["probability"]) == -1


def test_a_value_of_the_wrong_type_fails_the_parquet_table(tmp_path):
    (tmp_path / "parquet").mkdir()
    writer = TableWriter(tmp_path, "claims", ("parquet",))
    writer.write_many([("T1", "not a number", "u", "t", None, None, "[]", "supported", None, 0.5)])
    # A bug in the export, never the data's fault: it must stop the export, loudly.
    with pytest.raises(pa.ArrowInvalid, match="index"):
        writer.close()
