"""Bulk inserts without the ORM's per-object work (issue 30).

`bulk_create` spends most of an import's database time in Python: per object and field it
resolves expressions and prepares values, then it compiles one long multi-row INSERT and,
with DEBUG on, quotes every parameter into the query log. For new rows that the importer
has already checked, `insert_new` sends the same values in one `executemany` of a one-row
INSERT (SQLite and PostgreSQL alike), preparing only the fields whose Python value is not
what the database driver takes (JSON, UUIDs, dates). The new rows' primary keys cost one
more query: on PostgreSQL they are taken from the table's sequence before the rows are
sent; on SQLite they follow from the last rowid, checked at both ends (`_keys_from_rowids`),
or are read back by each row's natural key where that check fails. The database's
constraints still hold; no signals are sent (as with `bulk_create`).

With DEBUG on, Django's debug cursor renders each executed statement with its parameters
quoted into the query log: for `bulk_create`'s multi-row INSERTs that was every value of
every row (a fifth of the import's time under `make run`). An `executemany` is logged as
"N times: <the one-row statement>", without its parameters, so the import path no longer
renders its rows into the log; it still counts as one statement (the query-count tests
see it).

On PostgreSQL the rows go in by `COPY ... FROM STDIN` instead (`insert_rows`): psycopg's
`executemany` quotes every parameter in Python and the server parses and plans one INSERT
a row (the harness's 500-task import has 12,000 sentence rows), where COPY streams the
rows in the server's own text format. It is logged like an executemany, as one statement
("N rows: COPY ..."), so the query counts and the DEBUG log stay what they were.

`unsaved` builds the instances themselves without Model.__init__, whose keyword path
costs about 11 µs for a Source (a thousand of them were a tenth of an import): the values
go straight into the instance's dict, as Model.__init__ would put them, and the fields not
given take their defaults.
"""

from __future__ import annotations

import json
import json.encoder
import time
import uuid
from collections.abc import Callable, Sequence
from operator import attrgetter
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connections, models
from django.db.models.base import ModelState
from django.db.models.fields import AutoFieldMixin
from django.utils import timezone

# json.dumps(value) with its defaults, without making a new encoder on every call (as
# json.dumps does); the circular-reference check is left out: these values were decoded
# from JSON or built from such values, and cannot refer to themselves.
_encode_json = (
    json.encoder.c_make_encoder(
        None, json.JSONEncoder().default, json.encoder.encode_basestring_ascii, None, ": ", ", ", False, False, True
    )
    if json.encoder.c_make_encoder is not None
    else None
)


def _json_text(value: Any, encoder: Any = None) -> str:
    """json.dumps(value), through the encoder above (adapt_json_value's signature)."""
    return "".join(_encode_json(value, 0))


# Fields whose Python value the drivers take as it is (after pre_save): no per-value call.
_AS_IS = (models.CharField, models.TextField, models.IntegerField, models.BooleanField, models.FloatField)


def _converter(field: models.Field, wrapper) -> Callable[[Any], Any] | None:
    if field.is_relation or (isinstance(field, _AS_IS) and not isinstance(field, models.JSONField)):
        return None

    # `wrapper` is this thread's connection itself: `django.db.connection` is a proxy that
    # looks it up again on every attribute (a tenth of these calls' time).
    def generic(value):
        return field.get_db_prep_save(value, connection=wrapper)

    if isinstance(field, models.JSONField) and type(field).get_prep_value is models.JSONField.get_prep_value:
        # What get_db_prep_save ends in for a plain decoded value, without its checks for
        # expressions on every row; the empty object of most rows' metadata converted once.
        # Without an encoder of the field's own, the text json.dumps makes, from the same C
        # encoder made once: the database parses it (SQLite stores it as it is; PostgreSQL's
        # COPY reads jsonb from text).
        if field.encoder is None and _encode_json is not None:
            adapt, encoder = _json_text, None
        else:
            adapt, encoder = wrapper.ops.adapt_json_value, field.encoder
        empty = adapt({}, encoder)

        def json_value(value):
            if type(value) is dict or type(value) is list:
                return adapt(value, encoder) if value or type(value) is list else empty
            return generic(value)

        return json_value
    if isinstance(field, models.UUIDField) and not wrapper.features.has_native_uuid_field:
        return lambda value: value.hex if type(value) is uuid.UUID else generic(value)
    return generic


