"""On PostgreSQL a chunk's new sources are sent as the file is read (datasets.importing
_BulkWriter, STREAM at a time into one open COPY), so that the server stores them while the
rest of the file is parsed (issue 30, tenth round). What must hold whatever the database:
the same rows and counts, an error anywhere leaves nothing, and sources of a study that
has some already are written at the chunk's end as before."""

import json
import re

import psycopg
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from annotate.models import Source, Summary
from datasets.importing import CHUNK, STREAM, ImportLineError, import_records

postgres_only = pytest.mark.skipif(connection.vendor != "postgresql", reason="the sources' COPY is PostgreSQL's")

PROGRESS = "SELECT tuples_processed FROM pg_stat_progress_copy WHERE relid = 'annotate_source'::regclass"
LONG = "This sentence is here to make the source long enough to be sent before its batch ends. " * 12


def study_line(slug: str) -> str:
    return json.dumps({"type": "study", "slug": slug, "title": "Stream", "rubric": "litsumm"}) + "\n"


def pair(slug: str, i: int, text: str = LONG) -> list[str]:
    return [
        json.dumps({"type": "source", "study": slug, "key": f"s{i}", "text": f"Source {i}. {text}"}) + "\n",
        json.dumps(
            {
                "type": "summary",
                "study": slug,
                "source": f"s{i}",
                "key": f"m{i}",
                "text": f"Summary {i}.",
                "generator": "g",
            }
        )
        + "\n",
    ]


def pairs(slug: str, n: int, start: int = 0, text: str = LONG) -> list[str]:
    return [line for i in range(start, start + n) for line in pair(slug, i, text)]


def copies(captured) -> list[str]:
    return [q["sql"] for q in captured.captured_queries if re.match(r"^\d+ rows: COPY", q["sql"])]


@pytest.mark.django_db
def test_interleaved_sources_and_summaries_are_all_stored_with_their_keys():
    n = 3 * STREAM + 7  # three full batches and a partial one, sent by the chunk's flush
    with CaptureQueriesContext(connection) as captured:
        result = import_records(lines=[study_line("st"), *pairs("st", n)])
    assert result.created["source"] == n and result.created["summary"] == n
    sources = dict(Source.objects.filter(study__slug="st").values_list("key", "pk"))
    assert len(sources) == n
    # every summary points at its own source (the keys sent with the rows are the rows' keys)
    linked = Summary.objects.filter(study__slug="st").values_list("key", "source_id")
    assert all(sources[f"s{key[1:]}"] == source_id for key, source_id in linked)
    assert Source.objects.get(study__slug="st", key="s5").sentences[0].text == "Source 5."
    if connection.vendor == "postgresql":
        # one COPY for all the chunk's sources, however many batches were sent into it
        assert [c.split(":")[0] for c in copies(captured)] == [f"{n} rows", f"{n} rows"]


@postgres_only
@pytest.mark.django_db
def test_the_server_stores_the_first_sources_while_the_file_is_still_being_read():
    """Seen from a second connection: PostgreSQL's progress report of the import's COPY
    counts stored rows before the importer has read the file's last line."""
    n = 4 * STREAM
    lines = [study_line("early"), *pairs("early", n)]
    settings = connection.settings_dict
    seen = []

    def reading():
        with psycopg.connect(
            host=settings["HOST"],
            port=settings["PORT"] or 5432,
            user=settings["USER"],
            password=settings["PASSWORD"] or None,
            dbname=settings["NAME"],
        ) as watcher:
            for number, line in enumerate(lines, start=1):
                if number == len(lines) - 2 * STREAM:  # three batches sent, one to come
                    # the server works through what was sent on its own: wait for it, generously
                    for _ in range(600):
                        row = watcher.execute(PROGRESS).fetchone()
                        if row and row[0] > 0:
                            seen.append(row[0])
                            break
                        watcher.execute("SELECT pg_sleep(0.05)")
                yield line

    result = import_records(lines=reading())
    assert result.created["source"] == n
    assert seen and 0 < seen[0] <= 3 * STREAM, seen


