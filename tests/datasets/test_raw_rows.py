"""The export reads rows through Django's private SQL compiler API
(datasets/exporting/raw_rows.py). These tests fail loudly when a Django upgrade
changes that API, before an export silently writes wrong columns."""

import inspect

import django
import pytest
from django.db.models.sql.compiler import SQLCompiler
from django.db.models.sql.query import Query

from annotate.models import Summary
from datasets.exporting.raw_rows import CHECKED_DJANGO, raw_chunks
from tests.factories import SummaryFactory


def test_the_adapter_was_checked_against_this_django_version():
    assert django.VERSION[:2] == CHECKED_DJANGO, (
        f"datasets/exporting/raw_rows.py was checked against Django {CHECKED_DJANGO}, this is "
        f"{django.get_version()}: check SQLCompiler.execute_sql and Query.values_select, then update it"
    )


def test_the_private_names_it_calls_still_exist_with_the_same_parameters():
    parameters = inspect.signature(SQLCompiler.execute_sql).parameters
    assert list(parameters)[:4] == ["self", "result_type", "chunked_fetch", "chunk_size"]
    assert hasattr(Query, "values_select") or "values_select" in Query().__dict__
    assert hasattr(Query, "annotation_select")


@pytest.mark.django_db
def test_raw_chunks_give_the_selected_columns_of_every_row_in_chunks():
    made = [SummaryFactory(key=f"S{i:02d}") for i in range(7)]
    # Ordered by a column that is not selected: the compiler may add it to the rows,
    # and the adapter must cut it off again.
    query = Summary.objects.filter(pk__in=[s.pk for s in made]).order_by("-created_at", "-key")
    rows = query.values_list("key", "generator")
    chunks = list(raw_chunks(rows, chunk_size=3))
    assert [len(c) for c in chunks] == [3, 3, 1]
    assert [tuple(r) for c in chunks for r in c] == [tuple(r) for r in rows]
