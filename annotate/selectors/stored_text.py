"""Stored text that breaks whatever reads it: a lone surrogate, a NUL, bytes that are
not UTF-8, in any text or JSON column of any installed model.

Every entry point refuses such text now (core/text_validation.py); this finds what
came in before. SQLite keeps what it is given: a lone surrogate inside a JSON column
(as a ``\\ud83d`` escape, which is how a rater's answer broke a study), a NUL in a text
column, raw bytes written by another tool. Its text and JSON columns are read as bytes,
so that even a row Python cannot decode is reported instead of crashing the scan.
PostgreSQL refuses all three, so there the scan finds nothing; it runs the same way.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from django.apps import apps
from django.db import connection
from django.db.models import BinaryField, CharField, JSONField, Model, TextField, UUIDField
from django.db.models.functions import Cast

from core.text_validation import find_problem

CHUNK = 2000


@dataclass(frozen=True)
class BadText:
    table: str
    pk: Any  # None when the primary key is itself text (a session key, an API token)
    uuid: str | None
    field: str
    problem: str

    def describe(self) -> str:
        row = "a row (its key is not shown)" if self.pk is None else f"row {self.pk}"
        if self.uuid:
            row += f" (uuid {self.uuid})"
        return f"{self.table} {row}: {self.field} {self.problem}"


def _text_fields(model: type[Model]) -> list:
    return [f for f in model._meta.concrete_fields if isinstance(f, CharField | TextField | JSONField)]


def _problem(field, value: Any, as_bytes: bool) -> str | None:
    if value is None:
        return None
    if as_bytes:
        try:
            value = bytes(value).decode("utf-8")
        except UnicodeDecodeError as exc:
            return f"is not UTF-8 text (byte {exc.start} cannot be decoded)"
        if isinstance(field, JSONField):
            try:
                value = json.loads(value)
            except (ValueError, RecursionError):
                return "is not JSON that can be read back"
    found = find_problem(value)
    if found is None:
        return None
    where, problem = found
    return f"{problem}" if not where else f"at {where} {problem}"


def _scan_model(model: type[Model], fields: list) -> Iterator[BadText]:
    as_bytes = connection.vendor == "sqlite"
    meta = model._meta
    has_uuid = any(f.name == "uuid" and isinstance(f, UUIDField) for f in meta.concrete_fields)
    # Secrets are keys in some tables (sessions, API tokens): text keys are never printed.
    show_pk = not isinstance(meta.pk, CharField | TextField)
    ids = ["pk", *(["uuid"] if has_uuid else [])]
    queryset = model._base_manager.order_by("pk")
    if as_bytes:
        columns = {f"scan_{i}": Cast(f.name, output_field=BinaryField()) for i, f in enumerate(fields)}
        queryset = queryset.annotate(**columns)
        names = list(columns)
    else:
        names = [f.attname for f in fields]
    for row in queryset.values_list(*ids, *names).iterator(chunk_size=CHUNK):
        for field, value in zip(fields, row[len(ids) :], strict=True):
            problem = _problem(field, value, as_bytes)
            if problem:
                yield BadText(
                    table=meta.db_table,
                    pk=row[0] if show_pk else None,
                    uuid=str(row[1]) if has_uuid else None,
                    field=field.name,
                    problem=problem,
                )


def bad_stored_text(models: Iterable[type[Model]] | None = None) -> Iterator[BadText]:
    """Every stored text or JSON value (of `models`, default every installed model) that
    holds text which cannot be stored, table by table, in primary key order."""
    for model in models if models is not None else apps.get_models():
        if model._meta.proxy or not model._meta.managed:
            continue
        fields = _text_fields(model)
        if fields:
            yield from _scan_model(model, fields)
