"""Size limits on sources and summaries (core.text_validation): refused at every entry
point with a message naming the line and the field, and nothing is written."""

import json

import pytest
from django.core.exceptions import ValidationError
from django.core.management import CommandError, call_command

from annotate.models import Source, Summary
from annotate.services.summaries import create_summary
from core.exceptions import ApplicationError
from core.text_validation import MAX_SOURCE_CHARS, MAX_SUMMARY_CHARS
from tests.factories import SourceFactory, StudyFactory, SummaryFactory

STUDY = {"type": "study", "slug": "big", "title": "Big", "rubric": "litsumm"}
SOURCE = {"type": "source", "study": "big", "key": "s1", "text": "One sentence. Two sentences."}
SUMMARY = {"type": "summary", "study": "big", "source": "s1", "key": "m1", "text": "Short.", "generator": "x"}


def write(tmp_path, *records):
    path = tmp_path / "in.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def refused(path) -> str:
    with pytest.raises(CommandError) as excinfo:
        call_command("import_jsonl", str(path))
    return str(excinfo.value)


@pytest.mark.django_db
def test_a_megabyte_summary_is_refused_and_nothing_is_imported(tmp_path):
    huge = "word " * 240_000  # 1.2 MB, as in the issue
    message = refused(write(tmp_path, STUDY, SOURCE, {**SUMMARY, "text": huge}))
    assert 'line 3: field "text": is 1,200,000 characters long; a summary may have at most 20,000' in message
    assert message.endswith("Nothing was imported.")
    assert not Source.objects.exists() and not Summary.objects.exists()


@pytest.mark.django_db
def test_the_limits_are_inclusive(tmp_path):
    source_text = ("x" * 99 + ". ") * (MAX_SOURCE_CHARS // 101)
    source_text += "y" * (MAX_SOURCE_CHARS - len(source_text))
    assert len(source_text) == MAX_SOURCE_CHARS
    records = [STUDY, {**SOURCE, "text": source_text}, {**SUMMARY, "text": "z" * MAX_SUMMARY_CHARS}]
    call_command("import_jsonl", str(write(tmp_path, *records)))
    assert Summary.objects.get().text == "z" * MAX_SUMMARY_CHARS
    message = refused(write(tmp_path, STUDY, {**SOURCE, "key": "s2", "text": source_text + "!"}))
    assert 'line 2: field "text": is 200,001 characters long; a source may have at most 200,000' in message


@pytest.mark.django_db
def test_a_source_given_as_sentences_is_measured_whole(tmp_path):
    sentence = {"text": "a" * 50_000}
    message = refused(
        write(tmp_path, STUDY, {**{k: v for k, v in SOURCE.items() if k != "text"}, "sentences": [sentence] * 5})
    )
    assert 'line 2: field "sentences": is 250,004 characters long' in message


@pytest.mark.django_db
def test_create_summary_and_the_admin_forms_apply_the_limits():
    study = StudyFactory()
    source = SourceFactory(study=study)
    with pytest.raises(ApplicationError, match='field "text": is 20,001 characters long'):
        create_summary(study=study, source=source, key="k", text="a" * (MAX_SUMMARY_CHARS + 1), generator="g")
    assert not Summary.objects.filter(key="k").exists()
    summary = SummaryFactory(source=source)
    summary.text = "a" * (MAX_SUMMARY_CHARS + 1)
    with pytest.raises(ValidationError) as excinfo:
        summary.full_clean()
    assert "text" in excinfo.value.message_dict
    source.text = "a" * (MAX_SOURCE_CHARS + 1)
    with pytest.raises(ValidationError):
        source.full_clean()


@pytest.mark.django_db
def test_import_evidence_inference_refuses_an_overlong_abstract(tmp_path):
    from django.conf import settings

    study = StudyFactory()
    record = json.loads(
        (settings.BASE_DIR / "fixtures" / "evidence_inference" / "abstracts.jsonl")
        .read_text(encoding="utf-8")
        .splitlines()[0]
    )
    record["abstract"] = "An overlong abstract. " * 10_000
    path = tmp_path / "ei.jsonl"
    path.write_text(json.dumps(record) + "\n", encoding="utf-8")
    with pytest.raises(CommandError, match=r'line 1: field "text": is 220,000 characters long'):
        call_command("import_evidence_inference", str(path), "--study", study.slug)
    assert not Source.objects.filter(study=study).exists()


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        (["f"] * 101, 'line 3: field "flags": has 101 entries; at most 100 are allowed'),
        (["x" * 101], 'line 3: field "flags": has an entry longer than 100 characters'),
    ],
)
def test_summary_flags_have_their_limits(tmp_path, flags, expected):
    message = refused(write(tmp_path, STUDY, SOURCE, {**SUMMARY, "flags": flags}))
    assert expected in message
    assert not Summary.objects.exists()
