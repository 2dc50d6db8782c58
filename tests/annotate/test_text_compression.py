"""Long source and summary texts are compressed with lz4 on PostgreSQL (annotate 0015):
pglz took half of an import's COPY on the server. SQLite compresses nothing,
and the migration leaves it as it is."""

import pytest
from django.db import connection
from django.db.migrations.recorder import MigrationRecorder

from tests.factories import SourceFactory, SummaryFactory

LONG = ("Drug A lowered blood pressure in most patients. " * 200).strip()  # ~10 KB, compressible


@pytest.mark.django_db
def test_long_texts_are_stored_with_lz4_on_postgresql():
    applied = MigrationRecorder(connection).applied_migrations()
    assert ("annotate", "0015_lz4_for_source_and_summary_texts") in applied
    summary = SummaryFactory(text=LONG, source=SourceFactory(text=LONG))
    if connection.vendor != "postgresql":
        return  # nothing to set on SQLite: the migration ran and changed nothing
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT (SELECT pg_column_compression(text) FROM annotate_source WHERE id = %s),"
            " (SELECT pg_column_compression(text) FROM annotate_summary WHERE id = %s)",
            [summary.source_id, summary.pk],
        )
        assert cursor.fetchone() == ("lz4", "lz4")
