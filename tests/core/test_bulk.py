"""core.bulk's inserts (issue 30): on PostgreSQL the rows go in by COPY, whose text format
has its own escapes (tab, newline, backslash, \\N for NULL); on SQLite by executemany.
Every value must come back exactly as it was given, and a row the database refuses must
leave nothing behind. On PostgreSQL a COPY may be left open while the caller goes on
(`pending`): the next statement ends it, and its errors come out when it ends. CI runs this
file on both databases."""

from __future__ import annotations

import json
import uuid

import pytest
from django.db import IntegrityError, connection, transaction
from django.test.utils import CaptureQueriesContext

from annotate.models import Source, Summary
from core.bulk import KeyPool, finish_copies, insert_new, unsaved
from tests.factories import StudyFactory

pytestmark = pytest.mark.django_db


# What COPY's text format would misread if a value went in unescaped.
HOSTILE = [
    "a\ttab",
    "a\nnew line and a\r\ncarriage return",
    "a back\\slash and \\N and \\. and \\t",
    "\\N",
    "\\.",
    "quotes ' \" and a comma, semicolon;",
    "unicode: é, 漢字, emoji 🧪, RTL \u202e",
    "<script>alert(1)</script>",
    " leading and trailing spaces ",
]


def test_new_sources_with_hostile_text_and_json_come_back_unchanged_with_their_keys():
    study = StudyFactory()
    metadata = {"text": HOSTILE, "nested": {"a\tb": [1, 2.5, None, True], "\\N": "\\N"}, "empty": {}}
    objs = [
        Source(
            study=study,
            key=f"k{i}",
            title=text[:100],
            text=text,
            metadata=metadata,
            external_ids={"pmid": str(i)},
            # the sentences' refs are JSON strings inside the row: COPY must not misread them either
            sentence_spans=[[0, 1, ref], [1, 2, ""]],
        )
        for i, (text, ref) in enumerate(zip(HOSTILE, reversed(HOSTILE), strict=True))
    ]
    objs.append(Source(study=study, key="plain", text="plain"))  # the JSON defaults ({})
    insert_new(objs, natural_key=("study_id", "key"))
    assert all(obj.pk for obj in objs)
    for obj in objs:
        stored = Source.objects.get(pk=obj.pk)
        assert (stored.key, stored.text, stored.title) == (obj.key, obj.text, obj.title)
        assert stored.metadata == obj.metadata and stored.external_ids == obj.external_ids
        assert stored.sentence_spans == obj.sentence_spans
        assert isinstance(stored.uuid, uuid.UUID) and stored.uuid == obj.uuid
        assert stored.created_at is not None and stored.created_at == obj.created_at


def test_a_row_the_database_refuses_leaves_none_of_the_call_behind():
    study = StudyFactory()
    objs = [Source(study=study, key=key, text=key) for key in ("first", "second", "first")]
    with pytest.raises(IntegrityError), transaction.atomic():
        insert_new(objs, natural_key=("study_id", "key"))  # the third row repeats (study, key)
    assert not Source.objects.filter(study=study).exists()


def test_the_insert_is_one_logged_statement_without_its_rows(settings):
    study = StudyFactory()
    marker = "Okapi-marker"
    objs = [
        Source(study=study, key=f"k{i}", text=f"{marker} {i}", sentence_spans=[[0, 5, marker]]) for i in range(3000)
    ]
    with CaptureQueriesContext(connection) as captured:
        insert_new(objs, natural_key=("study_id", "key"))
    statements = [q["sql"] for q in captured.captured_queries]
    # PostgreSQL: the new keys from the sequence, then the rows; SQLite: the rows, then the
    # two ends of their rowids checked
    assert len(statements) == 2, statements
    if connection.vendor == "postgresql":
        assert "nextval" in statements[0] and statements[1].startswith("3000 rows: COPY"), statements
    else:
        assert statements[0].startswith("3000 times: INSERT INTO") and "last_insert_rowid()" in statements[1]
    assert not any(marker in statement for statement in statements)
    assert Source.objects.filter(study=study).count() == 3000
    assert {obj.key: obj.pk for obj in objs} == dict(Source.objects.filter(study=study).values_list("key", "pk"))


