"""import_questions: the PubMedRS-200 layout and ours, CSV and JSON Lines, all or nothing."""

import csv
import io
import json
from datetime import date

import pytest
from django.core.management import CommandError, call_command

from literature.models import Question
from tests.factories import StudyFactory

PUBMEDRS_HEADER = [
    "specialty",
    "SubTopic",
    "Title",
    "Abstract",
    "Introduction",
    "Methods",
    "Results",
    "Conclusion",
    "PMID",
    "Ref_PMIDs",
    "Ref_DOIs",
    "questions",
    "PublishedDate",
    "HumanQuestions",
    "HumanAnswer",
]


def pubmedrs_row(**cells):
    """A row in the benchmark's layout, written here (not copied from the benchmark)."""
    row = {
        "specialty": "Cardiology",
        "SubTopic": "Atrial fibrillation",
        "Title": "Anticoagulants after stroke: a systematic review",
        "Abstract": "",
        "Introduction": "",
        "Methods": "",
        "Results": "",
        "Conclusion": "Early anticoagulation was safe.",
        "PMID": "36000001",
        "Ref_PMIDs": "['31000001', '32000002', '33000003']",
        "Ref_DOIs": "['10.1000/a1', '10.1000/b2']",
        "questions": "In adults with atrial fibrillation and a recent stroke, is early anticoagulation safe?",
        "PublishedDate": "2022-06-15",
        "HumanQuestions": "Is starting anticoagulants early after stroke safe?",
        "HumanAnswer": "Yes: early anticoagulation did not increase bleeding.",
    }
    row.update(cells)
    return row


def write_csv(path, rows, header=PUBMEDRS_HEADER):
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=header, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    path.write_text(out.getvalue(), encoding="utf-8")
    return path


@pytest.fixture
def study(db):
    return StudyFactory(slug="qs")


def run(path):
    out = io.StringIO()
    call_command("import_questions", str(path), "--study", "qs", stdout=out)
    return out.getvalue()


def test_the_pubmedrs_200_layout(study, tmp_path):
    rows = [
        pubmedrs_row(),
        # Text columns absent from the file's content (empty), a multi-line quoted
        # question, integers in the reference list, a review without HumanAnswer.
        pubmedrs_row(
            PMID="36000002",
            Ref_PMIDs="[31000009, '31000010']",
            Ref_DOIs="",
            questions="Does metformin\nlower HbA1c?",
            HumanAnswer="",
            PublishedDate="2021/01/31",
        ),
        pubmedrs_row(PMID="36000003", questions="", HumanQuestions="Does exercise help depression?"),
    ]
    message = run(write_csv(tmp_path / "pubmedrs.csv", rows))
    assert "question: 3 created, 0 updated, 0 unchanged" in message
    first = Question.objects.get(study=study, key="pmid-36000001")
    assert first.text == rows[0]["questions"]
    assert first.reference_ids == ["31000001", "32000002", "33000003"]
    assert first.exclude_ids == ["36000001"]  # the review itself
    assert first.published_on == date(2022, 6, 15)
    assert first.gold_answer == rows[0]["HumanAnswer"]
    assert first.metadata["specialty"] == "Cardiology"
    assert first.metadata["reference_dois"] == ["10.1000/a1", "10.1000/b2"]
    assert "Conclusion" not in json.dumps(first.metadata)  # the review's text is not stored
    second = Question.objects.get(key="pmid-36000002")
    assert second.text == "Does metformin\nlower HbA1c?"
    assert second.reference_ids == ["31000009", "31000010"]
    assert second.published_on == date(2021, 1, 31) and second.gold_answer == ""
    assert Question.objects.get(key="pmid-36000003").text == "Does exercise help depression?"
    # Idempotent: the same file again changes nothing; a changed answer updates in place.
    assert "0 created, 0 updated, 3 unchanged" in run(tmp_path / "pubmedrs.csv")
    rows[0]["HumanAnswer"] = "Yes."
    assert "0 created, 1 updated, 2 unchanged" in run(write_csv(tmp_path / "pubmedrs.csv", rows))
    assert Question.objects.get(key="pmid-36000001").gold_answer == "Yes."


def test_the_benchmark_layout_with_only_its_needed_columns(study, tmp_path):
    header = ["PMID", "Ref_PMIDs", "questions", "PublishedDate"]
    row = {"PMID": "1", "Ref_PMIDs": "['2']", "questions": "Q?", "PublishedDate": ""}
    run(write_csv(tmp_path / "short.csv", [row], header))
    question = Question.objects.get(key="pmid-1")
    assert question.published_on is None and question.reference_ids == ["2"]


