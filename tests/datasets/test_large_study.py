"""make_large_study at a small size: the counts, k, the adjudicated share, answers the rubric
accepts as a submit, and the report and the export running on it."""

from collections import Counter

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command

from analysis import services
from analysis.models import AnalysisResult
from annotate.models import Assignment, Batch, ConsensusAnswer, Rating, Revision, Span, Study, Summary
from annotate.rubrics import AnswerContext
from annotate.selectors.contents import rubric_definition
from annotate.selectors.queue import revision_answers
from datasets.exporting import export_dataset
from datasets.large_study import SYSTEMS

pytestmark = pytest.mark.django_db


def make(slug="tiny", sources=12, raters=5, seed=3):
    call_command(
        "make_large_study", "--slug", slug, "--sources", str(sources), "--raters", str(raters), "--seed", str(seed)
    )
    return Study.objects.get(slug=slug)


def test_the_study_has_its_sizes_every_item_rated_by_three_and_a_third_adjudicated(capsys):
    study = make()
    assert "tiny: 12 sources, 36 summaries, 5 raters, 108 submitted assignments" in capsys.readouterr().out
    assert study.rubric.key == "evidence-summary"
    assert len(rubric_definition(study.rubric).questions) == 10
    assert Counter(Summary.objects.filter(study=study).values_list("generator", flat=True)) == dict.fromkeys(SYSTEMS, 6)
    batch = Batch.objects.get(study=study)
    assert batch.raters_per_item == 3
    assignments = Assignment.objects.filter(batch=batch)
    assert set(assignments.values_list("state", flat=True)) == {Assignment.State.SUBMITTED}
    per_item = Counter(assignments.values_list("summary_id", flat=True))
    assert set(per_item.values()) == {3} and len(per_item) == 36
    assert assignments.values("summary_id", "rater_id").distinct().count() == 108
    per_rater = Counter(assignments.values_list("rater_id", flat=True))
    assert len(per_rater) == 5 and max(per_rater.values()) - min(per_rater.values()) <= 1
    adjudicated = set(ConsensusAnswer.objects.filter(batch=batch).values_list("summary_id", flat=True))
    assert len(adjudicated) == 12  # a third of 36
    assert adjudicated <= set(per_item)
    assert Span.objects.filter(revision__assignment__batch=batch).exists()
    assert Rating.objects.filter(revision__assignment__batch=batch).count() >= 108 * 7  # seven are required


def test_every_answer_is_a_submitted_revision_the_rubric_accepts_as_final():
    study = make()
    definition = rubric_definition(study.rubric)
    revisions = Revision.objects.filter(assignment__study=study).select_related("assignment__summary__source")
    assert revisions.count() == 108
    for revision in revisions.prefetch_related("ratings__rationale", "spans"):
        assert revision.status == Revision.Status.SUBMITTED and revision.submitted_at is not None
        assert revision.assignment.submitted_at == revision.submitted_at
        summary = revision.assignment.summary
        answers, rationales = revision_answers(revision)
        context = AnswerContext(summary_text=summary.text, source_text=summary.source.text)
        definition.validate(answers, rationales, final=True, context=context)  # raises if not


def test_the_same_seed_gives_the_same_texts():
    def texts(slug):
        return sorted(Summary.objects.filter(study__slug=slug).values_list("key", "text", "generator", "source__text"))

    make("one", seed=7)
    make("two", seed=7)
    make("three", seed=8)
    assert texts("one") == texts("two") != texts("three")


def test_the_report_and_the_export_run_on_it(tmp_path):
    study = make()
    result = services.request_study_report(study=study, phase="all", enqueue=lambda _id: None)
    done = services.run_study_report(result_id=result.pk)
    assert done.status == AnalysisResult.Status.DONE, done.error
    exported = export_dataset(study=study, out_dir=tmp_path / "export", formats=["jsonl"])
    assert exported.counts["spans"] == Span.objects.filter(revision__assignment__study=study).count()
    assert exported.counts["ratings"] >= Rating.objects.filter(revision__assignment__study=study).count()


def test_a_taken_slug_is_refused_and_nothing_is_created():
    make()
    users = get_user_model().objects.count()
    with pytest.raises(CommandError, match="a study 'tiny' exists already"):
        make()
    with pytest.raises(CommandError, match="raters: give at least 3"):
        make("other", raters=2)
    assert get_user_model().objects.count() == users
    assert not Study.objects.filter(slug="other").exists()
