"""The import pipeline's one writer (datasets.pipeline.RowWriter): rows go in by batches of
the IMPORT_BATCH_SIZE setting (on PostgreSQL by one COPY, with keys from the table's
sequence), come back with their keys (so the next rows can refer to them), keep hostile
text and JSON as they were, fail as Django's errors, and updates stamp `updated_at`."""

import pytest
from django.db import IntegrityError, connection, transaction
from django.test.utils import CaptureQueriesContext

from annotate.models import Source, Summary
from datasets.pipeline import RowWriter
from tests.factories import StudyFactory

pytestmark = pytest.mark.django_db

HOSTILE = 'Robert\'); DROP TABLE annotate_source;-- \\N \t tab, "quotes", 𝐀, ¡\u2028!'


def test_rows_come_back_with_their_keys_and_their_values_unchanged():
    study = StudyFactory()
    writer = RowWriter()
    metadata = {"nested": {"list": [1, 2.5, None, True, HOSTILE]}, "": "empty key"}
    sources = writer.create(
        [Source(study=study, key=f"s{i}", text=f"{HOSTILE} {i}.", metadata=metadata) for i in range(3)],
        kind="source",
    )
    assert all(s.pk is not None for s in sources)
    summaries = writer.create(
        [Summary(study=study, source=s, key=f"m{i}", text="M.", generator="g") for i, s in enumerate(sources)]
    )
    stored = {s.key: s for s in Source.objects.filter(study=study)}
    assert {k: (s.pk, s.text, s.metadata) for k, s in stored.items()} == {
        s.key: (s.pk, s.text, metadata) for s in sources
    }
    assert [m.source_id for m in Summary.objects.filter(pk__in=[m.pk for m in summaries]).order_by("key")] == [
        s.pk for s in sources
    ]
    assert writer.result.created["source"] == 3 and writer.result.summary_line().startswith("source: 3 created")


@pytest.mark.skipif(connection.vendor == "postgresql", reason="PostgreSQL stores new rows by COPY (below)")
def test_rows_go_in_by_batches_of_the_batch_size_setting(settings):
    settings.IMPORT_BATCH_SIZE = 2
    study = StudyFactory()
    with CaptureQueriesContext(connection) as captured:
        RowWriter().create([Source(study=study, key=f"s{i}", text="S.") for i in range(5)])
    inserts = [q["sql"] for q in captured.captured_queries if q["sql"].lstrip().upper().startswith("INSERT")]
    assert len(inserts) == 3  # 2 + 2 + 1
    assert Source.objects.filter(study=study).count() == 5


@pytest.mark.skipif(connection.vendor != "postgresql", reason="COPY is PostgreSQL's")
def test_on_postgresql_new_rows_go_in_by_one_copy_with_keys_from_the_sequence(settings):
    settings.IMPORT_BATCH_SIZE = 2
    study = StudyFactory()
    with CaptureQueriesContext(connection) as captured:
        sources = RowWriter().create([Source(study=study, key=f"s{i}", text="S.") for i in range(5)])
    statements = [q["sql"] for q in captured.captured_queries]
    assert not [sql for sql in statements if sql.lstrip().upper().startswith("INSERT")]
    assert len([sql for sql in statements if "nextval" in sql]) == 1
    stored = dict(Source.objects.filter(study=study).values_list("key", "pk"))
    assert stored == {s.key: s.pk for s in sources} and len(set(stored.values())) == 5
    # The sequence moved past the keys taken: a row stored later by the ORM gets a new one.
    later = Source.objects.create(study=study, key="later", text="S.")
    assert later.pk > max(stored.values())


def test_a_row_made_before_the_row_it_refers_to_was_stored_is_linked_to_it():
    study = StudyFactory()
    source = Source(study=study, key="s", text="S.")
    summary = Summary(study=study, source=source, key="m", text="M.", generator="g")
    writer = RowWriter()
    writer.create([source])
    writer.create([summary])
    assert Summary.objects.get(pk=summary.pk).source_id == source.pk
    # One made with a row that was never stored is refused, not stored without its link.
    with pytest.raises(ValueError), transaction.atomic():
        writer.create([Summary(study=study, source=Source(study=study, key="t"), key="n", text="M.", generator="g")])


def test_a_refused_row_raises_djangos_integrity_error_and_leaves_nothing():
    study = StudyFactory()
    with pytest.raises(IntegrityError), transaction.atomic():
        RowWriter().create([Source(study=study, key="same", text="S."), Source(study=study, key="same", text="S.")])
    assert not Source.objects.filter(study=study).exists()


def test_an_update_stores_the_fields_and_stamps_updated_at():
    study = StudyFactory()
    writer = RowWriter()
    (source,) = writer.create([Source(study=study, key="s", text="Old.")])
    before = Source.objects.get(pk=source.pk).updated_at
    source.text = "New."
    writer.update([source], ["text"])
    stored = Source.objects.get(pk=source.pk)
    assert stored.text == "New." and stored.updated_at > before
