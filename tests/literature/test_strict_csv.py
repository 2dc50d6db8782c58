"""Every CSV reader is strict: a file whose quoted cell is never closed
(`q1,"Q?`, which Python's csv module and pandas read as a row with the cut text) is an
error naming the line the broken record starts on, and nothing is imported. The readers:
import_questions (the command and the study's import page), `agreement` and `correlate`."""

import io

import pytest
from django.core.management import CommandError, call_command

from literature.models import Question
from tests.factories import StudyFactory


@pytest.fixture
def study(db):
    return StudyFactory(slug="qs")


@pytest.mark.django_db
def test_import_questions_refuses_an_unclosed_quote_naming_its_line(study, tmp_path):
    path = tmp_path / "questions.csv"
    path.write_text('key,question\nq0,"Is it fine?"\nq1,"Q?\n', encoding="utf-8")
    with pytest.raises(CommandError) as caught:
        call_command("import_questions", str(path), "--study", "qs", stdout=io.StringIO())
    assert "line 3" in str(caught.value) and "never closed" in str(caught.value)
    assert not Question.objects.exists()


@pytest.mark.django_db
def test_an_unclosed_quote_in_a_middle_record_swallows_nothing(study, tmp_path):
    # The quote opened on line 2 runs on over the following lines to the end of the file.
    path = tmp_path / "questions.csv"
    path.write_text('key,question\nq1,"Q?\nq2,Another?\nq3,"Third?"\n', encoding="utf-8")
    with pytest.raises(CommandError, match="line 2"):
        call_command("import_questions", str(path), "--study", "qs", stdout=io.StringIO())
    assert not Question.objects.exists()


@pytest.mark.django_db
def test_a_well_quoted_multi_line_cell_is_still_read(study, tmp_path):
    path = tmp_path / "questions.csv"
    path.write_text('key,question\nq1,"First line,\nsecond line?"\n', encoding="utf-8")
    call_command("import_questions", str(path), "--study", "qs", stdout=io.StringIO())
    assert Question.objects.get().text == "First line,\nsecond line?"


def test_agreement_refuses_an_unclosed_quote_naming_its_line(tmp_path):
    path = tmp_path / "ratings.csv"
    path.write_text('item,rater,value\na,r1,3\na,r2,4\nb,r1,"2\nb,r2,2\n', encoding="utf-8")
    with pytest.raises(CommandError) as caught:
        call_command("agreement", str(path), stdout=io.StringIO())
    assert "line 4" in str(caught.value) and "never closed" in str(caught.value)


def test_correlate_refuses_an_unclosed_quote_naming_its_line(tmp_path):
    path = tmp_path / "scores.csv"
    path.write_text('human,rouge\n1,0.5\n2,0.7\n3,"0.9\n', encoding="utf-8")
    with pytest.raises(CommandError) as caught:
        call_command("correlate", str(path), "--human", "human", "--metric", "rouge", stdout=io.StringIO())
    assert "line 4" in str(caught.value) and "never closed" in str(caught.value)
