"""The rubric judge on comparison items, against the scripted LLM server: asked
in both orders, a flip counts as a tie, an order without a usable answer makes the
comparison unusable, and its position consistency is reported beside its kappa."""

import json

import pytest
from django.core.management import call_command
from sklearn.metrics import cohen_kappa_score

from analysis.services import compute_study_report
from annotate.models import Comparison
from annotate.services import batches
from annotate.services.ratings import submit_rating
from annotate.services.rubrics import load_builtin_rubric
from generation.models import JudgeAnswer
from tests.factories import SourceFactory, StudyFactory, SummaryFactory, UserFactory
from tests.generation.scripted_server import Reply

pytestmark = pytest.mark.django_db(transaction=True)

RANK = {"best": 3, "middle": 2, "worst": 1}


@pytest.fixture
def study():
    study = StudyFactory(rubric=load_builtin_rubric(key="pairwise"), slug="cmp-judge")
    for s in range(3):
        source = SourceFactory(study=study, key=f"S{s}", text=f"Source number {s}.")
        for system in RANK:
            SummaryFactory(source=source, key=f"S{s}-{system}", generator=system, text=f"Text by {system} on {s}.")
    raters = [UserFactory(username="ra"), UserFactory(username="rb")]
    batch = batches.create_batch(study=study, name="b", raters=raters, design="comparisons", seed=4, k=2)
    by_uuid = {str(s.uuid): s.generator for s in study.summaries.exclude(generator=Comparison.ITEM_GENERATOR)}
    for a in batch.assignments.select_related("rater"):
        left, right = a.shown_order
        best = max((left, right), key=lambda u: RANK[by_uuid[u]])
        # rb calls middle-vs-worst a tie; otherwise both prefer the better system.
        tie = a.rater.username == "rb" and {by_uuid[left], by_uuid[right]} == {"middle", "worst"}
        value = {"preferred": "tie"} if tie else {"preferred": best}
        submit_rating(
            assignment=a,
            rater=a.rater,
            answers={"overall": value, "faithfulness": value, "completeness": value},
            version=a.version,
        )
    return study


def _system(text: str) -> str:
    return text.split(" ")[2]


def test_judge_in_both_orders(serve, study, capsys):
    refused_source = "Source number 2."
    seen_orders = []

    def judge(request):
        a, b = request.section("Summary A"), request.section("Summary B")
        seen_orders.append((_system(a), _system(b)))
        if request.section("Source") == refused_source and _system(a) == "worst":
            return Reply("I cannot compare these.")
        better = "A" if RANK[_system(a)] > RANK[_system(b)] else "B"
        answers = {
            # Consistent: the better summary, whatever its side.
            "overall": {"preferred": better, "strength": "much"},
            # Position-biased: always the first one shown (a flip when swapped).
            "faithfulness": {"preferred": "A", "strength": "slightly"},
            "completeness": {"preferred": better, "strength": None},
            "readability": None,
        }
        return Reply(json.dumps({"answers": answers, "rationales": {}}))

    serve(steps={"rubric_judge_pairwise": [judge] * 100})
    call_command("judge_rubric", "--study", study.slug, "--json", "--allow-failures")
    out = json.loads(capsys.readouterr().out)
    # 9 comparisons, each asked twice, the two orders of every pair.
    assert len(seen_orders) == 18
    assert sorted(seen_orders) == sorted((b, a) for a, b in seen_orders)
    answers = list(JudgeAnswer.objects.select_related("summary__comparison__source"))
    assert len(answers) == 9
    unusable = [a for a in answers if a.status != "valid"]
    # Source 2's comparisons that show "worst" first in one of the orders: both of them.
    assert len(unusable) == 2 and all(a.status == "failed" and "order" in a.error for a in unusable)
    assert all(a.summary.comparison.source.text == refused_source for a in unusable)
    valid = [a for a in answers if a.status == "valid"]
    for a in valid:
        assert len(a.orders) == 2 and a.orders[0]["shown"] == a.orders[1]["shown"][::-1]
        assert a.answers["faithfulness"] == {"preferred": "tie"}  # a flip counts as a tie
        assert a.answers["overall"]["strength"] == "much" and a.answers["overall"]["preferred"] != "tie"
        assert a.orders[0]["consistent"] == {"overall": True, "faithfulness": False, "completeness": True}
    assert out["counts"] == {"valid": 7, "invalid": 0, "failed": 2}
    rows = {r["question"]: r for r in out["comparisons"]}
    assert rows["overall"]["position_consistency"] == 1.0
    assert rows["faithfulness"]["position_consistency"] == 0.0 and rows["faithfulness"]["n_flips"] == 7

    # In the report: the judge beside the raters, its kappa with each rater sklearn's.
    report = compute_study_report(study=study, n_resamples=20)
    sections = {c["question"]: c for c in report["comparisons"]}
    (judge,) = sections["overall"]["judges"]
    assert judge["position_consistency"] == 1.0 and judge["n_comparisons"] == 7
    judged = {str(a.summary.uuid): a.answers["overall"]["preferred"] for a in valid}
    from annotate.selectors.frames import comparisons_frame

    frame = comparisons_frame(study=study)
    overall = frame[frame["question"] == "overall"]
    for pair in [p for p in judge["pairs"] if p["with_judge"]]:
        rater = pair["rater_a"] if pair["rater_b"] == judge["judge"] else pair["rater_b"]
        theirs, ours = [], []
        for row in overall.itertuples():
            if row.item not in judged:
                continue
            if username(row.rater) != rater:
                continue
            first = min(row.left_summary, row.right_summary)
            preferred = {"left": row.left_summary, "right": row.right_summary}.get(row.choice, "tie")
            theirs.append("tie" if preferred == "tie" else ("first" if preferred == first else "second"))
            ours.append("tie" if judged[row.item] == "tie" else ("first" if judged[row.item] == first else "second"))
        assert pair["n"] == len(theirs) > 0
        expected = cohen_kappa_score(theirs, ours, labels=["first", "tie", "second"])
        assert pair["kappa"] == pytest.approx(expected)


def username(rater_id) -> str:
    from django.contrib.auth import get_user_model

    return get_user_model().objects.get(pk=int(rater_id)).username
