"""import_jsonl writes in bulk: a fixed number of queries per chunk of records, whatever
the file's size, with the file's order still deciding what a record may refer to."""

import json

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from annotate.models import Claim, Source, Summary
from datasets.importing import ImportLineError, import_records
from datasets.pipeline import batch_size
from tests.factories import sentence_count


def records(n: int, *, study: str = "bulk") -> list[str]:
    lines = [{"type": "study", "slug": study, "title": "Bulk", "rubric": "litsumm"}]
    for i in range(n):
        lines.append({"type": "source", "study": study, "key": f"s{i}", "text": f"Sentence {i}. Another one."})
    for i in range(n):
        lines.append(
            {
                "type": "summary",
                "study": study,
                "source": f"s{i}",
                "key": f"m{i}",
                "text": f"Summary {i}.",
                "generator": "g",
            }
        )
    for i in range(n):
        lines.append({"type": "claim", "study": study, "summary": f"m{i}", "index": 0, "text": f"Claim {i}."})
    return [json.dumps(r) + "\n" for r in lines]


def queries(lines: list[str]) -> tuple[int, int]:
    """(lookups and updates, statements that store new rows). Django splits one bulk_create
    into as many INSERTs as the database's parameter limit needs (SQLite: 999 per
    statement), so inserts grow with the rows only by that batching, never one per row. On
    PostgreSQL the import's new rows go in by one COPY a table and chunk, after one query
    for their keys (the COPY itself is not captured): that query counts as its statement."""
    with CaptureQueriesContext(connection) as captured:
        import_records(lines=lines)
    sql = [q["sql"].lstrip().upper() for q in captured.captured_queries]
    inserts = sum(1 for q in sql if q.startswith("INSERT") or "NEXTVAL(" in q)
    return len(sql) - inserts, inserts


@pytest.mark.django_db
def test_the_query_count_does_not_grow_with_the_file():
    small, small_inserts = queries(records(5, study="small"))
    large, large_inserts = queries(records(300, study="large"))
    assert large == small, (small, large)
    # rubric, study, then one bulk insert each for sources (their sentences in the row), summaries, claims
    assert small_inserts == 5
    assert large_inserts <= 1 + 1 + 3 * 4  # 900 rows in at most 4 statements per table
    assert Summary.objects.filter(study__slug="large").count() == 300
    assert sentence_count(study__slug="large") == 600
    assert Claim.objects.filter(summary__study__slug="large").count() == 300
    # Importing the same file again changes nothing, in as few queries: a look-up of the
    # chunk's keys, after the question whether the study has any (a first import stops
    # there), for sources and summaries.
    again, again_inserts = queries(records(300, study="large"))
    assert again <= large + 2 and again_inserts == 0
    assert Summary.objects.filter(study__slug="large").count() == 300


@pytest.mark.django_db
def test_more_records_than_a_chunk_cost_a_few_more_queries_per_chunk():
    one_chunk, _ = queries(records(batch_size(), study="one"))
    three_chunks, _ = queries(records(batch_size() * 2 + 1, study="three"))
    # at most 5 lookups per extra chunk of each kind: for each look-up of the chunk's keys,
    # first whether the study has any such rows (a first import stops there)
    assert three_chunks - one_chunk <= 2 * 3 * 5
    assert Source.objects.filter(study__slug="three").count() == batch_size() * 2 + 1


@pytest.mark.django_db
def test_changed_records_are_updated_in_bulk_and_counted():
    import_records(lines=records(10))
    changed = records(10)
    changed[1] = (
        json.dumps({"type": "source", "study": "bulk", "key": "s0", "text": "A new text. Two sentences."}) + "\n"
    )
    changed[11] = (
        json.dumps({"type": "summary", "study": "bulk", "source": "s0", "key": "m0", "text": "New.", "generator": "g"})
        + "\n"
    )
    result = import_records(lines=changed)
    assert (result.updated["source"], result.unchanged["source"]) == (1, 9)
    assert (result.updated["summary"], result.unchanged["summary"]) == (1, 9)
    assert [s.text for s in Source.objects.get(key="s0").sentences] == [
        "A new text.",
        "Two sentences.",
    ]
    assert Summary.objects.get(key="m0").text == "New."


@pytest.mark.django_db
def test_a_parent_in_the_same_chunk_and_a_source_defined_later():
    lines = records(2)
    child = {
        "type": "summary",
        "study": "bulk",
        "source": "s1",
        "key": "m1-rev",
        "text": "R.",
        "generator": "g",
        "parent": "m1",
    }
    lines.insert(5, json.dumps(child) + "\n")  # right after m1, before the claims
    import_records(lines=lines)
    assert Summary.objects.get(key="m1-rev").parent == Summary.objects.get(key="m1")
    # A summary may not refer to a source defined later in the file.
    late = [
        json.dumps({"type": "study", "slug": "late", "title": "L", "rubric": "litsumm"}) + "\n",
        json.dumps({"type": "summary", "study": "late", "source": "s", "key": "m", "text": "M.", "generator": "g"})
        + "\n",
        json.dumps({"type": "source", "study": "late", "key": "s", "text": "S."}) + "\n",
    ]
    with pytest.raises(ImportLineError, match="line 2: field .source.: no source 's' in study 'late'"):
        import_records(lines=late)
    assert not Source.objects.filter(study__slug="late").exists()


def alternating(n: int, *, study: str) -> list[str]:
    """The usual shape of a hand-made file: each source followed by its summary."""
    lines = [{"type": "study", "slug": study, "title": "Alternating", "rubric": "litsumm"}]
    for i in range(n):
        lines.append({"type": "source", "study": study, "key": f"s{i}", "text": f"Sentence {i}. Another one."})
        lines.append(
            {"type": "summary", "study": study, "source": f"s{i}", "key": f"m{i}", "text": f"S {i}.", "generator": "g"}
        )
        lines.append({"type": "claim", "study": study, "summary": f"m{i}", "index": 0, "text": f"Claim {i}."})
    return [json.dumps(r) + "\n" for r in lines]


