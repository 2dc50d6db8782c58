"""The dataset folder's format (docs/export-format.md): its tables and columns, how
values are written (canonical JSON, UTC timestamps), the writers of every format and
the checksums. The re-import's readers are datasets.exporting.dataset_import's."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

from core.csv_cells import QUOTE, QUOTED_FIRST, CsvRowWriter
from core.exceptions import ApplicationError

# 2: the JSON columns are JSON values in the JSON Lines files (JSON text in CSV and
# Parquet); 1: JSON text in every format. The re-import reads both.
FORMAT_VERSION = 2
READABLE_VERSIONS = (1, 2)
FORMATS = ("jsonl", "csv", "parquet")
PHASES = ("initial", "post_discussion", "all")
PHASE_ORDER = {"initial": 0, "post_discussion": 1}
ITERATOR_CHUNK = 5000
# Rows per fetch of the answer tables (the hot path of a large export).
ANSWER_CHUNK = 20000
# Rows per orjson call when writing JSON Lines (small enough to stay in the CPU cache).
JSONL_BATCH = 1000
ROW_GROUP = 65536
LICENCE_URL = "https://creativecommons.org/licenses/by/4.0/"
LEGAL_CODE_URL = "https://creativecommons.org/licenses/by/4.0/legalcode"


class ExportError(ApplicationError):
    """The export cannot be made as asked."""


class DatasetImportError(ApplicationError):
    """The folder cannot be imported; nothing was written."""


# --- the tables ---------------------------------------------------------------------------

# Column kinds: str, int, bool, float, json (a nested value: the JSON value itself in JSON
# Lines; JSON text in CSV and Parquet, so one column has one type there, the type the
# Hugging Face loader needs; see docs/export-format.md).
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
    # Pairwise comparisons (docs/pairwise.md): each comparison's summaries, and
    # every counting answer to a comparison question with the sides it was shown on.
    "comparisons": (
        ("comparison_key", "str"),
        ("uuid", "str"),
        ("source_key", "str"),
        ("summary_keys", "json"),
    ),
    "comparison_answers": (
        ("comparison_key", "str"),
        ("question", "str"),
        ("left_key", "str"),
        ("right_key", "str"),
        ("preferred_key", "str"),
        ("preferred_side", "str"),
        ("strength", "str"),
        ("rationale", "str"),
        ("spans", "json"),
        *_REVISION_COLUMNS,
    ),
    # The qualification gate (docs/qualification.md): every scored attempt, by
    # pseudonym, with the pass rule it was scored under.
    "qualification_attempts": (
        ("rater", "str"),
        ("attempt", "int"),
        ("scored_at", "str"),
        ("matched", "int"),
        ("compared", "int"),
        ("score", "float"),
        ("passed", "bool"),
        ("rule_version", "int"),
        ("rule", "json"),
        ("retries_allowed", "int"),
    ),
    # Live quality (docs/monitoring.md): a rater's answers in a batch an admin
    # excluded from the analysis (left out of the answer tables), with who, when and why;
    # and the raters' questions to the admins about items, with the answers.
    "exclusions": (
        ("batch", "str"),
        ("rater", "str"),
        ("reason", "str"),
        ("excluded_by", "str"),
        ("excluded_at", "str"),
        ("items_left_out", "int"),
    ),
    "flags": (
        ("summary_key", "str"),
        ("batch", "str"),
        ("rater", "str"),
        ("kind", "str"),
        ("note", "str"),
        ("raised_at", "str"),
        ("answer", "str"),
        ("answered_by", "str"),
        ("answered_at", "str"),
        ("shared", "bool"),
    ),
    # Every change of a study setting after the study was made (its settings page or an
    # import's study line): what raters were told, and when it changed.
    "settings_changes": (
        ("field", "str"),
        ("before", "str"),
        ("after", "str"),
        ("changed_by", "str"),
        ("via", "str"),
        ("changed_at", "str"),
    ),
    # Onboarding (docs/recruitment.md): per rater, their consent decisions, the
    # instructions acknowledged and the background questionnaire, by pseudonym only (never
    # a panel's participant, study or session id).
    "onboarding": (
        ("rater", "str"),
        ("panel", "str"),
        ("outcome", "str"),
        ("consent", "json"),
        ("instructions_opened_at", "str"),
        ("instructions_acknowledged_at", "str"),
        ("questionnaire", "json"),
        ("answered_at", "str"),
    ),
}
# Tables a folder exported before they existed lacks: read as empty.
OPTIONAL_TABLES = (
    "comparisons",
    "comparison_answers",
    "qualification_attempts",
    "exclusions",
    "flags",
    "onboarding",
    "settings_changes",
)


def json_columns(name: str) -> tuple[str, ...]:
    """The columns of a table that hold a nested value (kind json)."""
    return tuple(column for column, kind in TABLES[name] if kind == "json")


def canonical_json(value: Any) -> str:
    """Canonical JSON text: sorted keys, no spaces, UTF-8 as is (byte-stable)."""
    return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"), allow_nan=False)


def iso_timestamp(value: datetime | None) -> str | None:
    if value is None:
        return None
    # The same text as strftime("%Y-%m-%dT%H:%M:%S.%fZ"), several times faster.
    return value.astimezone(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


def arrow_pool():
    """The memory pool of the export's Arrow work: jemalloc where the pyarrow wheel has
    it (it hands freed memory back to the system), else the system allocator. pyarrow's
    default, mimalloc, kept more memory at the peak of a large export; the pool is passed
    to each call, not set for the whole process."""
    import pyarrow as pa

    try:
        return pa.jemalloc_memory_pool()
    except NotImplementedError:
        return pa.system_memory_pool()


def arrow_schema(columns):
    import pyarrow as pa

    types = {"str": pa.string(), "json": pa.string(), "int": pa.int64(), "bool": pa.bool_(), "float": pa.float64()}
    return pa.schema([pa.field(name, types[kind]) for name, kind in columns])


def _csv_cells_function(columns) -> Any:
    """row tuple -> the row's CSV cells: booleans as true/false, every text column
    through core.csv_cells' rule (a leading quote before = + - @ tab CR or '),
    inlined; numbers, JSON text and missing values as they are. One generated
    expression per table rather than a loop over the columns: the check then costs
    about 25 ns per text cell (measured: some 15% of what csv.writer takes for a
    ratings row)."""
    cells = []
    for i, (_, kind) in enumerate(columns):
        if kind == "str":
            cells.append(f"(QUOTE + v if (v := row[{i}]) and v[0] in QUOTED_FIRST else v)")
        elif kind == "bool":
            cells.append(f"(None if (b := row[{i}]) is None else ('true' if b else 'false'))")
        else:
            cells.append(f"row[{i}]")
    code = f"lambda row: [{', '.join(cells)}]"
    return eval(code, {"QUOTE": QUOTE, "QUOTED_FIRST": QUOTED_FIRST})  # noqa: S307 (our own constants)


def _dict_function(columns) -> Any:
    """row tuple -> dict in column order, as one generated dict display. A JSON column's
    text (canonical, made by the export) is wrapped in orjson.Fragment, which orjson
    writes as it is: the line holds the JSON value, not a string of it."""
    cells = []
    for i, (name, kind) in enumerate(columns):
        if kind == "json":
            cells.append(f"{name!r}: (None if (v := row[{i}]) is None else Fragment(v))")
        else:
            cells.append(f"{name!r}: row[{i}]")
    return eval(f"lambda row: {{{', '.join(cells)}}}", {"Fragment": orjson.Fragment})  # noqa: S307 (our own constants)


class TableWriter:
    """Writes one table's rows (tuples in column order) to every requested format as
    they arrive, a chunk at a time: JSON Lines through orjson (compact, UTF-8 as is,
    columns in table order, a JSON column's value nested), CSV through core.csv_cells'
    CsvRowWriter (text cells made safe for spreadsheets; a JSON column as its text),
    Parquet one row group at a time (a JSON column as its text).

    Parquet is made from the JSON Lines bytes of each chunk: pyarrow's JSON reader
    parses them against the table's schema (skipping the JSON columns, whose text is
    added from the rows), and that, the encoding, compression and writing all run in
    a helper thread without the interpreter lock, while this thread reads and encodes
    the next chunk. (Converting the Python rows with
    pa.array took the export's own thread about a third of a second per row group;
    parsing the bytes is faster and runs beside it.) JSON keeps every value exactly:
    strings, 64-bit integers and floats round-trip (tested), and a value of the wrong
    type is an error, as pa.array's conversion was."""

    def __init__(self, out_dir: Path, name: str, formats: tuple[str, ...], chunk: int = ITERATOR_CHUNK):
        self.name = name
        self.chunk = chunk
        self.columns = TABLES[name]
        self.names = [c for c, _ in self.columns]
        self.count = 0
        self.paths: list[Path] = []
        self._jsonl = self._csv = self._csv_handle = self._parquet = None
        self._rows: list[tuple] = []  # rows given, not yet written (less than a chunk)
        self._groups: list = []  # Arrow tables parsed but not yet written (helper thread only)
        self._grouped = 0  # their rows
        self._pool: ThreadPoolExecutor | None = None
        self._pending: Future | None = None
        # row tuple -> dict in column order, as one dict display (about twice as fast as
        # dict(zip())); a JSON column's text goes in as the JSON value it is.
        self._as_dict = _dict_function(self.columns)
        self._json_index = [i for i, (_, kind) in enumerate(self.columns) if kind == "json"]
        self._csv_cells = _csv_cells_function(self.columns)
        if "jsonl" in formats:
            path = out_dir / "jsonl" / f"{name}.jsonl"
            self._jsonl = path.open("wb")
            self.paths.append(path)
        if "csv" in formats:
            path = out_dir / "csv" / f"{name}.csv"
            self._csv_handle = path.open("w", encoding="utf-8", newline="")
            self._csv = CsvRowWriter(self._csv_handle)
            self._csv.writerow(self.names)
            self.paths.append(path)
        if "parquet" in formats:
            import pyarrow.parquet as pq

            path = out_dir / "parquet" / f"{name}.parquet"
            self._schema = arrow_schema(self.columns)
            # What the JSON reader parses: every column but the JSON ones (their text is
            # taken from the rows, see _write_chunk).
            self._parse_schema = arrow_schema([c for c in self.columns if c[1] != "json"])
            # Fixed options: the file depends only on the rows and the pyarrow version
            # (which is pinned and named in the file's created_by field).
            self._pool_arrow = arrow_pool()
            self._parquet = pq.ParquetWriter(
                path,
                self._schema,
                compression="zstd",
                compression_level=3,
                version="2.6",
                write_statistics=True,
                memory_pool=self._pool_arrow,
            )
            self.paths.append(path)

    def write(self, row: tuple) -> None:
        self.write_many([row])

    def write_many(self, rows: list[tuple]) -> None:
        """Rows are kept until a chunk's worth (`chunk` rows) has come: each chunk is
        encoded at once and is one job for the Parquet helper thread."""
        self._rows.extend(rows)
        if len(self._rows) >= self.chunk:
            self._flush()

    def _flush(self) -> None:
        rows, self._rows = self._rows, []
        self._write_chunk(rows)

    def _write_chunk(self, rows: list[tuple]) -> None:
        if not rows:
            return
        self.count += len(rows)
        if self._jsonl is not None or self._parquet is not None:
            data = self._encode_jsonl(rows)
            if self._jsonl is not None:
                self._jsonl.write(data)
            if self._parquet is not None:
                # Parquet keeps a JSON column as its text: the reader skips the nested
                # value, and the text comes from the rows, an Arrow array per column made
                # here (a few ms a chunk, where encoding the chunk a second time with
                # the text as strings cost as much as the first encoding). The first
                # pa.array of a process imports pandas (pyarrow checks for its types).
                texts = [self._text_array([row[i] for row in rows], i) for i in self._json_index]
                self._submit(self._parse_and_write, data, len(rows), texts)
        if self._csv is not None:
            self._csv.writerows(rows, self._csv_cells)

    def _encode_jsonl(self, rows: list[tuple]) -> bytes:
        """One JSON object per line, keys in column order. orjson encodes a batch of
        rows as one JSON array (much faster than one call per row), which is split into
        lines between the objects. `},{"` occurs between every two rows, never inside a
        string (where every `"` is escaped), and inside a row only in a nested value (a
        list of objects): the count is checked, and a batch with more is encoded row by
        row."""
        as_dict, dumps = self._as_dict, orjson.dumps
        parts = []
        for start in range(0, len(rows), JSONL_BATCH):
            batch = [as_dict(row) for row in rows[start : start + JSONL_BATCH]]
            data = dumps(batch)
            if data.count(b'},{"') == len(batch) - 1:
                parts.append(data[1:-1].replace(b'},{"', b'}\n{"') + b"\n")
            else:
                parts.append(b"".join([dumps(item) + b"\n" for item in batch]))
        return b"".join(parts)

    def _submit(self, job, *args) -> None:
        """Run `job` in the helper thread after the previous one: one chunk at most is
        in flight, so memory stays bounded."""
        self._wait()
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"parquet-{self.name}")
        self._pending = self._pool.submit(job, *args)

    def _text_array(self, values: list, index: int):
        import pyarrow as pa

        return pa.array(values, type=self._schema.field(index).type, memory_pool=self._pool_arrow)

    def _parse_and_write(self, data: bytes, n_rows: int, texts: list) -> None:
        """(Helper thread.) Parse a chunk's JSON Lines against the schema, put in the
        JSON columns' text; write every full row group of ROW_GROUP rows, keeping the
        rest for the next chunk."""
        import pyarrow as pa
        import pyarrow.json as pj

        table = pj.read_json(
            pa.py_buffer(data),
            read_options=pj.ReadOptions(use_threads=False, block_size=max(len(data), 1 << 20)),
            parse_options=pj.ParseOptions(
                explicit_schema=self._parse_schema,
                unexpected_field_behavior="ignore" if self._json_index else "error",
            ),
            memory_pool=self._pool_arrow,
        )
        for i, values in zip(self._json_index, texts, strict=True):  # in column order
            table = table.add_column(i, self._schema.field(i), values)
        if table.num_rows != n_rows:  # never expected: one line per row
            raise ExportError(f"{self.name}: {table.num_rows} rows parsed for Parquet, {n_rows} written")
        self._groups.append(table)
        self._grouped += n_rows
        if self._grouped >= ROW_GROUP:
            pending = pa.concat_tables(self._groups, memory_pool=self._pool_arrow)
            full = (self._grouped // ROW_GROUP) * ROW_GROUP
            for start in range(0, full, ROW_GROUP):
                self._write_group(pending.slice(start, ROW_GROUP))
            rest = pending.slice(full)
            self._groups, self._grouped = ([rest] if rest.num_rows else []), rest.num_rows

    def _write_group(self, table) -> None:
        # One chunk per column, so the file depends on the rows alone, not on how the
        # chunks that made the group were cut.
        self._parquet.write_table(table.combine_chunks(memory_pool=self._pool_arrow), row_group_size=ROW_GROUP)

    def _write_rest(self) -> None:
        """(Helper thread.) The last, partial row group; an empty table still gets one."""
        import pyarrow as pa

        if self._groups:
            self._write_group(pa.concat_tables(self._groups, memory_pool=self._pool_arrow))
        elif self.count == 0:
            self._write_group(self._schema.empty_table())
        self._groups, self._grouped = [], 0

    def _wait(self) -> None:
        if self._pending is not None:
            pending, self._pending = self._pending, None
            pending.result()  # raises what the job raised

    def close(self) -> None:
        try:
            self._flush()
            if self._parquet is not None:
                self._submit(self._write_rest)
                self._wait()
        finally:
            if self._pool is not None:
                self._pool.shutdown(wait=True)
            if self._parquet is not None:
                self._parquet.close()
            if self._jsonl is not None:
                self._jsonl.close()
            if self._csv_handle is not None:
                self._csv_handle.close()


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
