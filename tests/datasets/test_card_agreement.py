"""The dataset card's agreement figures are the analysis app's study report for the same
answers (docs/export-format.md, "Agreement in the card"), including when one rater
answered the same summary in two batches: the newest submitted answer counts, in both."""

from datetime import UTC, datetime, timedelta

import krippendorff
import pytest

from analysis.services import compute_study_report
from annotate.models import Assignment, Batch, Revision, Study
from annotate.selectors.frames import ratings_frame
from annotate.services.ratings import submit_rating
from annotate.services.rubrics import load_rubric, read_rubric_file
from datasets.exporting import export_dataset
from tests.datasets.test_export import rate_demo
from tests.factories import AssignmentFactory, StudyFactory, SummaryFactory, UserFactory

T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)


def fmt(value) -> str:
    return "–" if value is None else f"{value:.4f}"


def card_rows(folder) -> dict[str, list[str]]:
    """question -> the cells of its row in the card's agreement table."""
    card = (folder / "README.md").read_text(encoding="utf-8")
    section = card.split("## Agreement", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        if line.startswith("| `"):
            cells = [c.strip() for c in line.strip("|").split("|")]
            rows[cells[0].strip("`")] = cells[1:]
    return rows


def report_rows(study: Study) -> dict[str, list[str]]:
    """The same cells, from the analysis app's report (the code path of the report page)."""
    report = compute_study_report(study=study, n_resamples=10)
    rows = {}
    # The card gives agreement per scale question; the report also per choice and tickbox option.
    for entry in (e for e in report["agreement"] if e["level"] == "ordinal"):
        r = entry["report"]
        assert r is not None, entry["error"]
        rows[entry["question"]] = [
            str(r["n_items_shared"]),
            str(r["n_items"]),
            str(r["n_raters"]),
            fmt(r["percent_agreement"]),
            fmt(r["fleiss_kappa"]),
            fmt(r["randolph_kappa"]),
            fmt(r["gwet_ac1"]),
            fmt(r["pabak"]),
            fmt(r["krippendorff_alpha"]["ordinal"]),
        ]
    return rows


def answer(assignment, overall: int, at: datetime) -> None:
    assignment.refresh_from_db()
    submit_rating(
        assignment=assignment,
        rater=assignment.rater,
        answers={"overall": overall, "failure_modes": [], "feedback": ""},
        version=assignment.version,
    )
    Revision.objects.filter(assignment=assignment).update(submitted_at=at)


def two_batch_study(*, second_answer_at: datetime):
    """Raters A and B rate four summaries in batch "zeta"; A rates two of them again in
    batch "alpha" with other values, submitted at `second_answer_at`. Batch names sort
    the other way round from time, so a rule by batch name and a rule by time differ."""
    study = StudyFactory()
    rater_a, rater_b = UserFactory(username="a"), UserFactory(username="b")
    zeta = Batch.objects.create(study=study, name="zeta", seed=1)
    alpha = Batch.objects.create(study=study, name="alpha", seed=1)
    summaries = [SummaryFactory(source__study=study, key=f"S{i}") for i in range(1, 5)]
    first_a, first_b, again_a = [5, 4, 3, 2], [2, 1, 3, 1], [2, 2]
    for i, summary in enumerate(summaries):
        answer(AssignmentFactory(summary=summary, rater=rater_a, batch=zeta), first_a[i], T0)
        answer(AssignmentFactory(summary=summary, rater=rater_b, batch=zeta), first_b[i], T0)
    for i, summary in enumerate(summaries[:2]):
        # Stored before one live assignment per (summary, rater) was enforced: the upgrade
        # withdrew the older one (annotate 0006), and its answers still count by time.
        Assignment.objects.filter(summary=summary, rater=rater_a, batch=zeta).update(state="withdrawn")
        answer(AssignmentFactory(summary=summary, rater=rater_a, batch=alpha), again_a[i], second_answer_at)
    return study, rater_a


@pytest.mark.django_db
def test_card_agreement_equals_the_report_when_a_rater_answered_a_summary_in_two_batches(tmp_path):
    study, _ = two_batch_study(second_answer_at=T0 + timedelta(hours=1))
    export_dataset(study=study, out_dir=tmp_path / "out", formats=["jsonl"])
    card = card_rows(tmp_path / "out")
    assert card["overall"] == report_rows(study)["overall"]
    # Independently: A's newest answers are 2, 2, 3, 2 (the alpha batch for S1 and S2),
    # B's are 2, 1, 3, 1. Two of four items agree, and Krippendorff's alpha is the
    # krippendorff library's on that matrix.
    newest = [[2, 2, 3, 2], [2, 1, 3, 1]]
    alpha = krippendorff.alpha(reliability_data=newest, level_of_measurement="ordinal", value_domain=[1, 2, 3, 4, 5])
    assert card["overall"][:4] == ["4", "4", "2", fmt(0.5)]  # both raters answered all four items
    assert card["overall"][8] == fmt(alpha)


@pytest.mark.django_db
def test_a_tie_in_time_goes_to_the_batch_whose_name_sorts_last_in_the_card_and_the_report(tmp_path):
    study, rater_a = two_batch_study(second_answer_at=T0)  # both of A's answers at the same instant
    frame = ratings_frame(study=study)
    mine = frame[(frame["rater"] == str(rater_a.pk)) & (frame["question"] == "overall")]
    assert sorted(mine["score"]) == [2.0, 3.0, 4.0, 5.0]  # zeta's answers: "zeta" sorts after "alpha"
    export_dataset(study=study, out_dir=tmp_path / "out", formats=["jsonl"])
    card = card_rows(tmp_path / "out")
    assert card["overall"] == report_rows(study)["overall"]
    oldest = [[5, 4, 3, 2], [2, 1, 3, 1]]
    alpha = krippendorff.alpha(reliability_data=oldest, level_of_measurement="ordinal", value_domain=[1, 2, 3, 4, 5])
    assert card["overall"][8] == fmt(alpha)


@pytest.mark.django_db
def test_card_agreement_equals_the_report_for_every_scale_question_of_the_rated_demo(tmp_path):
    """Both demo studies: LitSumm with a re-rating round and raters who rated some
    summaries in two assignments; FactPICO with per-finding questions, and here with
    N/A counted as a category for one question (the comparator is N/A in some answers)."""
    from datasets.demo import DEMO_STUDY, FACTPICO_STUDY

    rate_demo()
    factpico = Study.objects.get(slug=FACTPICO_STUDY)
    raw = read_rubric_file_of(factpico)
    for question in raw["questions"]:
        if question["key"] == "comparator":
            question["na"] = {**question["na"], "analysis": "category"}
    factpico.rubric = load_rubric(definition=raw)
    factpico.save()
    for slug, questions in ((DEMO_STUDY, {"overall"}), (FACTPICO_STUDY, {"population", "comparator", "evidence"})):
        study = Study.objects.get(slug=slug)
        export_dataset(study=study, out_dir=tmp_path / slug, formats=["jsonl"])
        card, report = card_rows(tmp_path / slug), report_rows(study)
        assert questions <= set(card), card
        assert card == report, slug


def read_rubric_file_of(study: Study) -> dict:
    from annotate.services.rubrics import builtin_rubric_path

    return read_rubric_file(builtin_rubric_path(study.rubric.key))
