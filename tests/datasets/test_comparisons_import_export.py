"""Comparison items in the JSON Lines import, and the dataset export's comparisons tables
with a round trip."""

import json

import pytest
from django.core.management import CommandError, call_command

from annotate.models import Assignment, Comparison, Span, Study
from annotate.services import batches
from annotate.services.ratings import submit_rating
from datasets.importing import import_records
from tests.datasets.test_export import all_files, export, jsonl_rows
from tests.datasets.test_import_dataset import normalised_answers
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db(transaction=True)


def records():
    lines = [{"type": "study", "slug": "pw", "title": "Pairwise", "rubric": "pairwise", "licence": "CC-BY-4.0"}]
    for s in range(2):
        lines.append(
            {"type": "source", "study": "pw", "key": f"SRC{s}", "text": f"Drug A lowered pressure in trial {s}.",
             "licence": "CC BY 4.0"}
        )  # fmt: skip
        for g in ("alpha", "beta", "gamma"):
            lines.append(
                {"type": "summary", "study": "pw", "source": f"SRC{s}", "key": f"{g}-{s}", "generator": g,
                 "text": f"{g.title()} says drug A helped ({s})."}
            )  # fmt: skip
    lines.append(
        {"type": "comparison", "study": "pw", "key": "c0", "source": "SRC0", "summaries": ["alpha-0", "beta-0"]}
    )
    return lines


def as_lines(rows):
    return [json.dumps(r) + "\n" for r in rows]


def test_jsonl_import_makes_comparisons_idempotently():
    result = import_records(lines=as_lines(records()))
    assert result.created["comparison"] == 1
    comparison = Comparison.objects.get(key="c0")
    assert [m.summary.key for m in comparison.member_rows.order_by("index")] == ["alpha-0", "beta-0"]
    again = import_records(lines=as_lines(records()))
    assert again.unchanged["comparison"] == 1 and Comparison.objects.count() == 1


@pytest.mark.parametrize(
    "change, field, message",
    [
        ({"summaries": ["alpha-0"]}, "summaries", "at least two"),
        ({"summaries": ["alpha-0", "nope"]}, "summaries", "no summary 'nope'"),
        ({"summaries": ["alpha-0", "beta-1"]}, "summaries", "is not of source"),
        ({"colour": "red"}, "colour", "not a known field"),
    ],
)
def test_bad_comparison_line_names_line_and_field_and_imports_nothing(change, field, message):
    rows = records()
    rows[-1] = {**rows[-1], **change}
    with pytest.raises(Exception) as error:
        import_records(lines=as_lines(rows))
    text = str(error.value)
    assert f"line {len(rows)}" in text and field in text and message in text
    assert not Study.objects.exists() and not Comparison.objects.exists()


def test_changing_a_comparisons_summaries_is_refused():
    import_records(lines=as_lines(records()))
    rows = records()
    rows[-1] = {**rows[-1], "summaries": ["alpha-0", "gamma-0"]}
    with pytest.raises(Exception, match="exists with other summaries"):
        import_records(lines=as_lines(rows))


def test_export_has_positions_preferences_rationales_spans_and_round_trips(tmp_path):
    import_records(lines=as_lines(records()))
    study = Study.objects.get(slug="pw")
    raters = [UserFactory(username="r1"), UserFactory(username="r2")]
    batches.create_batch(study=study, name="pairs", raters=raters, design="comparisons", seed=2, k=2)
    keys = {str(s.uuid): s.key for s in study.summaries.all()}
    for i, a in enumerate(Assignment.objects.filter(study=study).order_by("pk")):
        left, right = a.shown_order
        value = {"preferred": right, "strength": "slightly"} if i % 3 else {"preferred": "tie"}
        text = study.summaries.get(uuid=left).text
        submit_rating(
            assignment=a,
            rater=a.rater,
            answers={
                "overall": value,
                "faithfulness": {"preferred": left},
                "completeness": {"preferred": "tie"},
                "problems": [
                    {"summary": left, "start": 0, "end": 5, "text": text[:5], "answers": {"problem": "misleading"}}
                ],
            },
            rationales={"overall": f"reason {i}"},
            version=a.version,
        )
    first = export("pw", tmp_path / "first").out_dir
    comparisons = jsonl_rows(first, "comparisons")
    assert len(comparisons) == 6  # two sources x three pairs; c0 from the file is reused for its pair
    answers = jsonl_rows(first, "comparison_answers")
    assert len(answers) == 12 * 4
    overall = [r for r in answers if r["question"] == "overall"]
    for row in overall:
        assert row["left_key"] in keys.values() and row["right_key"] in keys.values()
        if row["preferred_key"] != "tie":
            assert row["preferred_side"] == "right" and row["preferred_key"] == row["right_key"]
            assert row["strength"] == "slightly"
        assert row["rationale"].startswith("reason ")
    problems = [r for r in answers if r["question"] == "problems"]
    assert all(r["spans"][0]["summary_key"] == r["left_key"] for r in problems)
    card = (first / "README.md").read_text(encoding="utf-8")
    assert "`comparison_answers`" in card and "`comparisons`" in card

    before = normalised_answers(study)

    def orders():
        return sorted((a.summary.key, tuple(a.shown_order)) for a in Assignment.objects.select_related("summary"))

    shown = orders()
    assert len(shown) == 12 and all(len(o) == 2 for _k, o in shown)
    call_command("flush", interactive=False)
    call_command("import_dataset", str(first))
    study = Study.objects.get(slug="pw")
    assert normalised_answers(study) == before
    assert Comparison.objects.count() == 6
    assert Span.objects.filter(summary_uuid__isnull=False).count() == 12
    assert orders() == shown
    again = export("pw", tmp_path / "second").out_dir
    assert all_files(again) == all_files(first)
    with pytest.raises(CommandError):
        call_command("import_dataset", str(first))
