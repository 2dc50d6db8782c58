"""The rubric judge against the scripted LLM server: its answers pass the rubric like a
person's or are kept as refused/failed, never as scores; its agreement with raters."""

import json

import pytest
from django.core.management import call_command
from sklearn.metrics import cohen_kappa_score

from annotate.models import Summary
from annotate.selectors.frames import ratings_frame
from generation.models import JudgeAnswer, LLMCall
from tests.generation.scripted_server import Reply

pytestmark = pytest.mark.django_db(transaction=True)


def overall_for(text: str) -> int:
    return 1 + sum(map(ord, text)) % 5


@pytest.fixture
def demo(settings):
    settings.DEBUG, settings.DEMO_PASSWORD = True, ""
    call_command("load_demo", "--with-answers")
    return list(Summary.objects.filter(study__slug="demo-litsumm").order_by("key"))


def test_the_judge_answers_the_rubric_and_is_compared_with_the_raters(serve, demo, capsys):
    out_of_scale, refused, broken_rule = demo[0].text, demo[1].text, demo[2].text

    def judge(request):
        summary = request.section("Summary")
        assert "failure_modes" in request.prompt and "overall (scale, required)" in request.prompt
        if summary == refused:
            return Reply("I'm sorry, I can't rate this.")
        overall = 7 if summary == out_of_scale else overall_for(summary)
        modes = ["hallucination"] if summary == broken_rule else []
        if summary == broken_rule:
            overall = 5
        return Reply(json.dumps({"answers": {"overall": overall, "failure_modes": modes, "feedback": "ok"}}))

    server = serve(steps={"rubric_judge": [judge]})
    humans_before = ratings_frame(study=demo[0].study)
    call_command("judge_rubric", "--study", "demo-litsumm", "--json", "--allow-failures")
    report = json.loads(capsys.readouterr().out)
    answers = {a.summary.text: a for a in JudgeAnswer.objects.select_related("summary")}
    assert len(answers) == len(demo)
    assert answers[refused].status == "failed" and "no JSON object" in answers[refused].error
    assert answers[out_of_scale].status == "invalid" and "overall" in answers[out_of_scale].error
    assert answers[broken_rule].status == "invalid" and "hallucination" in answers[broken_rule].error.lower()
    valid = [a for a in answers.values() if a.status == "valid"]
    assert len(valid) == len(demo) - 3
    assert report["counts"] == {"valid": len(demo) - 3, "invalid": 2, "failed": 1}
    # The judge never enters the human ratings.
    assert ratings_frame(study=demo[0].study).equals(humans_before)
    # Its kappa with each rater is sklearn's on the items both answered.
    (overall,) = [q for q in report["questions"] if q["question"] == "overall"]
    pairs = overall["agreement"]["pairs"]
    judge_pairs = [p for p in pairs if p["with_judge"]]
    assert judge_pairs and all(p["rater_b"] == report["judge"] or p["rater_a"] == report["judge"] for p in judge_pairs)
    human = humans_before[humans_before["question"] == "overall"]
    for pair in judge_pairs:
        rater = pair["rater_a"] if pair["rater_b"] == report["judge"] else pair["rater_b"]
        theirs = human[human["rater"] == rater].set_index("item")["score"]
        judged = {str(a.summary.uuid): a.answers["overall"] for a in valid}
        items = [i for i in theirs.index if i in judged]
        expected = cohen_kappa_score(
            [theirs[i] for i in items], [float(judged[i]) for i in items], labels=[1, 2, 3, 4, 5], weights="quadratic"
        )
        assert pair["n"] == len(items) and pair["quadratic"] == pytest.approx(expected)
    # Running again with the same settings asks nothing new.
    calls = LLMCall.objects.filter(step="rubric_judge").count()
    assert calls == len(server.requests)
    call_command("judge_rubric", "--study", "demo-litsumm", "--allow-failures")
    assert LLMCall.objects.filter(step="rubric_judge").count() == calls


def test_judge_runs_are_in_the_admin_escaped(serve, demo, client):
    from django.contrib.auth import get_user_model

    serve(steps={"rubric_judge": [Reply(json.dumps({"answers": {"overall": 3, "feedback": "<script>x</script>"}}))]})
    call_command("judge_rubric", "--study", "demo-litsumm", "--limit", "2")
    client.force_login(get_user_model().objects.get(username="admin"))
    run = JudgeAnswer.objects.first().run
    page = client.get(f"/admin/generation/judgerun/{run.pk}/change/").content.decode()
    assert "<script>x</script>" not in page and "valid" in page.lower()


def test_an_admin_runs_the_judge_from_the_evaluators_page_and_the_report_compares_it(serve, demo, client):
    """Run off the request (the in-process thread here, a Celery worker with a broker); the
    report sets its kappa with each rater beside the raters' and correlates its scale
    answers with every human question, while the human-only agreement stays as it was."""
    from django.contrib.auth import get_user_model

    from analysis.services import compute_study_report
    from core.background import wait_for_pool
    from generation import tasks

    study = demo[0].study
    before = compute_study_report(study=study, n_resamples=20)
    serve(
        steps={
            "rubric_judge": [
                lambda r: Reply(
                    json.dumps({"answers": {"overall": overall_for(r.section("Summary")), "failure_modes": []}})
                )
            ]
        }
    )
    url = f"/studies/{study.slug}/evaluators/"
    client.force_login(get_user_model().objects.get(username="admin"))
    response = client.post(url, {"evaluator": "rubric_judge"}, follow=True)
    assert "rubric_judge is running" in response.content.decode()
    wait_for_pool(tasks.POOL, timeout=600)
    page = client.get(url).content.decode()
    assert f"<td>{len(demo)} of {len(demo)}</td><td>{len(demo)}</td><td>0</td><td>0</td>" in page

    report = compute_study_report(study=study, n_resamples=20)
    assert report["agreement"] == before["agreement"]
    (section,) = [j for j in report["judges"] if j["question"] == "overall"]
    frame = ratings_frame(study=study)
    people = frame[(frame["question"] == "overall") & frame["score"].notna()]
    judged = {s.uuid.hex: overall_for(s.text) for s in demo}
    assert sum(p["with_judge"] for p in section["pairs"]) == people["rater"].nunique() >= 2
    for pair in section["pairs"]:
        if not pair["with_judge"]:
            continue
        rater = get_user_model().objects.get(
            username=pair["rater_a"] if pair["rater_b"].startswith("judge:") else pair["rater_b"]
        )
        mine = people[people["rater"] == str(rater.pk)]
        expected = cohen_kappa_score(
            [int(v) for v in mine["score"]],
            [judged[i.replace("-", "")] for i in mine["item"]],
            labels=[1, 2, 3, 4, 5],
            weights="quadratic",
        )
        assert pair["quadratic"] == pytest.approx(expected)
    assert "eval.rubric_judge.overall" in report["meta_evaluation"]["summary_level"]