@pytest.mark.skipif(connection.vendor != "sqlite", reason="SQLite's rowid check; PostgreSQL uses its sequence")
def test_rowids_that_are_not_consecutive_send_the_keys_to_be_read_back():
    """A trigger that inserts a row of its own after each of ours leaves our rows' rowids
    two apart: the check of the ends fails and the keys are read back by natural key."""
    study = StudyFactory()
    columns = [f.column for f in Source._meta.concrete_fields if f.column != "id"]
    values = ", ".join("'x-' || NEW.key" if c == "key" else f"NEW.{c}" for c in columns)
    uuid_hex = "lower(hex(randomblob(16)))"
    values = values.replace("NEW.uuid", uuid_hex)
    with connection.cursor() as cursor:
        cursor.execute(
            "CREATE TEMP TRIGGER shadow_source AFTER INSERT ON annotate_source WHEN NEW.key NOT LIKE 'x-%' "
            f"BEGIN INSERT INTO annotate_source ({', '.join(columns)}) VALUES ({values}); END"
        )
    try:
        objs = [Source(study=study, key=f"k{i}", text=f"text {i}") for i in range(5)]
        with CaptureQueriesContext(connection) as captured:
            insert_new(objs, natural_key=("study_id", "key"))
    finally:
        with connection.cursor() as cursor:
            cursor.execute("DROP TRIGGER shadow_source")
    statements = [q["sql"] for q in captured.captured_queries]
    assert len(statements) == 3 and "last_insert_rowid()" in statements[1], statements
    stored = dict(Source.objects.filter(study=study).values_list("key", "pk"))
    assert len(stored) == 10  # ours and the trigger's
    assert {obj.key: obj.pk for obj in objs} == {f"k{i}": stored[f"k{i}"] for i in range(5)}


def _fields(obj) -> dict:
    return {f.attname: getattr(obj, f.attname) for f in type(obj)._meta.concrete_fields if f.attname != "uuid"}


def test_unsaved_builds_the_instance_the_model_would_build():
    study = StudyFactory()
    values = {"key": "PMC1", "text": "One. Two.", "sentence_spans": [[0, 4, ""], [5, 9, ""]], "licence": "CC BY"}
    fast, slow = unsaved(Source, dict(values), study=study), Source(study=study, **values)
    assert _fields(fast) == _fields(slow)  # the defaults too: "" titles, {} metadata, no id, no stamps
    assert isinstance(fast.uuid, uuid.UUID) and fast.uuid != slow.uuid  # each its own default
    assert fast._state.adding and fast._state.db == slow._state.db
    with CaptureQueriesContext(connection) as queries:
        assert fast.study is study  # cached, as assigning it caches it
    assert len(queries) == 0
    fast.full_clean(exclude=["uuid"])
    fast.save()
    assert _fields(Source.objects.get(pk=fast.pk)) == {
        **_fields(slow),
        "id": fast.pk,
        **{k: getattr(fast, k) for k in ("created_at", "updated_at")},
    }


def test_unsaved_instances_go_in_through_insert_new():
    study = StudyFactory()
    sources = [unsaved(Source, {"key": f"k{i}", "text": "A."}, study=study) for i in range(3)]
    insert_new(sources, natural_key=("study_id", "key"))
    summaries = [
        unsaved(Summary, {"key": f"s{i}", "source_id": source.pk, "text": "A [k].", "generator": "g"}, study=study)
        for i, source in enumerate(sources)
    ]
    insert_new(summaries, natural_key=("study_id", "key"))
    stored = Summary.objects.filter(study=study).order_by("key")
    assert [(s.key, s.source.key, s.metadata, s.flags, s.parent_id) for s in stored] == [
        (f"s{i}", f"k{i}", {}, [], None) for i in range(3)
    ]


def test_unsaved_refuses_what_the_model_would_refuse():
    study = StudyFactory()
    with pytest.raises(TypeError):
        unsaved(Source, {"nonsense": 1}, study=study)
    with pytest.raises(TypeError):
        unsaved(Source, {"key": "k"}, title=study)  # not a foreign key
    with pytest.raises(TypeError):
        unsaved(Source, {"key": "k"}, study=StudyFactory.build())  # not saved


def test_json_goes_in_as_json_dumps_writes_it():
    """The JSON text is json.dumps's own (SQLite keeps it as sent, and JSON lookups compare
    that text), so the ORM's lookups find inserted rows as they find saved ones."""
    study = StudyFactory()
    metadata = {"é": ["漢字", 1.5, None, True, {"nested": "\\N\t"}], "n": 10**30}
    spans = [[0, 2, "PMC1"], [3, 5, "ü"]]
    insert_new(
        [unsaved(Source, {"key": "k", "text": "A. B.", "metadata": metadata, "sentence_spans": spans}, study=study)],
        natural_key=("study_id", "key"),
    )
    assert Source.objects.filter(study=study, metadata=metadata, sentence_spans=spans).count() == 1
    if connection.vendor == "sqlite":
        with connection.cursor() as cursor:
            cursor.execute("SELECT metadata, sentence_spans FROM annotate_source WHERE key = 'k'")
            assert cursor.fetchone() == (json.dumps(metadata), json.dumps(spans))


postgres_only = pytest.mark.skipif(
    connection.vendor != "postgresql", reason="a COPY left open is PostgreSQL's; SQLite inserts at once"
)


