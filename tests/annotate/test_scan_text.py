"""`manage.py scan_text` finds stored text that breaks pages and exports (a lone
surrogate, a NUL, bytes that are not UTF-8) and exits non-zero; on a clean database it
says so and exits zero. The bad rows are planted with raw SQL, as the old bug (or
another tool) left them: no entry point of the platform accepts such text any more."""

from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.db import connection

from annotate.models import Rating, Rationale
from annotate.services.ratings import submit_rating
from tests.conftest import GOOD_ANSWERS


def scan() -> tuple[str, CommandError | None]:
    out = StringIO()
    try:
        call_command("scan_text", stdout=out)
    except CommandError as exc:
        return out.getvalue(), exc
    return out.getvalue(), None


@pytest.fixture
def rated(assignment_a, rater_a):
    submit_rating(
        assignment=assignment_a,
        rater=rater_a,
        answers={**GOOD_ANSWERS, "overall": 3},
        version=assignment_a.version,
    )
    return assignment_a


@pytest.mark.django_db
def test_a_clean_database_passes(rated):
    output, error = scan()
    assert error is None
    assert "No bad text" in output


@pytest.mark.django_db
def test_planted_bad_text_is_reported_with_table_row_and_field(rated):
    if connection.vendor != "sqlite":
        pytest.skip("PostgreSQL refuses lone surrogates, NULs and invalid UTF-8, so no bad row can be planted")
    feedback = Rating.objects.get(revision__assignment=rated, question="feedback")
    overall = Rating.objects.get(revision__assignment=rated, question="overall")
    rationale = Rationale.objects.create(rating=overall, text="fine")
    summary = rated.summary
    with connection.cursor() as cursor:
        # What the bug stored: the JSON escape of a lone surrogate in a rater's answer.
        cursor.execute("UPDATE annotate_rating SET value = %s WHERE id = %s", ['"Cite it\\ud83d"', feedback.pk])
        cursor.execute("UPDATE annotate_rationale SET text = %s WHERE id = %s", ["a\x00b", rationale.pk])
        # Bytes that are not UTF-8 (a surrogate encoded as if it were a character).
        cursor.execute("UPDATE annotate_summary SET text = CAST(X'4F6BEDA0BD' AS TEXT) WHERE id = %s", [summary.pk])

    output, error = scan()

    assert error is not None and "3 stored value(s)" in str(error)
    lines = output.strip().splitlines()
    assert len(lines) == 3, output
    assert any(
        line.startswith(f"annotate_rating row {feedback.pk} (uuid {feedback.uuid}): value ")
        and "lone surrogate (U+D83D)" in line
        for line in lines
    ), output
    assert any(line.startswith(f"annotate_rationale row {rationale.pk}: text ") and "NUL" in line for line in lines), (
        output
    )
    assert any(
        line.startswith(f"annotate_summary row {summary.pk} (uuid {summary.uuid}): text ") and "not UTF-8" in line
        for line in lines
    ), output
