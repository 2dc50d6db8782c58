import json
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import CommandError, call_command

from annotate.models import Claim, Rubric, Source, Study, Summary
from annotate.services.ratings import submit_rating
from tests.conftest import GOOD_ANSWERS
from tests.factories import AssignmentFactory, UserFactory, sentence_count

EXAMPLE = Path(settings.BASE_DIR) / "fixtures" / "import-example.jsonl"
MODELS = (Study, Source, Summary, Claim, Rubric)


def table_counts():
    return {m.__name__: m.objects.count() for m in MODELS} | {"sentences": sentence_count()}


def write_lines(tmp_path, records):
    path = tmp_path / "in.jsonl"
    path.write_text("\n".join(r if isinstance(r, str) else json.dumps(r) for r in records) + "\n", encoding="utf-8")
    return path


def example_records():
    return [json.loads(line) for line in EXAMPLE.read_text(encoding="utf-8").splitlines() if line.strip()]


@pytest.mark.django_db
def test_documented_example_imports_every_record_type(capsys):
    call_command("import_jsonl", str(EXAMPLE))
    study = Study.objects.get(slug="example")
    assert study.rubric.key == "litsumm"
    xist = Source.objects.get(study=study, key="XIST")
    sentences = xist.sentences
    assert [s.ref for s in sentences] == ["PMC1000001", "PMC1000002", "PMC1000003"]
    # Each sentence is a character span of the stored text.
    assert all(xist.text[s.start : s.end] == s.text for s in sentences)
    # The plain abstract was split by the splitter: "p < .001" does not end a sentence.
    plain = Source.objects.get(key="PMC546184")
    assert [s.text for s in plain.sentences] == [
        "Duloxetine was compared with placebo.",
        "Patients improved more on duloxetine (p < .001) than on placebo.",
        "No difference by sex was seen.",
    ]
    assert {s.ref for s in plain.sentences} == {"PMC546184"}
    v2 = Summary.objects.get(key="XIST-v2")
    assert v2.parent.key == "XIST-v1"
    claim = Claim.objects.get(summary__key="XIST-v1", index=0)
    assert claim.verdict == "supported" and claim.probability == pytest.approx(0.97)
    assert claim.summary.text[claim.start : claim.end] == claim.text
    assert "summary: 3 created" in capsys.readouterr().out


@pytest.mark.django_db
def test_importing_twice_changes_nothing(capsys):
    call_command("import_jsonl", str(EXAMPLE))
    before = table_counts()
    stamps = list(Summary.objects.order_by("pk").values_list("updated_at", flat=True))
    call_command("import_jsonl", str(EXAMPLE))
    assert table_counts() == before
    assert list(Summary.objects.order_by("pk").values_list("updated_at", flat=True)) == stamps
    assert "summary: 0 created, 0 updated, 3 unchanged" in capsys.readouterr().out


@pytest.mark.django_db
def test_changed_record_is_updated_by_key(tmp_path):
    call_command("import_jsonl", str(EXAMPLE))
    records = example_records()
    for r in records:
        if r.get("key") == "PMC546184-a":
            r["text"] = "Duloxetine beat placebo [PMC546184]."
    call_command("import_jsonl", str(write_lines(tmp_path, records)))
    assert Summary.objects.get(key="PMC546184-a").text == "Duloxetine beat placebo [PMC546184]."
    assert Summary.objects.count() == 3


def _with_bad(line_index, change):
    records = example_records()
    change(records[line_index])
    return records


