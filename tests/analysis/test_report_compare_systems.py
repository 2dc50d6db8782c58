"""Systems compared with intervals and paired tests, and the consensus answers after
adjudication, in the study report (page, CSV files, analyze_study) from ratings submitted
through the rating service. The figures are checked by hand and with scipy."""

import csv
import io

import numpy as np
import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse
from scipy.stats import wilcoxon
from statsmodels.stats.multitest import multipletests

from analysis import services
from annotate.models import Batch, StudyMembership
from annotate.services.adjudication import record_consensus
from annotate.services.members import add_study_member
from annotate.services.ratings import submit_rating
from tests.analysis.reports import open_computed
from tests.factories import AssignmentFactory, SourceFactory, StudyFactory, SummaryFactory, UserFactory

pytestmark = pytest.mark.django_db

# Overall scores (LitSumm's 1-5 scale) of three systems on the same six sources.
SCORES = {
    "alpha": [5, 4, 5, 4, 5, 4],
    "beta": [3, 5, 3, 2, 2, 1],
    "gamma": [4, 4, 2, 3, 5, 3],
}
# What the lab recorded as the system in each summary's metadata (hostile text on purpose).
SYSTEM_NAMES = {"alpha": "<i>A</i>", "beta": "B", "gamma": "C"}


@pytest.fixture
def study_with_systems():
    study = StudyFactory(slug="lab-systems")
    admin = UserFactory(username="pi")
    add_study_member(study=study, user=admin, role=StudyMembership.Role.ADMIN)
    rater = UserFactory(username="rater-one")
    batch = Batch.objects.create(study=study, name="main", seed=1)
    sources = [SourceFactory(study=study, key=f"abs-{i}") for i in range(6)]
    summaries = {}
    for system, scores in SCORES.items():
        for source, score in zip(sources, scores, strict=True):
            summary = SummaryFactory(
                study=study,
                source=source,
                generator=system,
                key=f"{system}-{source.key}",
                metadata={"system": SYSTEM_NAMES[system], "pipeline": {"steps": 2}},
            )
            summaries[system, source.key] = summary
            assignment = AssignmentFactory(summary=summary, rater=rater, batch=batch)
            submit_rating(
                assignment=assignment,
                rater=rater,
                answers={"overall": score, "failure_modes": [], "feedback": "ok"},
                version=assignment.version,
            )
    return study, admin, batch, summaries


def csv_rows(client, study, name):
    response = client.get(reverse("analysis:download", args=[study.slug, name]))
    assert response.status_code == 200
    return list(csv.DictReader(io.StringIO(response.content.decode())))


def test_systems_compared_with_intervals_and_paired_tests(client, monkeypatch, study_with_systems):
    monkeypatch.setattr(services, "BOOTSTRAP_RESAMPLES", 200)
    study, admin, _batch, _summaries = study_with_systems
    client.force_login(admin)
    page = open_computed(client, reverse("analysis:report", args=[study.slug])).content.decode()
    assert "Systems compared, with intervals" in page

    groups = [r for r in csv_rows(client, study, "system_scores.csv") if r["field"] == "generator"]
    alpha = next(r for r in groups if r["group"] == "alpha")
    # alpha: 5 4 5 4 5 4 -> mean 4.5, SD sqrt(6 * 0.25 / 5), quartiles (type 7) 4 and 5.
    assert float(alpha["mean"]) == 4.5 and alpha["n"] == "6"
    assert float(alpha["sd"]) == pytest.approx(np.sqrt(1.5 / 5))
    assert (float(alpha["q1"]), float(alpha["q3"]), float(alpha["iqr"])) == (4.0, 5.0, 1.0)
    assert 4.0 <= float(alpha["ci_low"]) <= 4.5 <= float(alpha["ci_high"]) <= 5.0

    pairs = {(r["a"], r["b"]): r for r in csv_rows(client, study, "system_pairs.csv") if r["field"] == "generator"}
    assert list(pairs) == [("alpha", "beta"), ("alpha", "gamma"), ("beta", "gamma")]
    a, b, c = (np.array(SCORES[s], dtype=float) for s in ("alpha", "beta", "gamma"))
    theirs = {
        ("alpha", "beta"): wilcoxon(a - b),
        ("alpha", "gamma"): wilcoxon(a - c),
        ("beta", "gamma"): wilcoxon(b - c),
    }
    holm = dict(zip(theirs, multipletests([t.pvalue for t in theirs.values()], method="holm")[1], strict=True))
    for pair, result in theirs.items():
        row = pairs[pair]
        assert row["n_sources"] == "6"
        assert float(row["p_value"]) == pytest.approx(result.pvalue)
        assert float(row["wilcoxon_statistic"]) == pytest.approx(result.statistic)
        assert float(row["p_holm"]) == pytest.approx(holm[pair])
    # alpha - beta: 2, -1, 2, 2, 3, 3 -> mean 11/6.
    assert float(pairs["alpha", "beta"]["mean_difference"]) == pytest.approx(11 / 6)
    assert float(pairs["alpha", "beta"]["ci_low"]) > 0  # alpha is better, and the interval says so

    # The page shows the pairs and escapes the lab's system names (summary.system is a group by default).
    assert "Every two systems, on the sources both summarised" in page
    assert "&lt;i&gt;A&lt;/i&gt;" in page and "<i>A</i>" not in page
    # A summary field holding an object (pipeline) is no group.
    assert "summary.pipeline" not in {r["field"] for r in csv_rows(client, study, "system_scores.csv")}


