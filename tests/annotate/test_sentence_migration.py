"""Sources stored before their sentences moved into the source's row (annotate
0014) keep every sentence, in order, with its span and ref, and the rating page shows
them; going back recreates the rows. A sentence that was not its span of the text stops
the migration with nothing changed."""

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

BEFORE = [("annotate", "0013_monitoring_and_flags")]
AFTER = [("annotate", "0014_sentences_in_the_source_row")]

TEXT = "Drug A lowered blood pressure. It was well tolerated.\nA third [PMC2] line."
# Stored in another order than their index, with an empty ref, across a line break.
ROWS = [(2, 54, 74, "PMC2"), (0, 0, 30, "PMC1"), (1, 31, 53, "")]


def _executor() -> MigrationExecutor:
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    return executor


def _old_source(apps, key: str, text: str, rows) -> int:
    study = apps.get_model("annotate", "Study").objects.create(
        slug=f"old-{key}",
        title="Old",
        rubric=apps.get_model("annotate", "Rubric").objects.create(key=f"r-{key}", version=1, title="R", definition={}),
    )
    source = apps.get_model("annotate", "Source").objects.create(study=study, key=key, text=text)
    for index, start, end, ref in rows:
        apps.get_model("annotate", "SourceSentence").objects.create(
            source=source, index=index, start=start, end=end, text=text[start:end], ref=ref
        )
    apps.get_model("annotate", "Source").objects.create(study=study, key=f"{key}-none", text="No sentences.")
    return source.pk


@pytest.mark.django_db(transaction=True)
def test_sentences_move_into_the_source_row_and_back():
    latest = _executor().loader.graph.leaf_nodes()
    _executor().migrate(BEFORE)
    try:
        pk = _old_source(_executor().loader.project_state(BEFORE).apps, "moved", TEXT, ROWS)
        _executor().migrate(AFTER)
        new = _executor().loader.project_state(AFTER).apps.get_model("annotate", "Source")
        assert new.objects.get(pk=pk).sentence_spans == [[0, 30, "PMC1"], [31, 53, ""], [54, 74, "PMC2"]]
        assert new.objects.get(key="moved-none").sentence_spans == []
        _executor().migrate(BEFORE)
        old = _executor().loader.project_state(BEFORE).apps.get_model("annotate", "SourceSentence")
        back = old.objects.filter(source_id=pk).order_by("index").values_list("index", "start", "end", "text", "ref")
        assert list(back) == [(i, s, e, TEXT[s:e], r) for i, s, e, r in sorted(ROWS)]
    finally:
        _executor().migrate(latest)
    from annotate.models import Source

    source = Source.objects.get(pk=pk)
    assert [(s.index, s.text, s.ref) for s in source.sentences] == [
        (0, "Drug A lowered blood pressure.", "PMC1"),
        (1, "It was well tolerated.", ""),
        (2, "A third [PMC2] line.", "PMC2"),
    ]


@pytest.mark.django_db(transaction=True)
def test_a_sentence_that_is_not_its_span_stops_the_migration_and_changes_nothing():
    latest = _executor().loader.graph.leaf_nodes()
    _executor().migrate(BEFORE)
    try:
        apps = _executor().loader.project_state(BEFORE).apps
        pk = _old_source(apps, "bad", TEXT, ROWS[:1])
        apps.get_model("annotate", "SourceSentence").objects.filter(source_id=pk).update(text="Something else.")
        with pytest.raises(RuntimeError, match=f"source {pk}: the sentence at 54-74"):
            _executor().migrate(AFTER)
        with connection.cursor() as cursor:
            cursor.execute("SELECT COUNT(*) FROM annotate_sourcesentence WHERE source_id = %s", [pk])
            assert cursor.fetchone()[0] == 1
        apps.get_model("annotate", "SourceSentence").objects.filter(source_id=pk).delete()
    finally:
        _executor().migrate(latest)