BAD_CASES = [
    # (description, records builder, expected message fragment)
    ("not json", lambda: example_records()[:3] + ["{not json"], "line 4: not valid JSON"),
    ("unknown type", lambda: _with_bad(1, lambda r: r.update(type="article")), 'line 2: field "type": must be one of'),
    ("missing title", lambda: _with_bad(0, lambda r: r.pop("title")), 'line 1: field "title": is required'),
    (
        "unknown rubric",
        lambda: _with_bad(0, lambda r: r.update(rubric="nope")),
        'line 1: field "rubric": unknown rubric',
    ),
    ("bad slug", lambda: _with_bad(0, lambda r: r.update(slug="has space")), 'line 1: field "slug": may contain only'),
    (
        "empty sentence",
        lambda: _with_bad(1, lambda r: r["sentences"][1].update(text="")),
        'line 2: field "sentences[1].text": must be a non-empty string',
    ),
    (
        "both text and sentences",
        lambda: _with_bad(2, lambda r: r.update(sentences=[{"text": "x"}])),
        'line 3: field "sentences": give either',
    ),
    ("unknown study", lambda: _with_bad(3, lambda r: r.update(study="other")), 'line 4: field "study": no study'),
    ("unknown source", lambda: _with_bad(3, lambda r: r.update(source="NOPE")), 'line 4: field "source": no source'),
    ("missing generator", lambda: _with_bad(3, lambda r: r.pop("generator")), 'line 4: field "generator": is required'),
    (
        "metadata not object",
        lambda: _with_bad(3, lambda r: r.update(metadata=[1])),
        'line 4: field "metadata": must be an object',
    ),
    (
        "unknown parent",
        lambda: _with_bad(4, lambda r: r.update(parent="XIST-v9")),
        'line 5: field "parent": no summary',
    ),
    (
        "unknown field",
        lambda: _with_bad(5, lambda r: r.update(model="gpt")),
        'line 6: field "model": is not a known field',
    ),
    ("duplicate key", lambda: example_records() + [example_records()[5]], 'line 9: field "key": duplicates line 6'),
    ("claim span beyond text", lambda: _with_bad(6, lambda r: r.update(end=10_000)), 'line 7: field "end": is beyond'),
    (
        "claim bad probability",
        lambda: _with_bad(6, lambda r: r.update(probability=1.5)),
        'line 7: field "probability": must be a number between 0 and 1',
    ),
    (
        "claim bad verdict",
        lambda: _with_bad(7, lambda r: r.update(verdict="true")),
        'line 8: field "verdict": must be one of',
    ),
    (
        "claim start without end",
        lambda: _with_bad(7, lambda r: r.update(start=3)),
        'line 8: field "end": start and end go together',
    ),
]


@pytest.mark.django_db
@pytest.mark.parametrize("description,build,expected", BAD_CASES, ids=[c[0] for c in BAD_CASES])
def test_bad_line_names_line_and_field_and_imports_nothing(tmp_path, description, build, expected):
    before = table_counts()
    with pytest.raises(CommandError) as excinfo:
        call_command("import_jsonl", str(write_lines(tmp_path, build())))
    assert expected in str(excinfo.value)
    assert "Nothing was imported" in str(excinfo.value)
    assert table_counts() == before


@pytest.mark.django_db
def test_error_late_in_file_rolls_back_earlier_lines(tmp_path):
    # The last line refers to a summary that does not exist: found only while writing,
    # after the study, sources and summaries were written; all of it must roll back.
    records = example_records() + [{"type": "claim", "study": "example", "summary": "missing", "index": 0, "text": "x"}]
    with pytest.raises(CommandError, match='line 9: field "summary": no summary'):
        call_command("import_jsonl", str(write_lines(tmp_path, records)))
    assert Study.objects.count() == 0 and Summary.objects.count() == 0


@pytest.mark.django_db
def test_rated_summary_text_cannot_be_changed_by_import(tmp_path):
    call_command("import_jsonl", str(EXAMPLE))
    summary = Summary.objects.get(key="PMC546184-a")
    assignment = AssignmentFactory(summary=summary, rater=UserFactory(), position=0)
    submit_rating(assignment=assignment, rater=assignment.rater, answers=GOOD_ANSWERS, version=1)
    records = example_records()
    records[5]["text"] = "Something else entirely [PMC546184]."
    with pytest.raises(CommandError, match="has ratings"):
        call_command("import_jsonl", str(write_lines(tmp_path, records)))
    summary.refresh_from_db()
    assert summary.text == "Duloxetine improved symptoms more than placebo [PMC546184]."


def test_missing_file_is_a_clear_error(tmp_path):
    with pytest.raises(CommandError, match="no such file"):
        call_command("import_jsonl", str(tmp_path / "absent.jsonl"))


@pytest.mark.django_db
def test_non_utf8_file_is_a_clear_error(tmp_path):
    path = tmp_path / "latin1.jsonl"
    path.write_bytes('{"type": "study", "title": "caf\u00e9"}\n'.encode("latin-1"))
    with pytest.raises(CommandError, match="not UTF-8"):
        call_command("import_jsonl", str(path))