def test_analyze_study_by_summary_field_and_generator(tmp_path, study_with_systems):
    study, *_ = study_with_systems
    out = tmp_path / "report"
    call_command("analyze_study", study.slug, "--out", str(out), "--resamples", "50", "--by", "summary.system")
    pairs = list(csv.DictReader((out / "system_pairs.csv").open(encoding="utf-8")))
    by_field = {r["field"] for r in pairs}
    assert by_field == {"generator", "summary.system"}
    named = {(r["a"], r["b"]): r for r in pairs if r["field"] == "summary.system"}
    # The same pairs as the generators', under the lab's names ("<i>A</i>" sorts before "B").
    assert float(named["<i>A</i>", "B"]["mean_difference"]) == pytest.approx(11 / 6)
    groups = list(csv.DictReader((out / "by_group.csv").open(encoding="utf-8")))
    assert {r["field"] for r in groups} == {"summary.system"}
    call_command("analyze_study", study.slug, "--out", str(tmp_path / "g"), "--resamples", "5", "--by", "generator")
    groups = list(csv.DictReader((tmp_path / "g" / "by_group.csv").open(encoding="utf-8")))
    assert {r["group"] for r in groups} == {"alpha", "beta", "gamma"}


def test_an_unknown_field_names_the_fields_the_study_has(tmp_path, study_with_systems):
    study, *_ = study_with_systems
    with pytest.raises(CommandError, match="No field 'summary.model'.*summary.system"):
        call_command("analyze_study", study.slug, "--out", str(tmp_path), "--by", "summary.model", "--resamples", "5")


def test_consensus_answers_are_reported_beside_the_raters(client, monkeypatch, study_with_systems):
    monkeypatch.setattr(services, "BOOTSTRAP_RESAMPLES", 50)
    study, admin, batch, summaries = study_with_systems
    first = summaries["alpha", "abs-0"]
    record_consensus(batch=batch, summary=first, question="overall", value=2, rationale="", decided_by=admin)
    # A newer decision on the same summary and question replaces it.
    record_consensus(batch=batch, summary=first, question="overall", value=1, rationale="", decided_by=admin)
    client.force_login(admin)
    page = open_computed(client, reverse("analysis:report", args=[study.slug])).content.decode()
    assert "After adjudication" in page and "1 consensus answer recorded" in page

    items = csv_rows(client, study, "after_adjudication_items.csv")
    assert [(r["key"], r["question"], r["raters"], r["consensus"]) for r in items] == [
        ("alpha-abs-0", "overall", "rater-one: 5", "1")
    ]
    rows = {(r["question"], r["generator"]): r for r in csv_rows(client, study, "after_adjudication.csv")}
    alpha = rows["overall", "alpha"]
    # Raters: 5 4 5 4 5 4 -> 4.5; after adjudication the first is 1: 23 / 6.
    assert float(alpha["raters_mean"]) == 4.5
    assert float(alpha["adjudicated_mean"]) == pytest.approx(23 / 6)
    assert alpha["n_decided"] == "1"
    assert set(rows) == {("overall", "alpha"), ("overall", "beta"), ("overall", "gamma")}
    assert float(rows["overall", "beta"]["adjudicated_mean"]) == float(rows["overall", "beta"]["raters_mean"])
    # The raters' figures elsewhere are untouched.
    groups = csv_rows(client, study, "system_scores.csv")
    assert float(next(r for r in groups if r["group"] == "alpha" and r["field"] == "generator")["mean"]) == 4.5