@pytest.mark.django_db(transaction=True)  # the import's transaction is the outermost, as in production
@pytest.mark.parametrize("where", ["between batches", "in a batch"])
def test_a_bad_line_after_sources_were_sent_leaves_nothing(where):
    lines = [study_line("bad"), *pairs("bad", 2 * STREAM)]
    if where == "in a batch":
        lines += pairs("bad", STREAM // 2, start=2 * STREAM)
    lines.append('{"type": "source", "study": "bad", "key": "broken", "text": \n')
    with pytest.raises(ImportLineError, match=f"line {len(lines)}: not valid JSON"):
        import_records(lines=lines)
    assert not Source.objects.filter(study__slug="bad").exists()
    assert connection.execute_wrappers == []  # no COPY left open on the connection
    assert import_records(lines=[study_line("bad"), *pairs("bad", STREAM + 1)]).created["source"] == STREAM + 1


@pytest.mark.django_db(transaction=True)
def test_a_source_of_an_unknown_study_in_a_sent_batch_is_refused_at_its_line():
    lines = [study_line("known"), *pairs("known", STREAM - 1)]
    lines.append(json.dumps({"type": "source", "study": "nowhere", "key": "x", "text": "X."}) + "\n")
    with pytest.raises(ImportLineError) as refused:
        import_records(lines=lines)
    assert refused.value.line == len(lines) and refused.value.field == "study"
    assert not Source.objects.filter(study__slug="known").exists()
    assert connection.execute_wrappers == []


@pytest.mark.django_db
def test_sources_of_a_study_that_has_some_are_updated_and_added_at_the_chunks_end():
    n = 2 * STREAM
    import_records(lines=[study_line("again"), *pairs("again", n)])
    before = dict(Source.objects.filter(study__slug="again").values_list("key", "pk"))
    # the same file with the first half's texts changed and STREAM new sources after it
    changed = pairs("again", STREAM, text="A changed text. " + LONG)
    lines = [study_line("again"), *changed, *pairs("again", STREAM, start=STREAM), *pairs("again", STREAM, start=n)]
    with CaptureQueriesContext(connection) as captured:
        result = import_records(lines=lines)
    assert (result.created["source"], result.updated["source"], result.unchanged["source"]) == (STREAM, STREAM, STREAM)
    after = dict(Source.objects.filter(study__slug="again").values_list("key", "pk"))
    assert {k: after[k] for k in before} == before and len(after) == n + STREAM
    assert Source.objects.get(study__slug="again", key="s0").text.startswith("Source 0. A changed text.")
    # written once, at the chunk's end: one insert of the new sources (and one of the new summaries)
    inserts = [q for q in captured.captured_queries if re.match(r"^(\d+ (rows|times): )?(COPY|INSERT)", q["sql"])]
    assert len(inserts) == 2, [q["sql"][:80] for q in inserts]


@postgres_only
@pytest.mark.django_db
def test_keys_taken_for_a_chunk_and_not_used_leave_only_a_gap():
    """The chunk's first batch takes keys for the rest of the chunk; a chunk that holds
    fewer sources leaves the rest unused (a gap, as a failed insert's), never given twice."""
    import_records(lines=[study_line("gap"), *pairs("gap", STREAM + 3)])
    first = sorted(Source.objects.filter(study__slug="gap").values_list("pk", flat=True))
    assert first == list(range(first[0], first[0] + STREAM + 3))
    import_records(lines=[study_line("gap2"), *pairs("gap2", STREAM)])
    second = sorted(Source.objects.filter(study__slug="gap2").values_list("pk", flat=True))
    assert second[0] >= first[0] + CHUNK and len(set(first) | set(second)) == 2 * STREAM + 3
