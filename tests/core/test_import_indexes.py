"""The indexes annotate 0016 leaves on the tables an import writes most: a source's and a
summary's study key has no index of its own, the unique (study, key) one starting with it."""

import pytest
from django.db import connection

pytestmark = pytest.mark.django_db


def _indexed_columns(table: str) -> list[list[str]]:
    with connection.cursor() as cursor:
        constraints = connection.introspection.get_constraints(cursor, table)
    return sorted(c["columns"] for c in constraints.values() if c["index"] or c["unique"])


@pytest.mark.parametrize("table", ["annotate_source", "annotate_summary"])
def test_the_study_key_has_no_index_of_its_own_but_leads_the_unique_one(table):
    indexed = _indexed_columns(table)
    assert ["study_id"] not in indexed
    assert ["study_id", "key"] in indexed


def test_a_studys_sources_are_found_through_the_unique_index():
    """The query planner uses the (study, key) index for a lookup by study alone (the
    contents page, the importer's first look): on PostgreSQL, with sequential scans off so
    that a small table's plan shows which index answers."""
    if connection.vendor != "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("EXPLAIN QUERY PLAN SELECT id FROM annotate_source WHERE study_id = 1")
            plan = " ".join(str(row[-1]) for row in cursor.fetchall())
        # SQLite names a unique constraint's index sqlite_autoindex_<table>_<n>
        assert "SEARCH annotate_source USING" in plan and "INDEX sqlite_autoindex_annotate_source" in plan, plan
        return
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute("EXPLAIN SELECT id FROM annotate_source WHERE study_id = 1")
        plan = " ".join(row[0] for row in cursor.fetchall())
    assert "source_unique_study_key" in plan, plan