_UNSAVED_PLAN: dict[type[models.Model], tuple[list[tuple[str, Callable[[], Any]]], frozenset[str]]] = {}


def unsaved(model: type[models.Model], values: dict[str, Any], **related: models.Model) -> models.Model:
    """An unsaved `model` instance, as `model(**related, **values)` makes it: `values` by
    attname (plain values, not expressions), `related` saved objects by their foreign key's
    name (cached on the instance, as assigning them would), every other concrete field its
    default. A name that is not a field raises TypeError."""
    plan = _UNSAVED_PLAN.get(model)
    if plan is None:
        # each field's default as the callable Field.get_default calls (its cached
        # _get_default: uuid4, dict, list, or one that returns the constant default), or the
        # field's own get_default where its class has one (foreign keys, binary fields)
        fields = [
            (f.attname, f._get_default if type(f).get_default is models.Field.get_default else f.get_default)
            for f in model._meta.concrete_fields
        ]
        plan = _UNSAVED_PLAN[model] = (fields, frozenset(name for name, _ in fields))
    fields, names = plan
    obj = model.__new__(model)
    state = obj._state = ModelState()
    data = obj.__dict__
    for name, target in related.items():
        field = model._meta.get_field(name)
        if not field.many_to_one or target.pk is None:
            raise TypeError(f"{model.__name__}: {name!r} is not a foreign key to a saved object")
        data[field.attname] = target.pk
        state.fields_cache[name] = target
        state.db = target._state.db
    if not values.keys() <= names:
        raise TypeError(f"{model.__name__}: no field {sorted(values.keys() - names)[0]!r}")
    for name, default in fields:
        if name not in data:
            data[name] = values[name] if name in values else default()
    return obj


def insert_new(
    objs: Sequence[models.Model],
    *,
    natural_key: tuple[str, str],
    pending: list[PendingCopy] | None = None,
    key_pool: KeyPool | None = None,
) -> None:
    """INSERT unsaved instances of one model, then set their primary keys.

    `natural_key` names two unique-together fields (attnames, e.g. ("study_id", "key"))
    by which the new rows are found again. Every instance must be new (no pk).

    With `pending` (a list the caller finishes with `finish_copies`), on PostgreSQL the
    rows' COPY is sent but not ended (`PendingCopy`): the server stores them while the
    caller goes on, and rows of the same table and columns inserted next are added to it.
    Elsewhere the rows are inserted before this returns, as without it. With `key_pool`, on
    PostgreSQL the new keys come from that pool (a query only when it has too few)."""
    if not objs:
        return
    model = type(objs[0])
    meta = model._meta
    fields = [f for f in meta.concrete_fields if not (f.primary_key and isinstance(f, AutoFieldMixin))]
    wrapper = connections[DEFAULT_DB_ALIAS]
    # auto_now(_add) fields: one instant for the whole batch (pre_save would read the clock
    # and convert the value again for every row), set on the instances as pre_save would.
    now = timezone.now()
    stamp_fields = [f for f in fields if isinstance(f, models.DateField) and (f.auto_now or f.auto_now_add)]
    stamps = [f.get_db_prep_save(now, connection=wrapper) for f in stamp_fields]
    # Most fields' pre_save is Field's own (the instance's value): those are read all at
    # once (attrgetter, in C) and only the values that need it converted. A field with a
    # pre_save of its own is asked per row.
    rest = [f for f in fields if f not in stamp_fields]
    plain = [f for f in rest if type(f).pre_save is models.Field.pre_save]
    own = [f for f in rest if f not in plain]
    read = attrgetter(*[f.attname for f in plain]) if plain else (lambda obj: ())
    single = len(plain) == 1  # attrgetter of one name gives the value, not a tuple
    convert = [(i, c) for i, c in enumerate(_converter(f, wrapper) for f in [*plain, *own]) if c is not None]
    # PostgreSQL: the keys are taken from the table's sequence first and sent with the rows
    # (COPY returns nothing to read them from).
    sequence = wrapper.vendor == "postgresql" and isinstance(meta.pk, AutoFieldMixin)
    keys = None
    if sequence:
        n = len(objs)
        keys = iter(key_pool.take(wrapper, meta, n) if key_pool is not None else _next_keys(wrapper, meta, n))
    rows = []
    for obj in objs:
        row = [read(obj)] if single else [*read(obj)]
        row.extend(f.pre_save(obj, True) for f in own)
        for i, c in convert:
            value = row[i]
            if value is not None:
                row[i] = c(value)
        for f in stamp_fields:  # as pre_save would set them
            setattr(obj, f.attname, now)
        row.extend(stamps)
        if keys is not None:
            row.append(next(keys))
        rows.append(row)
    columns = [f.column for f in [*plain, *own, *stamp_fields]]
    if keys is not None:
        columns.append(meta.pk.column)
    insert_rows(meta.db_table, columns, rows, pending=pending)
    first, second = natural_key
    alias = wrapper.alias
    if keys is not None:
        for obj, row in zip(objs, rows, strict=True):
            _stored(obj, row[-1], alias)
        return
    if wrapper.vendor == "sqlite" and _keys_from_rowids(wrapper, meta, objs, natural_key):
        return
    wanted = {(getattr(obj, first), getattr(obj, second)): obj for obj in objs}
    found = model._base_manager.filter(
        **{f"{first}__in": {a for a, _ in wanted}, f"{second}__in": {b for _, b in wanted}}
    ).values_list(first, second, "pk")
    for a, b, pk in found:
        obj = wanted.get((a, b))
        if obj is not None:
            _stored(obj, pk, alias)
    missing = [key for key, obj in wanted.items() if obj.pk is None]
    if missing:  # cannot happen with a unique natural key; never leave an instance without its row
        raise RuntimeError(f"{meta.label}: {len(missing)} inserted rows not found again by {natural_key}")