@pytest.mark.django_db
def test_a_file_alternating_kinds_costs_what_a_grouped_one_does():
    import_records(lines=records(1, study="warm-up"))  # creates the rubric both files use
    grouped, grouped_inserts = queries(records(150, study="grouped"))
    mixed, mixed_inserts = queries(alternating(150, study="mixed"))
    assert (mixed, mixed_inserts) == (grouped, grouped_inserts)
    assert Summary.objects.filter(study__slug="mixed", source__key="s149", key="m149").exists()
    assert Claim.objects.filter(summary__study__slug="mixed").count() == 150


LATE_CLAIM = [
    {"type": "claim", "study": "late", "summary": "m", "index": 0, "text": "C."},
    {"type": "source", "study": "late", "key": "s", "text": "S."},
    {"type": "summary", "study": "late", "source": "s", "key": "m", "text": "M.", "generator": "g"},
]
LATE_PARENT = [
    {"type": "source", "study": "late", "key": "s", "text": "S."},
    {"type": "summary", "study": "late", "source": "s", "key": "m2", "text": "M.", "generator": "g", "parent": "m"},
    {"type": "summary", "study": "late", "source": "s", "key": "m", "text": "M.", "generator": "g"},
]


@pytest.mark.django_db
@pytest.mark.parametrize(
    "late,where",
    [(LATE_CLAIM, 'line 2: field "summary"'), (LATE_PARENT, 'line 3: field "parent"')],
    ids=["claim-before-its-summary", "child-before-its-parent"],
)
def test_a_reference_to_a_later_line_of_the_same_chunk_is_refused(late, where):
    lines = [json.dumps({"type": "study", "slug": "late", "title": "L", "rubric": "litsumm"}) + "\n"]
    lines += [json.dumps(r) + "\n" for r in late]
    with pytest.raises(ImportLineError) as refused:
        import_records(lines=lines)
    assert str(refused.value) == f"{where}: no summary 'm' in study 'late'"
    assert not Source.objects.filter(study__slug="late").exists()


@pytest.mark.django_db(transaction=True)  # the import's transaction is the outermost, as in production
def test_a_summary_refused_while_the_sources_are_still_going_in_leaves_nothing():
    """A summary refused after its chunk's sources were written is reported at its line,
    nothing of the file stays, and the connection is usable for the next import."""
    lines = records(3, study="mid")
    bad = {
        "type": "summary",
        "study": "mid",
        "source": "s0",
        "key": "orphan",
        "text": "S.",
        "generator": "g",
        "parent": "missing",
    }
    lines.insert(5, json.dumps(bad) + "\n")  # after the sources, among the summaries
    with pytest.raises(ImportLineError) as refused:
        import_records(lines=lines)
    assert str(refused.value) == "line 6: field \"parent\": no summary 'missing' in study 'mid'"
    assert not Source.objects.filter(study__slug="mid").exists()
    assert import_records(lines=records(3, study="mid")).created["source"] == 3


@pytest.mark.django_db
def test_the_file_is_read_a_chunk_at_a_time_and_a_late_error_undoes_the_written_chunks():
    n = 3 * batch_size()
    lines = alternating(n, study="stream")
    consumed = 0

    def reading():
        nonlocal consumed
        for line in lines:
            consumed += 1
            yield line

    at_first_chunk = []
    result = import_records(
        lines=reading(), progress=lambda records, line: at_first_chunk.append((records, line, consumed))
    )
    assert result.created["summary"] == n
    records_written, last_line, lines_read = at_first_chunk[0]
    # The first chunk was written while most of the file was still unread.
    # (alternating() gives a source, a summary and a claim per item: a chunk is 3 x batch_size() records)
    assert records_written <= 3 * batch_size() and lines_read < len(lines) / 2, at_first_chunk[0]
    assert at_first_chunk[-1][0] == 3 * n  # every source, summary and claim reported
    # A bad line after several written chunks: nothing of the file stays.
    bad = alternating(n, study="stream-bad")
    bad.append(json.dumps({"type": "source", "study": "stream-bad", "key": "late", "text": 5}) + "\n")
    progress = []
    with pytest.raises(ImportLineError, match=f"line {len(bad)}: field .text."):
        import_records(lines=iter(bad), progress=lambda records, line: progress.append(records))
    assert progress, "chunks were written before the bad line was read"
    assert not Source.objects.filter(study__slug="stream-bad").exists()
    assert not Summary.objects.filter(study__slug="stream-bad").exists()


@pytest.mark.django_db
def test_import_jsonl_reports_progress_on_stderr_for_long_files(tmp_path, monkeypatch):
    from io import StringIO

    from django.core.management import call_command

    from datasets.management.commands import import_jsonl

    monkeypatch.setattr(import_jsonl, "PROGRESS_EVERY", batch_size())
    path = tmp_path / "long.jsonl"
    path.write_text("".join(alternating(2 * batch_size(), study="long")), encoding="utf-8")
    out, err = StringIO(), StringIO()
    call_command("import_jsonl", str(path), stdout=out, stderr=err)
    progress = err.getvalue().splitlines()
    assert progress and all("records written" in line for line in progress), err.getvalue()
    assert "Imported" in out.getvalue()
    short = tmp_path / "short.jsonl"
    short.write_text("".join(alternating(3, study="short")), encoding="utf-8")
    err = StringIO()
    call_command("import_jsonl", str(short), stdout=StringIO(), stderr=err)
    assert err.getvalue() == ""