def test_our_layout_in_json_lines_and_csv(study, tmp_path):
    lines = [
        {
            "key": "q1",
            "question": "Does drug A reduce attacks?",
            "gold_answer": "Yes.",
            "references": ["PMC100", "12345"],
            "exclude": ["999"],
            "published": "2020-05-01",
            "metadata": {"origin": "hand"},
        },
        {"key": "q2", "question": "Is B better than C?"},
    ]
    path = tmp_path / "q.jsonl"
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n", encoding="utf-8")
    run(path)
    q1 = Question.objects.get(key="q1")
    assert (q1.reference_ids, q1.exclude_ids, q1.published_on) == (["PMC100", "12345"], ["999"], date(2020, 5, 1))
    assert q1.metadata == {"origin": "hand"}
    assert Question.objects.get(key="q2").reference_ids == []
    csv_path = write_csv(
        tmp_path / "ours.csv",
        [{"key": "q3", "question": "Q3?", "references": "PMC1; PMC2", "exclude": "['7']", "published": ""}],
        ["key", "question", "references", "exclude", "published"],
    )
    run(csv_path)
    q3 = Question.objects.get(key="q3")
    assert (q3.reference_ids, q3.exclude_ids) == (["PMC1", "PMC2"], ["7"])


@pytest.mark.parametrize(
    ("rows", "expected"),
    [
        ([pubmedrs_row(), pubmedrs_row(PMID="x1")], 'line 3: field "PMID": must be the review\'s PubMed id'),
        ([pubmedrs_row(), pubmedrs_row(PMID="36000002", Ref_PMIDs="__import__('os')")], 'line 3: field "Ref_PMIDs"'),
        ([pubmedrs_row(), pubmedrs_row(PMID="36000002", Ref_PMIDs="[{'a': 1}]")], 'line 3: field "Ref_PMIDs"'),
        ([pubmedrs_row(), pubmedrs_row(PMID="36000002", PublishedDate="last year")], 'line 3: field "PublishedDate"'),
        ([pubmedrs_row(), pubmedrs_row()], 'line 3: field "PMID": duplicates line 2'),
        ([pubmedrs_row(), pubmedrs_row(PMID="5", questions="", HumanQuestions="")], 'line 3: field "questions"'),
    ],
)
def test_a_bad_pubmedrs_row_is_named_and_nothing_is_imported(study, tmp_path, rows, expected):
    with pytest.raises(CommandError) as caught:
        run(write_csv(tmp_path / "bad.csv", rows))
    assert expected in str(caught.value) and "Nothing was imported" in str(caught.value)
    assert not Question.objects.exists()


def test_a_multi_line_cell_does_not_shift_the_line_named(study, tmp_path):
    rows = [pubmedrs_row(questions="first\nsecond\nthird"), pubmedrs_row(PMID="bad")]
    with pytest.raises(CommandError, match='line 5: field "PMID"'):
        run(write_csv(tmp_path / "bad.csv", rows))


@pytest.mark.parametrize(
    ("lines", "expected"),
    [
        ([{"key": "q1", "question": "Q?"}, {"key": "q2"}], 'line 2: field "question": is required'),
        ([{"key": "q1", "question": "Q?", "references": "123"}], 'line 1: field "references": must be a list'),
        ([{"key": "q1", "question": "Q?", "colour": "red"}], 'line 1: field "colour": is not a known field'),
        ([{"key": "q 1", "question": "Q?"}], 'line 1: field "key"'),
        ([{"key": "q1", "question": "Q?", "published": "2020-13-40"}], 'line 1: field "published"'),
        ([{"key": "q1", "question": "Q?"}, {"key": "q1", "question": "Again?"}], 'line 2: field "key": duplicates'),
    ],
)
def test_a_bad_json_line_is_named_and_nothing_is_imported(study, tmp_path, lines, expected):
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n", encoding="utf-8")
    with pytest.raises(CommandError) as caught:
        run(path)
    assert expected in str(caught.value), str(caught.value)
    assert not Question.objects.exists()


def test_an_unknown_csv_column_and_an_unknown_study_are_refused(study, tmp_path):
    path = write_csv(
        tmp_path / "odd.csv", [{"key": "q", "question": "Q?", "answer": "A"}], ["key", "question", "answer"]
    )
    with pytest.raises(CommandError, match='line 1: field "answer": is not a column of either layout'):
        run(path)
    with pytest.raises(CommandError, match="no study .nope."):
        call_command("import_questions", str(path), "--study", "nope")
    assert not Question.objects.exists()


def published_style_rows():
    """Rows as PubMedRS-200 is published: every PublishedDate month/day/year without
    leading zeros, the review's text columns filled (values written here in that style)."""
    return [
        pubmedrs_row(PMID="34700001", PublishedDate="11/1/2021", Abstract="Background: ...", Results="..."),
        pubmedrs_row(PMID="32100002", PublishedDate="3/15/2020", Methods="We searched MEDLINE."),
        pubmedrs_row(PMID="31800003", PublishedDate="12/31/2019"),
    ]


def test_month_day_year_dates_as_pubmedrs_200_writes_them(study, tmp_path):
    message = run(write_csv(tmp_path / "PubMedRS-200.csv", published_style_rows()))
    assert "question: 3 created" in message
    assert "dates read as month/day/year (3)" in message
    days = dict(Question.objects.values_list("key", "published_on"))
    assert days == {
        "pmid-34700001": date(2021, 11, 1),
        "pmid-32100002": date(2020, 3, 15),
        "pmid-31800003": date(2019, 12, 31),
    }


