"""Every importer refuses text that is not valid Unicode (a lone surrogate, written in JSON
as `\\ud83d`) or holds a NUL, and JSON nested absurdly deep, naming where, and imports
nothing: JSON Lines, Evidence Inference, Thresh and the re-import of a dataset folder."""

import json
from pathlib import Path

import pytest
import yaml
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command

from annotate.models import Source, Span, Study, Summary
from annotate.services.rubrics import load_builtin_rubric
from datasets.demo import DEMO_STUDY
from datasets.exporting import sha256sums
from datasets.thresh import ThreshImportError, import_thresh
from tests.annotate.factpico import make_factpico_assignment
from tests.datasets.test_export import export, rate_demo
from tests.factories import StudyFactory, UserFactory

EXAMPLE = Path(settings.BASE_DIR) / "fixtures" / "import-example.jsonl"
EVIDENCE = Path(settings.BASE_DIR) / "fixtures" / "evidence_inference" / "abstracts.jsonl"
THRESH = Path(settings.BASE_DIR) / "fixtures" / "thresh"


def lines_with(path: Path, n: int, old: str, new: str) -> list[str]:
    """The first n lines of a JSON Lines file, with `old` replaced by `new` (raw JSON) in the last."""
    lines = [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()][:n]
    assert old in lines[-1]
    lines[-1] = lines[-1].replace(old, new, 1)
    return lines


def write(tmp_path: Path, lines: list[str]) -> Path:
    path = tmp_path / "in.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ('"generator": "model-\\ud83d', 'line N: field "generator": contains a lone surrogate (U+D83D)'),
        ('"generator": "model-\\u0000', 'line N: field "generator": contains a NUL character'),
        ('"extra": {"\\udc00": 1}, "generator": "', 'line N: field "extra": has a key that contains a lone'),
        ('"generator": ' + "[" * 200 + "]" * 200 + ', "x": "', 'line N: field "generator": is nested more than'),
    ],
)
def test_json_lines_import_refuses_bad_text_naming_line_and_field(tmp_path, bad, message):
    lines = EXAMPLE.read_text(encoding="utf-8").splitlines()
    index = next(i for i, line in enumerate(lines) if '"type": "summary"' in line)
    lines[index] = lines[index].replace('"generator": "', bad, 1)
    message = message.replace("line N", f"line {index + 1}")
    with pytest.raises(CommandError) as error:
        call_command("import_jsonl", str(write(tmp_path, lines)))
    assert message in str(error.value)
    assert not Study.objects.exists() and not Summary.objects.exists()


@pytest.mark.django_db
def test_evidence_inference_import_refuses_bad_text_naming_line_and_field(tmp_path):
    StudyFactory(slug="fp", rubric=load_builtin_rubric(key="factpico"))
    record = json.loads(EVIDENCE.read_text(encoding="utf-8").splitlines()[1])
    intervention = record["prompts"][0]["intervention"]
    line = json.dumps(record).replace(json.dumps(intervention), json.dumps(intervention)[:-1] + '\\ud83d"', 1)
    first = EVIDENCE.read_text(encoding="utf-8").splitlines()[0]
    with pytest.raises(CommandError) as error:
        call_command("import_evidence_inference", str(write(tmp_path, [first, line])), "--study", "fp")
    assert 'line 2: field "prompts[0].intervention": contains a lone surrogate' in str(error.value)
    assert not Source.objects.exists()


@pytest.fixture
def factpico_study(db):
    assignment, _ = make_factpico_assignment(
        UserFactory(), summary_text="Grown-ups 🫁 with asthma took drug A or a dummy pill. Attacks fell."
    )
    return assignment.study


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ('"Alice Example"', '"Alice \\ud83d"', "[0].annotator: contains a lone surrogate"),
        ('"Plain words for placebo."', '"Plain\\u0000"', "[0].edits[0].annotation.explanation: contains a NUL"),
        ('"factuality": {', '"\\udfff": 1, "factuality": {', "[0].edits[0].annotation: has a key that contains"),
    ],
)
def test_thresh_import_refuses_bad_text_naming_entry_and_place(factpico_study, tmp_path, old, new, message):
    text = (THRESH / "factpico_example.json").read_text(encoding="utf-8")
    assert old in text
    path = tmp_path / "thresh.json"
    path.write_text(text.replace(old, new, 1), encoding="utf-8")
    with pytest.raises(CommandError) as error:
        call_command(
            "import_thresh",
            str(path),
            "--study",
            factpico_study.slug,
            "--rubric-map",
            str(THRESH / "factpico_map.yaml"),
        )
    assert message in str(error.value)
    assert not Span.objects.exists()


def test_thresh_service_refuses_bad_text_for_every_caller(factpico_study):
    entries = json.loads((THRESH / "factpico_example.json").read_text(encoding="utf-8"))
    entries[1]["edits"][0]["annotation"]["explanation"] = "Half an emoji \ud83d"
    mapping = yaml.safe_load((THRESH / "factpico_map.yaml").read_text(encoding="utf-8"))
    with pytest.raises(ThreshImportError, match=r"entry 2: edits\[0\]\.annotation\.explanation contains a lone"):
        import_thresh(study=factpico_study, entries=entries, rubric_map=mapping)
    assert not Span.objects.exists()


@pytest.fixture
def exported(transactional_db, tmp_path):
    rate_demo()
    folder = tmp_path / "export" / DEMO_STUDY
    export(DEMO_STUDY, folder, include_calibration=True)
    return folder


def tamper(folder: Path, table: str, change) -> None:
    """Rewrite one JSON Lines table with `change(rows)` and make the checksums match again."""
    path = folder / "jsonl" / f"{table}.jsonl"
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    text = change(rows)
    path.write_text(text, encoding="utf-8")
    files = [p for p in folder.rglob("*") if p.is_file() and p.name != "SHA256SUMS"]
    (folder / "SHA256SUMS").write_text(sha256sums(folder, files), encoding="utf-8")


@pytest.mark.parametrize(
    ("table", "edit", "message"),
    [
        # Inside a JSON column: the rating's value is a string holding the escape.
        ("ratings", lambda r: r["question"] == "feedback" and {"value": "Cite it\ud83d"}, "ratings.jsonl: line"),
        # In a plain text column of the table.
        ("summaries", lambda r: {"text": r["text"] + "\x00"}, "summaries.jsonl: line 1: text: contains a NUL"),
    ],
)
def test_dataset_reimport_refuses_bad_text_naming_the_row(exported, table, edit, message):
    def change(rows):
        changed = False
        for row in rows:
            update = edit(row)
            if update and not changed:
                row.update(update)
                changed = True
        assert changed
        return "".join(json.dumps(row) + "\n" for row in rows)

    tamper(exported, table, change)
    call_command("flush", interactive=False)
    with pytest.raises(CommandError) as error:
        call_command("import_dataset", str(exported))
    assert message in str(error.value)
    assert "lone surrogate" in str(error.value) or "NUL" in str(error.value)
    assert not Study.objects.exists() and not get_user_model().objects.exists()


def test_dataset_reimport_refuses_absurd_nesting_without_crashing(exported):
    def change(rows):
        text = "".join(json.dumps(row) + "\n" for row in rows)
        return text + '{"deep": ' + "[" * 5000 + "]" * 5000 + "}\n"

    tamper(exported, "claims", change)
    call_command("flush", interactive=False)
    with pytest.raises(CommandError, match=r"claims\.jsonl: line \d+: deep: is nested more than"):
        call_command("import_dataset", str(exported))
    assert not Study.objects.exists()