def _stored(obj: models.Model, pk: int, alias: str) -> None:
    """Mark `obj` as the row just inserted with key `pk`, as save() would."""
    obj.pk = pk
    obj._state.adding = False
    obj._state.db = alias


def _next_keys(wrapper, meta, count: int) -> list[int]:
    """PostgreSQL: `count` new values of the table's primary key sequence (an identity
    column, "generated by default", takes keys given to it). nextval hands each value out
    once, whatever other sessions do, and is not rolled back: a failed insert leaves a gap,
    as a failed INSERT would."""
    # The sequence is looked up once (a materialized CTE): as nextval's argument in the
    # select list, pg_get_serial_sequence ran for every row (500 keys: 1.6 ms, 0.7 without).
    with wrapper.cursor() as cursor:
        cursor.execute(
            "WITH s AS MATERIALIZED (SELECT pg_get_serial_sequence(%s, %s)::regclass AS seq) "
            "SELECT nextval(s.seq) FROM s, generate_series(1, %s)",
            [wrapper.ops.quote_name(meta.db_table), meta.pk.column, count],
        )
        return [row[0] for row in cursor.fetchall()]


class KeyPool:
    """New primary keys taken from tables' sequences ahead of need (PostgreSQL), so that rows
    sent in several batches into one open COPY need no query between the batches: any
    statement would end the COPY (PendingCopy). Keys taken and not used are a gap in the
    sequence, as a failed insert's are; nextval never hands them out again."""

    def __init__(self):
        self._keys: dict[str, list[int]] = {}

    def available(self, meta) -> int:
        return len(self._keys.get(meta.db_table, ()))

    def reserve(self, wrapper, meta, count: int) -> None:
        """Take `count` more keys of `meta`'s table now (one query)."""
        if count > 0:
            self._keys.setdefault(meta.db_table, []).extend(_next_keys(wrapper, meta, count))

    def take(self, wrapper, meta, count: int) -> list[int]:
        """`count` keys, in increasing order: from the pool, topped up by a query if short."""
        pool = self._keys.setdefault(meta.db_table, [])
        if len(pool) < count:
            self.reserve(wrapper, meta, count - len(pool))
        taken, pool[:count] = pool[:count], []
        return taken


