"""Import of a small hand-made Thresh file (fixtures/thresh/) into a FactPICO study."""

import json
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import CommandError, call_command

from annotate.models import Span
from datasets.exporting import export_dataset
from datasets.thresh import ThreshImportError, utf16_to_code_points
from tests.annotate.factpico import make_factpico_assignment
from tests.factories import UserFactory

FIXTURES = Path(settings.BASE_DIR) / "fixtures" / "thresh"
SUMMARY = "Grown-ups 🫁 with asthma took drug A or a dummy pill. Attacks fell."


@pytest.fixture
def study(db):
    assignment, _ = make_factpico_assignment(UserFactory(), summary_text=SUMMARY)
    return assignment.study


def run(study, *extra):
    call_command(
        "import_thresh",
        str(FIXTURES / "factpico_example.json"),
        "--study",
        study.slug,
        "--rubric-map",
        str(FIXTURES / "factpico_map.yaml"),
        *extra,
    )


def test_edits_become_spans_at_code_point_offsets_with_mapped_answers(study):
    run(study)
    spans = list(
        Span.objects.filter(revision__assignment__batch__name="thresh").order_by("revision__assignment__rater")
    )
    by_text = {(s.question, s.text): s for s in spans}
    assert len(spans) == 4
    pill = by_text[("added_info", "a dummy pill")]
    # 40 UTF-16 units in the file; the lungs emoji is two units but one code point.
    assert (pill.start, pill.end) == (39, 51) and SUMMARY[pill.start : pill.end] == "a dummy pill"
    assert pill.answers == {"factual": "yes"} and pill.rationale == "Plain words for placebo."
    contradiction = by_text[("contradictions", "Grown-ups 🫁")]
    assert (contradiction.link_start, contradiction.link_end, contradiction.link_text) == (0, 6, "Adults")
    bob = [s for s in spans if s.answers == {"factual": "no"}]
    assert sorted(s.text for s in bob) == ["Attacks fell", "dummy pill"]
    assert {s.revision.status for s in spans} == {"submitted"}


def test_annotators_become_pseudonymous_accounts(study, tmp_path):
    run(study)
    usernames = {s.revision.assignment.rater.username for s in Span.objects.filter(question="added_info")}
    assert len(usernames) == 2 and all(u.startswith("thresh-") for u in usernames)
    out = export_dataset(study=study, out_dir=tmp_path / "out", formats=["jsonl"]).out_dir
    text = "".join(p.read_text(encoding="utf-8") for p in out.rglob("*") if p.is_file())
    for name in ("Alice", "bob@example.org", *usernames):
        assert name not in text


def test_an_unmapped_category_is_refused_and_nothing_is_imported(study, tmp_path):
    mapping = tmp_path / "map.json"
    mapping.write_text(json.dumps({"edits": {"insertion": {"question": "added_info"}}}))
    with pytest.raises(CommandError, match="entry 1, edit 2: category 'substitution' is not in the map"):
        call_command(
            "import_thresh",
            str(FIXTURES / "factpico_example.json"),
            "--study",
            study.slug,
            "--rubric-map",
            str(mapping),
        )
    assert not Span.objects.exists()


def test_importing_the_same_batch_twice_is_refused(study):
    run(study)
    with pytest.raises(CommandError, match="already has a batch 'thresh'"):
        run(study)
    run(study, "--batch", "thresh-2")
    assert Span.objects.filter(revision__assignment__batch__name="thresh-2").count() == 4


def test_offsets_that_split_a_character_or_overrun_are_refused():
    assert utf16_to_code_points("a🫁b", 3, "x") == 2
    with pytest.raises(ThreshImportError, match="inside a character"):
        utf16_to_code_points("a🫁b", 2, "x")
    with pytest.raises(ThreshImportError, match="past the end"):
        utf16_to_code_points("ab", 3, "x")