@postgres_only
def test_a_pending_copy_is_ended_by_the_next_query_which_sees_its_rows():
    study = StudyFactory()
    pending = []
    with transaction.atomic():
        objs = [Source(study=study, key=f"k{i}", text=f"text {i}") for i in range(3)]
        insert_new(objs, natural_key=("study_id", "key"), pending=pending)
        assert all(obj.pk for obj in objs) and len(pending) == 1
        # The connection is the COPY's until it ends: a query through Django ends it first.
        assert sorted(Source.objects.filter(study=study).values_list("pk", flat=True)) == sorted(o.pk for o in objs)
        assert connection.execute_wrappers == []
        finish_copies(pending)  # ended already: nothing to do
    assert pending == []
    assert Source.objects.filter(study=study).count() == 3


@postgres_only
def test_a_row_refused_in_a_pending_copy_is_raised_when_it_ends_and_nothing_of_it_stays():
    study = StudyFactory()
    Source.objects.create(study=study, key="taken", text="t")
    pending = []
    with pytest.raises(IntegrityError), transaction.atomic():
        objs = [Source(study=study, key="new", text="t"), Source(study=study, key="taken", text="t")]
        insert_new(objs, natural_key=("study_id", "key"), pending=pending)
        finish_copies(pending)
    assert list(Source.objects.filter(study=study).values_list("key", flat=True)) == ["taken"]
    assert connection.execute_wrappers == [] and pending == []


@postgres_only
def test_a_second_copy_ends_the_first_and_each_is_one_logged_statement():
    study = StudyFactory()
    pending = []
    with CaptureQueriesContext(connection) as captured, transaction.atomic():
        sources = [Source(study=study, key=f"s{i}", text="t") for i in range(2)]
        insert_new(sources, natural_key=("study_id", "key"), pending=pending)
        summaries = [Summary(study=study, source=source, key=source.key, text="s") for source in sources]
        insert_new(summaries, natural_key=("study_id", "key"), pending=pending)
        finish_copies(pending)
    copies = [q["sql"] for q in captured.captured_queries if "COPY" in q["sql"]]
    assert [c.split(" (")[0] for c in copies] == ['2 rows: COPY "annotate_source"', '2 rows: COPY "annotate_summary"']
    assert dict(Summary.objects.filter(study=study).values_list("key", "source_id")) == {s.key: s.pk for s in sources}


@postgres_only
def test_rows_of_the_same_table_are_added_to_the_open_copy_and_logged_as_one_statement():
    """With their keys taken beforehand (a statement would end the COPY), rows inserted
    in two calls go into one COPY."""
    study = StudyFactory()
    pending, keys = [], KeyPool()
    with CaptureQueriesContext(connection) as captured, transaction.atomic():
        keys.reserve(connection, Source._meta, 5)
        first = [Source(study=study, key=f"a{i}", text="t") for i in range(2)]
        insert_new(first, natural_key=("study_id", "key"), pending=pending, key_pool=keys)
        second = [Source(study=study, key=f"b{i}", text="t") for i in range(3)]
        insert_new(second, natural_key=("study_id", "key"), pending=pending, key_pool=keys)
        assert len(pending) == 1 and len(connection.execute_wrappers) == 1
        finish_copies(pending)
    copies = [q["sql"] for q in captured.captured_queries if "COPY" in q["sql"]]
    assert [c.split(" (")[0] for c in copies] == ['5 rows: COPY "annotate_source"']
    stored = dict(Source.objects.filter(study=study).values_list("key", "pk"))
    assert stored == {obj.key: obj.pk for obj in first + second}


@postgres_only
def test_a_row_refused_in_added_rows_is_raised_and_nothing_of_the_copy_stays():
    study = StudyFactory()
    pending, keys = [], KeyPool()
    with pytest.raises(IntegrityError), transaction.atomic():
        keys.reserve(connection, Source._meta, 2)
        insert_new(
            [Source(study=study, key="k", text="t")], natural_key=("study_id", "key"), pending=pending, key_pool=keys
        )
        again = Source(study=study, key="k", text="again")
        insert_new([again], natural_key=("study_id", "key"), pending=pending, key_pool=keys)
        assert len(pending) == 1  # added to the open COPY: the server refuses it when the COPY ends
        finish_copies(pending)
    assert not Source.objects.filter(study=study).exists()
    assert connection.execute_wrappers == [] and pending == []


@postgres_only
def test_a_key_pool_hands_out_each_key_once_and_queries_only_when_short():
    pool = KeyPool()
    meta = Source._meta
    with CaptureQueriesContext(connection) as captured:
        pool.reserve(connection, meta, 5)
        first = pool.take(connection, meta, 3)
        second = pool.take(connection, meta, 2)
    assert len(captured.captured_queries) == 1 and pool.available(meta) == 0
    with CaptureQueriesContext(connection) as captured:
        third = pool.take(connection, meta, 4)  # short: the missing keys are taken now
    assert len(captured.captured_queries) == 1
    keys = first + second + third
    assert keys == sorted(keys) and len(set(keys)) == 9
    # the sequence goes on after them: a row saved the usual way gets a later key
    assert Source.objects.create(study=StudyFactory(), key="later", text="t").pk > keys[-1]
