"""The one place the export uses Django's private SQL compiler API.

`raw_chunks` streams the rows of a `values_list` queryset as the database driver returns
them, skipping Django's per-value conversion (a third of the export's time on a million
answers). Django has no public API for that, so this adapter calls
`query.get_compiler(...).execute_sql(MULTI, chunked_fetch=True, chunk_size=...)` and
reads `query.values_select` / `query.annotation_select` to know the row width.

Checked against Django 5.2 (see CHECKED_DJANGO). tests/datasets/test_raw_rows.py fails
loudly if any of these private names or signatures changes in a Django upgrade; fix
this module (or fall back to `queryset.iterator(chunk_size=...)`) before upgrading.
"""

from __future__ import annotations

from collections.abc import Iterator

from django.db.models.sql.constants import MULTI

CHECKED_DJANGO = (5, 2)


def raw_chunks(queryset, *, chunk_size: int) -> Iterator[list[tuple]]:
    """The rows of a values_list query in chunks of up to `chunk_size`, unconverted,
    streamed: a server-side cursor on PostgreSQL, fetchmany on SQLite. Callers convert
    the few columns that need it (booleans are 0/1 on SQLite, datetimes may be naive
    text, UUIDs are hex text on SQLite).

    (Fetching the next chunk in a helper thread was measured and is slower: building
    the rows needs the interpreter lock, and the two threads mostly wait on each other.)"""
    query = queryset.query
    compiler = query.get_compiler(using=queryset.db)
    # The compiler can append columns it needs for ordering; keep the selected ones.
    width = len(query.values_select) + len(query.annotation_select)
    for chunk in compiler.execute_sql(MULTI, chunked_fetch=True, chunk_size=chunk_size):
        yield [row[:width] for row in chunk] if width < len(chunk[0]) else chunk
