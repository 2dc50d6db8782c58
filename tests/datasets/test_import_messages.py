"""Every import command reads a file with a UTF-8 byte-order mark, and refuses in one style:
`<file>: <where>: <what>. Nothing was imported.`"""

import json
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import CommandError, call_command

from annotate.models import Source, Span, Study, Summary
from tests.annotate.factpico import make_factpico_assignment
from tests.factories import StudyFactory, UserFactory

FIXTURES = Path(settings.BASE_DIR) / "fixtures"
BOM = "\ufeff"


def with_bom(src: Path, dst: Path) -> Path:
    dst.write_text(BOM + src.read_text(encoding="utf-8"), encoding="utf-8")
    assert dst.read_bytes().startswith(b"\xef\xbb\xbf")
    return dst


@pytest.mark.django_db
def test_import_jsonl_accepts_a_byte_order_mark(tmp_path, capsys):
    call_command("import_jsonl", str(with_bom(FIXTURES / "import-example.jsonl", tmp_path / "bom.jsonl")))
    assert capsys.readouterr().out.startswith(f"Imported {tmp_path / 'bom.jsonl'}: study: 1 created")
    assert Study.objects.filter(slug="example").exists() and Summary.objects.exists()


@pytest.mark.django_db
def test_import_evidence_inference_accepts_a_byte_order_mark(tmp_path):
    study = StudyFactory()
    first = (FIXTURES / "evidence_inference" / "abstracts.jsonl").read_text(encoding="utf-8").splitlines()[0]
    plain = tmp_path / "one.jsonl"
    plain.write_text(first + "\n", encoding="utf-8")
    call_command("import_evidence_inference", str(with_bom(plain, tmp_path / "bom.jsonl")), "--study", study.slug)
    assert Source.objects.filter(study=study).count() == 1


@pytest.mark.django_db
def test_import_thresh_accepts_a_byte_order_mark_in_the_file_and_the_map(tmp_path):
    assignment, _ = make_factpico_assignment(
        UserFactory(), summary_text="Grown-ups 🫁 with asthma took drug A or a dummy pill. Attacks fell."
    )
    call_command(
        "import_thresh",
        str(with_bom(FIXTURES / "thresh" / "factpico_example.json", tmp_path / "t.json")),
        "--study",
        assignment.study.slug,
        "--rubric-map",
        str(with_bom(FIXTURES / "thresh" / "factpico_map.yaml", tmp_path / "m.yaml")),
    )
    assert Span.objects.filter(revision__assignment__batch__name="thresh").count() == 4


def refusal(command, *args) -> str:
    with pytest.raises(CommandError) as excinfo:
        call_command(command, *args)
    return str(excinfo.value)


@pytest.mark.django_db
def test_refusals_share_one_style(tmp_path):
    study = StudyFactory()
    missing = tmp_path / "missing.jsonl"
    not_utf8 = tmp_path / "latin1.jsonl"
    not_utf8.write_bytes('{"type": "study", "title": "caf\xe9"}\n'.encode("latin-1"))
    bad_json = tmp_path / "bad.json"
    bad_json.write_text('[{"id": 1},\n  oops]', encoding="utf-8")
    bad_line = tmp_path / "bad.jsonl"
    bad_line.write_text(json.dumps({"type": "study", "slug": "s"}) + "\n", encoding="utf-8")
    messages = [
        refusal("import_jsonl", str(missing)),
        refusal("import_evidence_inference", str(missing), "--study", study.slug),
        refusal("import_thresh", str(missing), "--study", study.slug),
        refusal("import_jsonl", str(not_utf8)),
        refusal("import_evidence_inference", str(not_utf8), "--study", study.slug),
        refusal("import_thresh", str(not_utf8), "--study", study.slug),
        refusal("import_thresh", str(bad_json), "--study", study.slug),
        refusal("import_jsonl", str(bad_line)),
        refusal("import_dataset", str(tmp_path / "no-folder")),
    ]
    for message in messages:
        assert message.endswith(". Nothing was imported."), message
        assert message.startswith(str(tmp_path)), message
    assert messages[0] == f"{missing}: no such file. Nothing was imported."
    assert "not UTF-8 text" in messages[3] and "not UTF-8 text" in messages[4] and "not UTF-8 text" in messages[5]
    assert messages[6].startswith(f"{bad_json}: line 2: not valid JSON")
    assert messages[7].startswith(f"{bad_line}: line 1: field ")
    assert not Study.objects.exclude(pk=study.pk).exists()