def _keys_from_rowids(wrapper, meta, objs: Sequence[models.Model], natural_key: tuple[str, str]) -> bool:
    """SQLite: set the new rows' primary keys from their rowids, without reading the rows
    back by their natural key; False (nothing set) when that cannot be shown to be right.

    The rows were inserted one after another, in `objs`' order, by one executemany inside a
    transaction that holds the database's write lock, so no other connection inserted
    between them. An INTEGER PRIMARY KEY AUTOINCREMENT (Django's auto fields on SQLite)
    gives each new row a rowid larger than any the table ever had, normally the largest
    plus one. The last row's rowid is last_insert_rowid(); if the rows at that rowid and at
    n - 1 below it are the last and the first of `objs` (by natural key), n increasing
    rowids fill those n places exactly, so the k-th row has the first one plus k. Anything
    else (a trigger that inserts into the same table, say) fails the check, and the caller
    reads the keys back by natural key."""
    pk = meta.pk
    if not isinstance(pk, AutoFieldMixin):
        return False
    first, second = (meta.get_field(name).column for name in natural_key)
    quote = wrapper.ops.quote_name
    with wrapper.cursor() as cursor:
        cursor.execute(
            f"SELECT last_insert_rowid(), {quote(pk.column)}, {quote(first)}, {quote(second)} "
            f"FROM {quote(meta.db_table)} WHERE {quote(pk.column)} IN (last_insert_rowid(), last_insert_rowid() - %s)",
            [len(objs) - 1],
        )
        rows = cursor.fetchall()
    if not rows:
        return False
    last = rows[0][0]
    ends = {row[1]: row[2:] for row in rows}
    start = last - len(objs) + 1
    key_of = attrgetter(*natural_key)
    if ends.get(start) != key_of(objs[0]) or ends.get(last) != key_of(objs[-1]):
        return False
    for pk_value, obj in enumerate(objs, start=start):
        _stored(obj, pk_value, wrapper.alias)
    return True


def insert_rows(
    table: str, columns: Sequence[str], rows: Sequence[Sequence[Any]], *, pending: list[PendingCopy] | None = None
) -> None:
    """INSERT `rows` (values in `columns`' order, as the driver takes them) into `table`:
    one `COPY ... FROM STDIN` on PostgreSQL, one `executemany` of a one-row INSERT elsewhere.
    Runs in the caller's transaction; a constraint the rows break fails the whole call (with
    `pending`, on PostgreSQL: when the COPY is finished, by the next statement or the caller).
    With `pending` whose last COPY is still open into the same table and columns, the rows
    are added to that COPY.
    """
    if not rows:
        return
    wrapper = connections[DEFAULT_DB_ALIAS]
    quote = wrapper.ops.quote_name
    names = ", ".join(quote(column) for column in columns)
    sql = f"COPY {quote(table)} ({names}) FROM STDIN"
    if pending and pending[-1].is_open_for(wrapper, sql):
        pending[-1].add(rows)
        return
    PendingCopy.finish_all_of(wrapper)  # one COPY at a time on a connection
    if wrapper.vendor != "postgresql":
        placeholders = ", ".join(["%s"] * len(columns))
        with wrapper.cursor() as cursor:
            cursor.executemany(f"INSERT INTO {quote(table)} ({names}) VALUES ({placeholders})", rows)
        return
    wrapper.ensure_connection()
    copy = PendingCopy(wrapper, sql, rows)
    if pending is None:
        copy.finish()  # ended at once: the rows are in when this returns
    else:
        pending.append(copy)


