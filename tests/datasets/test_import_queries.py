"""The import path's statements: an import over the REST API or the command costs a fixed
number of look-ups whatever the file's size, and each kind's new rows go in by batches
(bulk_create; on PostgreSQL one COPY), never a statement per row."""

import io
import json
import re
from collections import Counter

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext

from annotate.models import StudyMembership, Summary
from annotate.services.members import add_study_member
from datasets.pipeline import batch_size
from tests.conftest import api_client_for
from tests.factories import StudyFactory, UserFactory, sentence_count

pytestmark = pytest.mark.django_db
MARK = "Zebrafish-marker"


def jsonl(slug: str, n: int) -> bytes:
    lines = []
    for i in range(n):
        text = f"{MARK} trial {i} enrolled adults. It ended early. Follow-up was a year."
        lines.append({"type": "source", "study": slug, "key": f"s{i}", "text": text, "metadata": {"i": i}})
        lines.append(
            {
                "type": "summary",
                "study": slug,
                "source": f"s{i}",
                "key": f"m{i}",
                "text": f"{MARK} {i}.",
                "generator": "g",
            }
        )
    return "".join(json.dumps(r) + "\n" for r in lines).encode()


def import_over_api(settings, tmp_path, slug: str, n: int):
    settings.IMPORTS_DIR = tmp_path / "imports"
    study = StudyFactory(slug=slug)
    admin = UserFactory(username=f"admin-{slug}")
    add_study_member(study=study, user=admin, role=StudyMembership.Role.ADMIN)
    client = api_client_for(admin)
    upload = SimpleUploadedFile("f.jsonl", jsonl(slug, n), content_type="application/jsonl")
    with CaptureQueriesContext(connection) as captured:
        response = client.post(f"/api/studies/{slug}/imports/", {"file": upload}, format="multipart")
    assert response.status_code == 202, response.content
    assert response.json()["status"] == "done", response.json()
    assert Summary.objects.filter(study=study).count() == n
    assert sentence_count(study=study) == 3 * n
    return [q["sql"] for q in captured.captured_queries]


def stored_table(sql: str) -> str | None:
    """The table a statement stores new rows in: an INSERT's, or on PostgreSQL the table
    whose keys are taken for a COPY (the COPY itself is not captured); None for others."""
    if sql.lstrip().upper().startswith("INSERT"):
        return sql.split()[2].strip('"')
    copy_keys = re.search(r"pg_get_serial_sequence\('\"?(\w+)", sql)
    return copy_keys.group(1) if copy_keys else None


def split(statements: list[str]) -> tuple[list[str], Counter]:
    """(the statements that store no new rows, the ones that do counted by table)."""
    others = [q for q in statements if stored_table(q) is None]
    inserts = Counter(table for q in statements if (table := stored_table(q)) is not None)
    return others, inserts


def test_a_rest_import_costs_the_same_look_ups_for_5_and_for_a_chunk_of_pairs(settings, tmp_path):
    small, _ = split(import_over_api(settings, tmp_path, "small", 5))
    large, inserts = split(import_over_api(settings, tmp_path, "large", batch_size()))
    assert len(large) == len(small), (len(small), len(large))
    # Each kind's new rows in a few batched INSERTs (as many as the database's limit on
    # parameters per statement needs: SQLite's is 999), never one per row. The sentences
    # travel in their source's row (Source.sentence_spans): no table of their own.
    assert set(inserts) == {"annotate_source", "annotate_summary", "datasets_importrun"}, inserts
    assert inserts["annotate_source"] <= batch_size() // 50 and inserts["annotate_summary"] <= batch_size() // 50


def import_with_the_command(tmp_path, slug: str, n: int):
    path = tmp_path / f"{slug}.jsonl"
    study = json.dumps({"type": "study", "slug": slug, "title": slug, "rubric": "litsumm"}) + "\n"
    path.write_bytes(study.encode() + jsonl(slug, n))
    with CaptureQueriesContext(connection) as captured:
        call_command("import_jsonl", str(path), stdout=io.StringIO())
    assert Summary.objects.filter(study__slug=slug).count() == n
    assert sentence_count(study__slug=slug) == 3 * n
    return [q["sql"] for q in captured.captured_queries]


def test_the_import_command_costs_the_same_look_ups_for_5_and_for_a_chunk_of_pairs(tmp_path):
    """`manage.py import_jsonl` (a new study in each file): the look-ups do not grow
    with the number of rows either. A first file stores the built-in rubric."""
    import_with_the_command(tmp_path, "cmd-first", 1)
    small = import_with_the_command(tmp_path, "cmd-small", 5)
    large = import_with_the_command(tmp_path, "cmd-large", batch_size())
    assert len(split(large)[0]) == len(split(small)[0]), (len(small), len(large))
