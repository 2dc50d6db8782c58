"""Import of a small hand-made Thresh file (fixtures/thresh/) into a FactPICO study."""

import json
from pathlib import Path

import pytest
import yaml
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
    # Under another batch name it is still the same annotators' work on the same summaries.
    with pytest.raises(CommandError, match="entry 1: this annotator's annotation of summary .* is already imported"):
        run(study, "--batch", "thresh-2")
    assert not Span.objects.filter(revision__assignment__batch__name="thresh-2").exists()
    assert Span.objects.filter(revision__assignment__batch__name="thresh").count() == 4


def test_offsets_that_split_a_character_or_overrun_are_refused():
    assert utf16_to_code_points("a🫁b", 3, "x") == 2
    with pytest.raises(ThreshImportError, match="inside a character"):
        utf16_to_code_points("a🫁b", 2, "x")
    with pytest.raises(ThreshImportError, match="past the end"):
        utf16_to_code_points("ab", 3, "x")


def run_salsa(study):
    call_command(
        "import_thresh",
        str(FIXTURES / "salsa_format_example.json"),
        "--study",
        study.slug,
        "--rubric-map",
        str(FIXTURES / "salsa_map.yaml"),
    )


def test_a_salsa_shaped_file_imports_annotator_from_metadata_and_every_range(study):
    run_salsa(study)
    spans = list(Span.objects.filter(revision__assignment__batch__name="thresh"))
    raters = {s.revision.assignment.rater.username for s in spans}
    assert len(raters) == 2 and all(r.startswith("thresh-") for r in raters)
    by_rater: dict[str, list] = {}
    for s in spans:
        by_rater.setdefault(s.revision.assignment.rater.username, []).append(s)
    texts = sorted(
        sorted((s.question, s.text, s.link_text or "", s.answers.get("factual", "")) for s in group)
        for group in by_rater.values()
    )
    first = [  # annotator_1: a two-range insertion, a 2-by-2 substitution (paired in order)
        ("added_info", "a dummy", "", "yes"),
        ("added_info", "pill", "", "yes"),
        ("contradictions", "Attacks fell", "reduced attacks", ""),
        ("contradictions", "Grown-ups 🫁", "Adults", ""),
    ]
    second = [  # annotator_2: two summary ranges both linked to the one source range
        ("added_info", "a dummy pill", "", "no"),
        ("contradictions", "Attacks", "Drug A reduced attacks", ""),
        ("contradictions", "fell", "Drug A reduced attacks", ""),
    ]
    assert texts == sorted([first, second])
    for s in spans:  # offsets are code points into our own stored texts
        assert SUMMARY[s.start : s.end] == s.text


def test_linked_ranges_are_paired_in_order_and_none_is_dropped():
    from datasets.thresh import _pair_ranges

    a, b, c = (0, 1), (2, 3), (4, 5)
    x, y, z = (10, 11), (12, 13), (14, 15)
    assert _pair_ranges([a, b], [x, y]) == [(a, x), (b, y)]
    assert _pair_ranges([a, b, c], [x]) == [(a, x), (b, x), (c, x)]
    assert _pair_ranges([a, b, c], [x, y]) == [(a, x), (b, y), (c, y)]
    assert _pair_ranges([a], [x, y, z]) == [(a, x), (a, y), (a, z)]


def test_an_entry_without_any_annotator_is_refused(study, tmp_path):
    entries = json.loads((FIXTURES / "salsa_format_example.json").read_text(encoding="utf-8"))
    del entries[1]["metadata"]["annotator"]
    path = tmp_path / "t.json"
    path.write_text(json.dumps(entries), encoding="utf-8")
    with pytest.raises(CommandError, match=r"entry 2: no annotator \(annotator, user or metadata.annotator\)"):
        call_command(
            "import_thresh", str(path), "--study", study.slug, "--rubric-map", str(FIXTURES / "salsa_map.yaml")
        )
    assert not Span.objects.exists()


def test_the_query_count_does_not_grow_with_the_number_of_entries(study):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from annotate.models import Assignment, Summary
    from datasets.thresh import import_thresh
    from tests.factories import SummaryFactory

    source = Summary.objects.filter(study=study).first().source
    texts = [f"Summary number {i} says attacks fell." for i in range(12)]
    for text in texts:
        SummaryFactory(study=study, source=source, text=text)

    def entries(n):
        return [
            {
                "annotator": who,
                "target": text,
                "edits": [
                    {
                        "category": "insertion",
                        "output_idx": [[0, 7]],
                        "annotation": {"factuality": {"val": "factual"}, "explanation": "Added."},
                    }
                ],
            }
            for text in texts[:n]
            for who in ("Ann", "Bob")
        ]

    mapping = yaml.safe_load((FIXTURES / "factpico_map.yaml").read_text(encoding="utf-8"))

    def count(n, name):
        with CaptureQueriesContext(connection) as captured:
            result = import_thresh(study=study, entries=entries(n), rubric_map=mapping, batch_name=name)
        assert result.revisions == 2 * n and result.spans == 2 * n
        return len(captured.captured_queries)

    def withdraw(name):  # so the same annotators may import the same summaries again
        Assignment.objects.filter(batch__name=name).update(state=Assignment.State.WITHDRAWN)

    count(1, "warm-up")  # creates the two pseudonymous accounts and their memberships
    withdraw("warm-up")
    small = count(2, "small")
    withdraw("small")
    large = count(12, "large")
    assert large == small, (small, large)
