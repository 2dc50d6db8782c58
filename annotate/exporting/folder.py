"""The dataset folder's format (docs/export-format.md): its tables and columns, how
values are written (canonical JSON, UTC timestamps), the writers of every format, and
the readers and checksums the re-import uses."""

from __future__ import annotations

import csv
import hashlib
import json
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from annotate.exceptions import ApplicationError

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


def canonical_json(value: Any) -> str:
    """Canonical JSON text: sorted keys, no spaces, UTF-8 as is (byte-stable)."""
    return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"), allow_nan=False)


def iso_timestamp(value: datetime | None) -> str | None:
    if value is None:
        return None
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def arrow_schema(columns):
    import pyarrow as pa

    types = {"str": pa.string(), "json": pa.string(), "int": pa.int64(), "bool": pa.bool_(), "float": pa.float64()}
    return pa.schema([pa.field(name, types[kind]) for name, kind in columns])


class TableWriter:
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
            self._schema = arrow_schema(self.columns)
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


def pretty_json(value: Any) -> str:
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
