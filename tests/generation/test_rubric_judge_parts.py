"""The rubric judge on the questions asked once per finding (FactPICO's evidence inference)
and once per claim (claims judged by people), against the scripted LLM server: findings and
claims are shown numbered, its answers mapped back to their ids and checked by the rubric
like a person's; the report compares it with people finding by finding and claim by claim."""

import json
import re
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from sklearn.metrics import cohen_kappa_score

from analysis.services import compute_study_report
from annotate.models import Finding, Study, Summary
from annotate.selectors.claims import claim_units
from annotate.selectors.frames import ratings_frame
from annotate.services.ratings import submit_rating
from generation.models import JudgeAnswer
from tests.factories import AssignmentFactory
from tests.generation.scripted_server import Reply

pytestmark = pytest.mark.django_db

PICO = ("population", "intervention", "comparator", "outcome")


def numbered(prompt: str, letter: str) -> list[str]:
    return re.findall(rf"^({letter}\d+): ", prompt, flags=re.MULTILINE)


def score_for(*parts: str) -> int:
    return 1 + sum(map(ord, "".join(parts))) % 4


def test_the_judge_answers_each_finding_and_is_compared_with_people_finding_by_finding(serve, settings):
    settings.DEBUG, settings.DEMO_PASSWORD = True, ""
    call_command("load_demo", "--with-answers")
    study = Study.objects.get(slug="demo-factpico")
    summaries = list(Summary.objects.filter(study=study).select_related("source").order_by("key"))
    unknown, no_rationale = summaries[0].text, summaries[1].text

    def judge(request):
        assert "evidence (scale, required, rationale required, answered once per finding" in request.prompt
        summary = request.section("Summary")
        labels = numbered(request.prompt, "F")
        evidence = {label: score_for(summary, label) for label in labels}
        why = {label: f"Why {label}." for label in labels}
        if summary == unknown:
            evidence["F9"] = 2
        if summary == no_rationale:
            del why[labels[0]]
        answers = {q: score_for(summary, q) for q in PICO} | {"outcome_exhaustive": "yes", "evidence": evidence}
        rationales = {q: "Compared with the abstract." for q in PICO} | {"evidence": why}
        return Reply(json.dumps({"answers": answers, "rationales": rationales}))

    serve(steps={"rubric_judge": [judge]})
    call_command("judge_rubric", "--study", study.slug, "--allow-failures")
    answers = {a.summary_id: a for a in JudgeAnswer.objects.all()}
    assert answers[summaries[0].pk].status == "invalid" and "unknown finding(s): F9" in answers[summaries[0].pk].error
    assert answers[summaries[1].pk].status == "invalid"
    assert "evidence: Result 1: a rationale is required" in answers[summaries[1].pk].error
    valid = [answers[s.pk] for s in summaries[2:]]
    assert all(a.status == "valid" for a in valid)
    # Stored by finding id, as a rater's answers are, in the prompt's order.
    for answer in valid:
        findings = list(Finding.objects.filter(source=answer.summary.source).order_by("index"))
        expected = {str(f.uuid): score_for(answer.summary.text, f"F{n}") for n, f in enumerate(findings, start=1)}
        assert findings and answer.answers["evidence"] == expected
        assert set(answer.rationales["evidence"]) == set(expected)

    report = compute_study_report(study=study, n_resamples=20)
    (section,) = [j for j in report["judges"] if j["question"] == "evidence"]
    people = ratings_frame(study=study)
    people = people[(people["question"] == "evidence") & people["score"].notna()]
    names = dict(get_user_model().objects.values_list("pk", "username"))
    judged = {f"{a.summary.uuid}:{f}": v for a in valid for f, v in a.answers["evidence"].items()}
    judge_pairs = [p for p in section["pairs"] if p["with_judge"]]
    assert {p["rater_a"] for p in judge_pairs} | {p["rater_b"] for p in judge_pairs} >= {"rater1", "rater2"}
    for pair in judge_pairs:
        rater = pair["rater_a"] if pair["rater_b"] == section["judge"] else pair["rater_b"]
        theirs = people[people["rater"].map(lambda r: names[int(r)]) == rater]
        theirs = {f"{i}:{f}": s for i, f, s in theirs[["item", "finding", "score"]].itertuples(index=False)}
        common = sorted(set(theirs) & set(judged))
        expected = cohen_kappa_score(
            [theirs[k] for k in common], [float(judged[k]) for k in common], labels=[1, 2, 3, 4], weights="quadratic"
        )
        assert pair["n"] == len(common) > len({k.split(":")[0] for k in common})  # findings, not summaries
        assert pair["quadratic"] == pytest.approx(expected)
    # Its metric column is the mean over the findings of each summary.
    column = {row["item"]: row.get("eval.rubric_judge.evidence") for row in report["metrics"]}
    one = valid[0]
    assert column[str(one.summary.uuid)] == pytest.approx(
        sum(one.answers["evidence"].values()) / len(one.answers["evidence"])
    )


