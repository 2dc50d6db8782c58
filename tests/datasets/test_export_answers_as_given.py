"""What the export says about answers: a tickbox question left unticked is an answer (no
row means not answered), a comparison is in the comparison tables and never a summary,
and the dataset card counts the raters who answered (not an adjudicator)."""

from __future__ import annotations

import json

import pytest

from annotate.models import Batch, Comparison, ConsensusAnswer, Study
from datasets.demo import PAIRWISE_STUDY, load_demo
from datasets.exporting import export_dataset
from tests.analysis.reports import rated_study


def read_jsonl(path):
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


@pytest.mark.django_db
def test_an_unticked_tickbox_question_is_exported_as_an_empty_answer(tmp_path):
    study, _ = rated_study(n_summaries=3, raters=("ra", "rb"))  # every rater ticks no failure mode
    export_dataset(study=study, out_dir=tmp_path / "out", formats=["jsonl"])
    ratings = read_jsonl(tmp_path / "out" / "jsonl" / "ratings.jsonl")
    ticked = [r for r in ratings if r["question"] == "failure_modes"]
    assert len(ticked) == 3 * 2 and all(r["value"] == [] for r in ticked)
    raters = read_jsonl(tmp_path / "out" / "jsonl" / "raters.jsonl")
    assert sum(r["n_answers"] for r in raters) == len(ratings)


@pytest.mark.django_db
def test_the_card_counts_the_raters_who_answered_not_an_adjudicator(tmp_path):
    study, admin = rated_study(n_summaries=2, raters=("ra", "rb"))
    batch = Batch.objects.create(study=study, name="main", seed=1)
    summary = study.summaries.first()
    ConsensusAnswer.objects.create(
        batch=batch, summary=summary, question="overall", value=3, decided_by=admin, rubric=study.rubric
    )
    export_dataset(study=study, out_dir=tmp_path / "out", formats=["jsonl"])
    raters = read_jsonl(tmp_path / "out" / "jsonl" / "raters.jsonl")
    assert [r["rater"] for r in raters] == ["adjudicator-01", "rater-01", "rater-02"]
    card = (tmp_path / "out" / "README.md").read_text(encoding="utf-8")
    assert "highlighted spans by 2 raters" in card


@pytest.mark.django_db
def test_a_pairwise_export_has_comparison_tables_and_no_pseudo_summaries(tmp_path):
    load_demo(password="x", with_answers=True)
    study = Study.objects.get(slug=PAIRWISE_STUDY)
    export_dataset(study=study, out_dir=tmp_path / "out", formats=["jsonl"])
    summaries = read_jsonl(tmp_path / "out" / "jsonl" / "summaries.jsonl")
    assert summaries and all(s["generator"] != Comparison.ITEM_GENERATOR for s in summaries)
    comparisons = read_jsonl(tmp_path / "out" / "jsonl" / "comparisons.jsonl")
    assert len(comparisons) == Comparison.objects.filter(study=study).count()
    assert not {c["comparison_key"] for c in comparisons} & {s["summary_key"] for s in summaries}
    card = (tmp_path / "out" / "README.md").read_text(encoding="utf-8")
    assert f"{len(summaries)} summaries of" in card and f"{len(comparisons)} comparisons" in card
