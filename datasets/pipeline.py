"""The import pipeline every importer shares (docs/import-format.md, "How an import is written").

Readers yield records from a file (`json_objects`: one JSON object a line, with its line
number); builders check each record (`Fields` names the line and the field of every
problem) and make unsaved model rows, `Model(...)`; one writer (`RowWriter`) stores the
rows in batches of `settings.IMPORT_BATCH_SIZE` with `bulk_create` and `bulk_update` (on
PostgreSQL, new rows by one COPY), inside the importer's one transaction, and counts what
it created, updated and left unchanged. The JSON Lines, Evidence Inference, Thresh, dataset-folder and question
importers all store their rows through it.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from itertools import islice
from typing import Any

from django.conf import settings
from django.core.exceptions import ObjectDoesNotExist
from django.db import connections, models, router
from django.utils import timezone

from core.exceptions import ApplicationError
from core.text_validation import InvalidTextError, loads

# The order kinds are reported in by ImportResult.summary_line.
KIND_ORDER = ("study", "source", "summary", "claim", "finding", "comparison", "question")


class ImportLineError(ApplicationError):
    """A record that cannot be imported: the line (and the field) it is at."""

    def __init__(self, line: int, field_name: str | None, message: str):
        where = f"line {line}" + (f': field "{field_name}"' if field_name else "")
        super().__init__(f"{where}: {message}", extra={"line": line, "field": field_name})
        self.line = line
        self.field = field_name


@dataclass
class ImportResult:
    """How many records of each kind an import created, updated and left unchanged."""

    created: Counter = field(default_factory=Counter)
    updated: Counter = field(default_factory=Counter)
    unchanged: Counter = field(default_factory=Counter)
    # Every study setting a `study` line changed: (study slug, its SettingChange).
    settings_changes: list = field(default_factory=list)

    def summary_line(self) -> str:
        kinds = {*self.created, *self.updated, *self.unchanged}
        parts = []
        for kind in sorted(kinds, key=lambda k: (KIND_ORDER.index(k) if k in KIND_ORDER else len(KIND_ORDER), k)):
            c, u, n = self.created[kind], self.updated[kind], self.unchanged[kind]
            if c or u or n:
                parts.append(f"{kind}: {c} created, {u} updated, {n} unchanged")
        if self.settings_changes:
            parts.append(
                "study settings changed: " + ", ".join(f"{slug} {change}" for slug, change in self.settings_changes)
            )
        return "; ".join(parts) or "nothing to import"

    def settings_changed(self) -> list[dict[str, str]]:
        """The settings changes as JSON values, for an import run's record and the API."""
        return [
            {"study": slug, "field": c.field, "before": c.before, "after": c.after} for slug, c in self.settings_changes
        ]


# --- readers ---------------------------------------------------------------------------


def json_objects(lines: Iterable[str]) -> Iterator[tuple[int, dict]]:
    """(line number, object) for every non-blank line, or ImportLineError."""
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        try:
            data = loads(raw)
        except json.JSONDecodeError as exc:
            raise ImportLineError(number, None, f"not valid JSON ({exc.msg} at column {exc.colno})") from None
        except InvalidTextError as exc:  # text that cannot be stored, or absurd nesting
            raise ImportLineError(number, exc.field or None, exc.problem) from None
        if not isinstance(data, dict):
            raise ImportLineError(number, None, "each line must be a JSON object")
        yield number, data


def batches(items: Iterable, size: int | None = None) -> Iterator[list]:
    """`items` in lists of `size` (the import batch size by default), read as they come."""
    size = size or batch_size()
    iterator = iter(items)
    while batch := list(islice(iterator, size)):
        yield batch


# --- builders --------------------------------------------------------------------------


class Fields:
    """Typed access to one record's fields, raising errors that name line and field."""

    def __init__(self, line: int, data: dict[str, Any]):
        self.line = line
        self.data = data

    def fail(self, name: str, message: str):
        raise ImportLineError(self.line, name, message)

    def string(self, name: str, *, required: bool = True, max_length: int | None = None, pattern=None) -> str:
        value = self.data.get(name)
        if value is None:
            if required:
                self.fail(name, "is required")
            return ""
        # isspace, not strip(): no copy of a long text to learn that it is not blank
        if not isinstance(value, str) or (required and (not value or value.isspace())):
            self.fail(name, "must be a non-empty string" if required else "must be a string")
        if max_length is not None and len(value) > max_length:
            self.fail(name, f"is longer than {max_length} characters")
        if pattern is not None and not pattern.match(value):
            self.fail(name, "may contain only letters, digits, '-' and '_'")
        return value

    def mapping(self, name: str) -> dict:
        value = self.data.get(name, {})
        if value is None:
            return {}
        if not isinstance(value, dict):
            self.fail(name, "must be an object")
        return value

    def string_list(self, name: str, *, max_items: int | None = None, max_length: int | None = None) -> list[str]:
        value = self.data.get(name, [])
        if value is None:
            return []
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            self.fail(name, "must be a list of non-empty strings")
        if max_items is not None and len(value) > max_items:
            self.fail(name, f"has {len(value)} entries; at most {max_items} are allowed")
        if max_length is not None and any(len(v) > max_length for v in value):
            self.fail(name, f"has an entry longer than {max_length} characters")
        return value

    def integer(self, name: str, *, required: bool = True, minimum: int = 0) -> int | None:
        value = self.data.get(name)
        if value is None:
            if required:
                self.fail(name, "is required")
            return None
        if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
            self.fail(name, f"must be a whole number ≥ {minimum}")
        return value

    def unknown_fields(self, allowed: set[str]) -> None:
        extra = sorted(set(self.data) - allowed - {"type"})
        if extra:
            self.fail(extra[0], "is not a known field for this record type")