def test_the_judge_answers_each_claim_and_is_compared_with_people_claim_by_claim(serve, rater_a, rater_b):
    call_command("import_jsonl", str(Path(__file__).resolve().parents[2] / "fixtures" / "claims-example.jsonl"))
    study = Study.objects.get(slug="claims-example")
    asthma, knee = study.summaries.get(key="asthma-1"), study.summaries.get(key="knee-1")
    S, N, C = "supported", "not_supported", "cannot_tell"
    people = {asthma.key: [S, N, S], knee.key: [S, N]}
    for rater in (rater_a, rater_b):
        for summary in (asthma, knee):
            ids = [u.id for u in claim_units(summary)]
            answers = {"claims_supported": dict(zip(ids, people[summary.key], strict=True)), "overall": 3}
            rationales = {"claims_supported": {i: "Checked." for i in ids}}
            assignment = AssignmentFactory(summary=summary, rater=rater, position=0)
            submit_rating(assignment=assignment, rater=rater, answers=answers, rationales=rationales, version=1)
    # The judge misses the children claim, and cannot tell about walking speed.
    judge_labels = {asthma.text: [S, S, S], knee.text: [S, C]}

    def judge(request):
        summary = request.section("Summary")
        labels = numbered(request.prompt, "C")
        assert "It also cured asthma in children." in request.prompt or summary == knee.text
        assert (
            "not_supported" in request.prompt and "verdict" not in request.prompt.lower()
        )  # never the pipeline's call
        claims = dict(zip(labels, judge_labels[summary], strict=True))
        return Reply(
            json.dumps(
                {
                    "answers": {"claims_supported": claims, "overall": 3},
                    "rationales": {"claims_supported": {label: "Read it." for label in labels}},
                }
            )
        )

    serve(steps={"rubric_judge": [judge]})
    call_command("judge_rubric", "--study", study.slug, "--allow-failures")
    stored = {a.summary.key: a for a in JudgeAnswer.objects.select_related("summary")}
    assert {k: a.status for k, a in stored.items()} == {"asthma-1": "valid", "knee-1": "valid"}
    ids = [u.id for u in claim_units(asthma)]
    assert stored["asthma-1"].answers["claims_supported"] == dict(zip(ids, [S, S, S], strict=True))

    report = compute_study_report(study=study, n_resamples=20)
    (section,) = report["claim_judgements"]
    (judge_row,) = section["judges"]
    # People: 3 supported, 2 not supported. The judge: 4 supported calls (one wrong), 1 no call.
    assert judge_row["confusion"] == {"tp": 0, "fp": 0, "fn": 1, "tn": 3}
    assert judge_row["n_claims"] == 4 and judge_row["n_judged"] == 5
    assert (judge_row["negative_predictive_value"]["k"], judge_row["negative_predictive_value"]["n"]) == (3, 4)
    assert judge_row["human_mean_kappa"] == pytest.approx(1.0)  # the two raters agree on every claim
    codes = [S, S, S, S, C], [S, N, S, S, N]
    assert judge_row["judge_mean_kappa"] == pytest.approx(cohen_kappa_score(*codes))
    # The human-only agreement is the raters' alone.
    assert section["agreement"]["n_raters"] == 2
