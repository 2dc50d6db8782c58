"""The qualification attempts in a dataset export (docs/export-format.md): by pseudonym,
with the rule they were scored under; qualification answers stay out of the ratings that
count, as calibration answers do."""

import pytest

from annotate.services.adjudication import record_expected_answer
from annotate.services.batches import create_batch
from annotate.services.qualification import allow_qualification_retry, set_qualification_rule
from annotate.services.ratings import submit_rating
from tests.datasets.test_export import export, jsonl_rows
from tests.factories import SummaryFactory


def answer(qual, rater, score):
    a = qual.assignments.get(rater=rater)
    a.refresh_from_db()
    submit_rating(assignment=a, rater=rater, answers={"overall": score}, version=a.version)


@pytest.mark.django_db
def test_attempts_are_exported_by_pseudonym_with_their_rule(tmp_path, study, rater_a, rater_b, admin_user):
    gold = SummaryFactory(source__study=study, key="gold")
    SummaryFactory(source__study=study, key="main")
    record_expected_answer(study=study, summary=gold, purpose="gold", answers={"overall": 4})
    qual = create_batch(
        study=study,
        name="screen",
        kind="qualification",
        raters=[rater_a, rater_b],
        design="k_raters",
        seed=1,
        gold=[gold],
    )
    set_qualification_rule(
        study=study, threshold=1.0, questions=["overall"], tolerances={"overall": 1}, attempts_allowed=1
    )
    answer(qual, rater_b, 3)  # first to submit: rater-01; |3-4| = 1, a pass
    answer(qual, rater_a, 1)  # rater-02; |1-4| = 3, a fail
    allow_qualification_retry(study=study, rater=rater_a, granted_by=admin_user)
    answer(qual, rater_a, 5)  # a pass
    main = create_batch(study=study, name="main", raters=[rater_a], design="k_raters", k=1, seed=2)
    answer(main, rater_a, 2)

    out = tmp_path / "export"
    export(study.slug, out)
    rows = jsonl_rows(out, "qualification_attempts")
    assert [
        (r["rater"], r["attempt"], r["matched"], r["compared"], r["passed"], r["retries_allowed"]) for r in rows
    ] == [
        ("rater-01", 1, 1, 1, True, 0),
        ("rater-02", 1, 0, 1, False, 1),
        ("rater-02", 2, 1, 1, True, 1),
    ]
    assert {r["rule_version"] for r in rows} == {1}
    assert rows[0]["rule"]["tolerances"] == {"overall": 1}
    text = (out / "jsonl" / "qualification_attempts.jsonl").read_text()
    assert "rater_a" not in text and "rater_b" not in text
    # The ratings that count: the main batch's only; the qualification's with calibration.
    # (The rubric's tickbox question, left unticked, is an answer of its own: an empty list.)
    ratings = jsonl_rows(out, "ratings")
    assert [(r["batch"], r["question"], r["value"]) for r in ratings] == [
        ("main", "failure_modes", []),
        ("main", "overall", 2),
    ]
    assert [b["batch"] for b in jsonl_rows(out, "batches")] == ["main"]
    with_pilots = tmp_path / "with-pilots"
    export(study.slug, with_pilots, include_calibration=True)
    assert sorted({r["batch"] for r in jsonl_rows(with_pilots, "ratings")}) == ["main", "screen"]