def test_the_summary_names_each_date_layout_it_read(study, tmp_path):
    rows = [
        pubmedrs_row(PMID="1", PublishedDate="2022-06-15"),
        pubmedrs_row(PMID="2", PublishedDate="6/15/2022"),
        pubmedrs_row(PMID="3", PublishedDate="1/2/2022"),
        pubmedrs_row(PMID="4", PublishedDate=""),
    ]
    message = run(write_csv(tmp_path / "mixed.csv", rows))
    assert "dates read as ISO (year-month-day) (1), month/day/year (2)" in message
    days = dict(Question.objects.values_list("key", "published_on"))
    # 1/2/2022 is the second of January (month first), never the first of February.
    assert days == {
        "pmid-1": date(2022, 6, 15),
        "pmid-2": date(2022, 6, 15),
        "pmid-3": date(2022, 1, 2),
        "pmid-4": None,
    }
    path = tmp_path / "none.jsonl"
    path.write_text(json.dumps({"key": "q9", "question": "Q?"}) + "\n", encoding="utf-8")
    assert "no dates" in run(path)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        # Day first is not month/day/year: the 31st month does not exist.
        ("31/12/2021", "'31/12/2021' is not a day in the month/day/year layout"),
        ("2/30/2021", "'2/30/2021' is not a day in the month/day/year layout"),
        ("11/1/21", "must be a date such as 2021-03-15 or 3/15/2021"),
        ("2021-02-30", "is not a day in the ISO (year-month-day) layout"),
    ],
)
def test_a_date_in_no_accepted_layout_is_named(study, tmp_path, value, expected):
    rows = [pubmedrs_row(PMID="1", PublishedDate="11/1/2021"), pubmedrs_row(PMID="2", PublishedDate=value)]
    with pytest.raises(CommandError) as caught:
        run(write_csv(tmp_path / "bad.csv", rows))
    assert 'line 3: field "PublishedDate"' in str(caught.value) and expected in str(caught.value)
    assert not Question.objects.exists()


def create(path, *extra):
    out = io.StringIO()
    call_command("import_questions", str(path), "--study", "pubmedrs", "--create", *extra, stdout=out)
    return out.getvalue()


@pytest.mark.django_db
def test_create_makes_the_study_it_imports_into(tmp_path):
    from annotate.models import Study

    path = write_csv(tmp_path / "PubMedRS-200.csv", published_style_rows())
    message = create(path, "--rubric", "clinfo", "--title", "PubMedRS-200")
    assert "created study 'pubmedrs' (rubric clinfo); question: 3 created" in message
    study = Study.objects.get(slug="pubmedrs")
    assert (study.title, study.rubric.key) == ("PubMedRS-200", "clinfo")
    assert Question.objects.filter(study=study).count() == 3
    # Again: the study is there, nothing new.
    again = create(path, "--rubric", "clinfo", "--title", "PubMedRS-200")
    assert "created study" not in again and "0 created, 0 updated, 3 unchanged" in again
    # The same slug with another rubric is refused.
    with pytest.raises(CommandError, match="already uses rubric 'clinfo'"):
        create(path, "--rubric", "factpico", "--title", "x")


@pytest.mark.django_db
def test_a_refused_file_leaves_no_created_study_behind(tmp_path):
    from annotate.models import Study

    rows = [pubmedrs_row(PMID="1"), pubmedrs_row(PMID="2", PublishedDate="someday")]
    with pytest.raises(CommandError, match='line 3: field "PublishedDate"'):
        create(write_csv(tmp_path / "bad.csv", rows), "--title", "T")
    good = write_csv(tmp_path / "good.csv", [pubmedrs_row(PMID="1")])
    with pytest.raises(CommandError, match="needs a title"):
        create(good)
    with pytest.raises(CommandError, match="no such file|no rubric|nope"):
        create(good, "--rubric", "nope", "--title", "T")
    assert not Study.objects.exists() and not Question.objects.exists()
    with pytest.raises(CommandError, match="create it with --create"):
        call_command("import_questions", str(good), "--study", "pubmedrs")


def test_a_pandas_index_column_and_a_byte_order_mark_are_ignored(study, tmp_path):
    """A benchmark CSV saved by pandas starts with an unnamed index column; one saved by a
    spreadsheet may start with a byte-order mark."""
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=["", *PUBMEDRS_HEADER], lineterminator="\n")
    writer.writeheader()
    for i, row in enumerate(published_style_rows()):
        writer.writerow({"": str(i), **row})
    path = tmp_path / "indexed.csv"
    path.write_bytes(b"\xef\xbb\xbf" + out.getvalue().encode("utf-8"))
    message = run(path)
    assert "question: 3 created" in message and "dates read as month/day/year (3)" in message
    assert Question.objects.get(key="pmid-32100002").published_on == date(2020, 3, 15)
