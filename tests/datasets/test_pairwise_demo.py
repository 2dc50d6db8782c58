"""The pairwise demo study: three systems per abstract, seeded preferences, and
a report that ranks the systems; loading again changes nothing."""

import pytest

from analysis.services import compute_study_report
from annotate.models import Assignment, Comparison, Study
from datasets.demo import LEAD3, PAIRWISE_SOURCES, PAIRWISE_STUDY, load_demo


@pytest.mark.django_db
def test_pairwise_demo_ranks_three_systems():
    result = load_demo(password="x", with_answers=True)
    study = Study.objects.get(slug=PAIRWISE_STUDY)
    assert Comparison.objects.filter(study=study).count() == PAIRWISE_SOURCES * 3
    generators = set(study.summaries.exclude(generator=Comparison.ITEM_GENERATOR).values_list("generator", flat=True))
    assert generators == {"handwritten-a", "handwritten-b", LEAD3}
    assignments = Assignment.objects.filter(study=study)
    assert assignments.count() == PAIRWISE_SOURCES * 3 * 2
    assert assignments.filter(state="submitted").count() == PAIRWISE_SOURCES * 3 * 2 - 2 * 3
    assert result.answers_submitted >= PAIRWISE_SOURCES * 3 * 2 - 6
    report = compute_study_report(study=study, n_resamples=50)
    overall = next(c for c in report["comparisons"] if c["question"] == "overall")
    assert {r["system"] for r in overall["ranking"]["systems"]} == generators
    assert all(r["ci_low"] is not None for r in overall["ranking"]["systems"])
    # rater2 leans left on close calls: more left choices than rater1.
    bias = {p["rater"]: p["left_share"] for p in overall["position_bias"] if p["rater"]}
    assert bias["rater2"] > bias["rater1"]
    again = load_demo(password="x", with_answers=True)
    assert again.assignments_created == 0 and again.answers_submitted == 0
    assert Assignment.objects.filter(study=study).count() == PAIRWISE_SOURCES * 3 * 2
