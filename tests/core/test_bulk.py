"""core.bulk's inserts (issue 30): on PostgreSQL the rows go in by COPY, whose text format
has its own escapes (tab, newline, backslash, \\N for NULL); on SQLite by executemany.
Every value must come back exactly as it was given, and a row the database refuses must
leave nothing behind. CI runs this file on both databases."""

from __future__ import annotations

import uuid

import pytest
from django.db import IntegrityError, connection, transaction
from django.test.utils import CaptureQueriesContext

from annotate.models import Source, SourceSentence
from annotate.services import store_sentences
from core.bulk import insert_new
from tests.factories import StudyFactory

pytestmark = pytest.mark.django_db


def bare_source(length: int = 2000) -> Source:
    """A source with no sentences stored yet (the factory stores its own)."""
    return Source.objects.create(study=StudyFactory(), key="bare", text="x" * length)


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


def test_sentences_with_copys_escape_characters_come_back_unchanged():
    source = bare_source()
    rows = [
        (source.pk, i, i * 10, i * 10 + 5, text, ref)
        for i, (text, ref) in enumerate(zip(HOSTILE, reversed(HOSTILE), strict=True))
    ]
    rows.append((source.pk, len(rows), 500, 501, "plain", ""))  # an empty ref stays empty, not NULL
    assert store_sentences(rows) == len(rows)
    stored = list(
        SourceSentence.objects.filter(source=source)
        .order_by("index")
        .values_list("source", "index", "start", "end", "text", "ref")
    )
    assert stored == [tuple(r[:4]) + (r[4], r[5][:100]) for r in rows]


def test_new_sources_with_hostile_text_and_json_come_back_unchanged_with_their_keys():
    study = StudyFactory()
    metadata = {"text": HOSTILE, "nested": {"a\tb": [1, 2.5, None, True], "\\N": "\\N"}, "empty": {}}
    objs = [
        Source(study=study, key=f"k{i}", title=text[:100], text=text, metadata=metadata, external_ids={"pmid": str(i)})
        for i, text in enumerate(HOSTILE)
    ]
    objs.append(Source(study=study, key="plain", text="plain"))  # the JSON defaults ({})
    insert_new(objs, natural_key=("study_id", "key"))
    assert all(obj.pk for obj in objs)
    for obj in objs:
        stored = Source.objects.get(pk=obj.pk)
        assert (stored.key, stored.text, stored.title) == (obj.key, obj.text, obj.title)
        assert stored.metadata == obj.metadata and stored.external_ids == obj.external_ids
        assert isinstance(stored.uuid, uuid.UUID) and stored.uuid == obj.uuid
        assert stored.created_at is not None and stored.created_at == obj.created_at


def test_a_row_the_database_refuses_leaves_none_of_the_call_behind():
    source = bare_source()
    rows = [(source.pk, 0, 0, 5, "first", ""), (source.pk, 1, 6, 10, "second", ""), (source.pk, 1, 11, 15, "again", "")]
    with pytest.raises(IntegrityError), transaction.atomic():
        store_sentences(rows)  # the third row repeats (source, index)
    assert not SourceSentence.objects.filter(source=source).exists()
    with pytest.raises(IntegrityError), transaction.atomic():
        store_sentences([(source.pk, 0, 5, 5, "start must be before end", "")])  # the check constraint
    assert not SourceSentence.objects.filter(source=source).exists()


def test_the_insert_is_one_logged_statement_without_its_rows(settings):
    source = bare_source(100_000)
    marker = "Okapi-marker"
    rows = [(source.pk, i, i, i + 1, f"{marker} {i}", "") for i in range(3000)]
    with CaptureQueriesContext(connection) as captured:
        store_sentences(rows)
    statements = [q["sql"] for q in captured.captured_queries]
    assert len(statements) == 1, statements
    expected = "3000 rows: COPY" if connection.vendor == "postgresql" else "3000 times: INSERT INTO"
    assert statements[0].startswith(expected), statements[0][:80]
    assert marker not in statements[0]
    assert SourceSentence.objects.filter(source=source).count() == 3000