class PendingCopy:
    """A PostgreSQL COPY whose rows are all sent but which is not yet ended: the server
    parses, compresses, indexes and stores them while this process goes on with work that
    needs no database (the importer builds the summaries while the sources go in; issue
    30, eighth round). Ending it (`finish`) sends the last buffered rows and the end of the
    data, and waits for the server's answer: by then it has stored most of them.
    `insert_rows` ends each one at once unless its caller asks for it to be left open.

    No thread: psycopg's COPY context (`cursor.copy()`) is entered here and left by
    `finish`, and the connection stays in the COPY until then. So every statement this
    connection executes through Django first finishes it (an execute wrapper), as does the
    next COPY, and the caller must `finish` it before it commits or rolls back
    (`finish_copies` in a finally block): those are not statements the wrapper sees. The
    connection's lock, which psycopg holds for a whole COPY, is let go meanwhile: a
    statement sent past the wrapper fails with the driver's "another command is already in
    progress" instead of waiting for itself forever. A constraint the rows break is raised
    by `finish`, as Django's own error (IntegrityError and the rest), as a COPY ended at
    once would have raised it."""

    def __init__(self, wrapper, sql: str, rows: Sequence[Sequence[Any]]):
        self._wrapper = wrapper
        self._sql, self._count = sql, 0
        self._started = time.monotonic()
        raw = wrapper.connection
        self._cursor, self._lock, self._unlocked = raw.cursor(), raw.lock, False
        with wrapper.wrap_database_errors:
            self._copy = self._cursor.copy(sql)
            self._rows = self._copy.__enter__()  # takes the connection's lock until its __exit__
            self._write(rows)
        self._lock.release()
        self._unlocked = True
        wrapper.execute_wrappers.append(self._finish_first)

    def _write(self, rows: Sequence[Sequence[Any]]) -> None:
        try:
            write = self._rows.write_row
            for row in rows:
                write(row)
        except BaseException as exc:
            self._end(exc)
            raise
        self._count += len(rows)

    def is_open_for(self, wrapper, sql: str) -> bool:
        """Still open, on `wrapper`'s connection, for the statement `sql`."""
        return self._copy is not None and self._wrapper is wrapper and self._sql == sql

    def add(self, rows: Sequence[Sequence[Any]]) -> None:
        """Send more rows into this open COPY (insert_rows: the next batch of the same table's
        rows, with no statement between)."""
        self._lock.acquire()
        self._unlocked = False
        try:
            with self._wrapper.wrap_database_errors:
                self._write(rows)
        except BaseException:
            # _write ended the COPY (and its context let go of the lock): nothing to finish
            if self._finish_first in self._wrapper.execute_wrappers:
                self._wrapper.execute_wrappers.remove(self._finish_first)
            raise
        self._lock.release()
        self._unlocked = True

    @classmethod
    def finish_all_of(cls, wrapper) -> None:
        """Finish the COPYs still open on `wrapper`'s connection (there is at most one)."""
        for hook in list(wrapper.execute_wrappers):
            owner = getattr(hook, "__self__", None)
            if isinstance(owner, cls):
                owner.finish()

    def _finish_first(self, execute, sql, params, many, context):
        self.finish()
        return execute(sql, params, many, context)

    def _end(self, exc: BaseException | None) -> None:
        copy, self._copy = self._copy, None
        if self._unlocked:  # the COPY's __exit__ lets go of the lock it took
            self._lock.acquire()
            self._unlocked = False
        try:
            if exc is None:
                copy.__exit__(None, None, None)
            else:  # psycopg ends the COPY with an error message, and raises nothing of its own
                copy.__exit__(type(exc), exc, exc.__traceback__)
        finally:
            self._cursor.close()

    def finish(self) -> None:
        """End the COPY and wait for the server's answer; raise its error, if it had one.
        Once: later calls do nothing."""
        if self._copy is None:
            return
        self._wrapper.execute_wrappers.remove(self._finish_first)
        with self._wrapper.wrap_database_errors:
            self._end(None)
        if self._wrapper.queries_logged:  # as Django's debug cursor logs an executemany: one entry
            self._wrapper.queries_log.append(
                {"sql": f"{self._count} rows: {self._sql}", "time": f"{time.monotonic() - self._started:.3f}"}
            )


def finish_copies(pending: list[PendingCopy], *, quiet: bool = False) -> None:
    """Finish every COPY in `pending` (and empty it). The first error is raised once all are
    finished, so that the connection is free for the rollback; with `quiet` (the caller is
    raising an error of its own already) none is."""
    error = None
    while pending:
        try:
            pending.pop(0).finish()
        except BaseException as exc:
            error = error or exc
    if error is not None and not quiet:
        raise error