def set_changed(obj: models.Model, values: dict) -> bool:
    """Set `values` on `obj` (not saved); whether anything changed."""
    changed = False
    for name, value in values.items():
        if getattr(obj, name) != value:
            setattr(obj, name, value)
            changed = True
    return changed


# --- the writer ------------------------------------------------------------------------


def _copyable(model: type[models.Model], rows: list[models.Model]) -> bool:
    """Whether COPY can store `rows`: new rows of one table whose key is a sequence's, and
    no value left to the database (a `db_default`)."""
    meta = model._meta
    return (
        isinstance(meta.pk, models.AutoField)
        and all(f.db_default is models.NOT_PROVIDED for f in meta.concrete_fields)
        and all(row.pk is None for row in rows)
    )


def _link(row: models.Model, field: models.ForeignKey) -> None:
    """Refer `row` by `field` to the row it was given when made, if that was stored since
    (its key is known only now); as `bulk_create` does, refuse one never stored."""
    try:
        target = getattr(row, field.name)
    except ObjectDoesNotExist:  # given none: the database refuses a required one
        return
    if target is not None:
        if target.pk is None:
            raise ValueError(f"{type(row).__name__}.{field.name} refers to a row that is not stored")
        setattr(row, field.attname, target.pk)


def batch_size() -> int:
    """Rows per INSERT or UPDATE statement, and records per chunk of a streamed file
    (settings.IMPORT_BATCH_SIZE)."""
    return settings.IMPORT_BATCH_SIZE


class RowWriter:
    """Stores the rows builders made, in batches (`bulk_create`, `bulk_update`), and counts
    records per kind. It opens no transaction: every importer calls it inside its own
    `transaction.atomic()`, so a failure anywhere leaves nothing behind."""

    def __init__(self, result: ImportResult | None = None):
        self.result = result if result is not None else ImportResult()

    def count(self, kind: str, *, created: bool, changed: bool = False, n: int = 1) -> None:
        bucket = self.result.created if created else self.result.updated if changed else self.result.unchanged
        bucket[kind] += n

    def create(self, rows: Sequence[models.Model], *, kind: str | None = None) -> list[models.Model]:
        """Insert new rows of one model; their primary keys are set, so rows made next can
        refer to them. On PostgreSQL the rows go in by one COPY (`copy`), elsewhere by
        `bulk_create` in batches."""
        rows = list(rows)
        if not rows:
            return rows
        model = type(rows[0])
        connection = connections[router.db_for_write(model)]
        if connection.vendor == "postgresql" and _copyable(model, rows):
            self.copy(connection, model, rows)
            created = rows
        else:
            created = model.objects.bulk_create(rows, batch_size=batch_size())
        if kind is not None:
            self.count(kind, created=True, n=len(rows))
        return created

    @staticmethod
    def copy(connection, model: type[models.Model], rows: list[models.Model]) -> None:
        """Store new rows with PostgreSQL's COPY, ended before this returns. COPY returns no
        keys, so they are taken from the table's sequence first (as an INSERT would take
        them); each value is prepared by its field, as `bulk_create` prepares it."""
        meta = model._meta
        fields = [f for f in meta.concrete_fields if not f.generated]
        quote = connection.ops.quote_name
        columns = ", ".join(quote(f.column) for f in fields)
        related = [f for f in fields if f.is_relation]
        with connection.cursor() as cursor, connection.wrap_database_errors:
            cursor.execute(
                "SELECT nextval(seq::regclass) FROM pg_get_serial_sequence(%s, %s) seq, generate_series(1, %s)",
                [quote(meta.db_table), meta.pk.column, len(rows)],
            )
            for row, (key,) in zip(rows, cursor.fetchall(), strict=True):
                row.pk = key
                for field in related:
                    if getattr(row, field.attname) is None:
                        _link(row, field)
            with cursor.copy(f"COPY {quote(meta.db_table)} ({columns}) FROM STDIN") as copy:
                for row in rows:
                    copy.write_row([f.get_db_prep_save(f.pre_save(row, True), connection) for f in fields])

    def update(self, rows: Sequence[models.Model], fields: Sequence[str]) -> None:
        """Store changed `fields` of existing rows of one model, stamping `updated_at`
        where the model has it (bulk_update skips auto_now)."""
        rows = list(rows)
        if not rows:
            return
        fields = list(fields)
        if hasattr(rows[0], "updated_at"):
            now = timezone.now()
            for row in rows:
                row.updated_at = now
            fields.append("updated_at")
        type(rows[0]).objects.bulk_update(rows, fields, batch_size=batch_size())
