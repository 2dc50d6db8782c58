"""The report's raters (severity, drift) and the frozen protocol with its deviations."""

from __future__ import annotations

import csv
import io
import json

import pytest

from analysis.models import AnalysisResult
from analysis.report_files import report_files
from annotate.models import StudyMembership
from annotate.services.members import add_study_member
from annotate.services.ratings import submit_rating
from planning.services import freeze_protocol
from tests.analysis.reports import open_computed
from tests.factories import AssignmentFactory, StudyFactory, SummaryFactory, UserFactory
from tests.planning.plans import pointwise_plan

pytestmark = pytest.mark.django_db

# overall, per summary s1..s3: ra 2, 3, 4; rb 4, 3, 5 (each summary its own source).
# failure modes: both [misattribution] on s1 and s2; on s3 ra [misattribution], rb [overly_specific].
SCORES = {"ra": (2, 3, 4), "rb": (4, 3, 5)}
FAILURES = {"ra": ("misattribution",) * 3, "rb": ("misattribution", "misattribution", "overly_specific")}
PLAN = pointwise_plan(planned_n=3)


@pytest.fixture
def study():
    study = StudyFactory()
    admin = UserFactory(username=f"{study.slug}-admin")
    add_study_member(study=study, user=admin, role=StudyMembership.Role.ADMIN)
    summaries = [SummaryFactory(source__study=study, key=f"s{i + 1}") for i in range(3)]
    for name, scores in SCORES.items():
        user = UserFactory(username=name)
        add_study_member(study=study, user=user, role=StudyMembership.Role.RATER)
        for summary, score, failure in zip(summaries, scores, FAILURES[name], strict=True):
            a = AssignmentFactory(summary=summary, rater=user)
            answers = {"overall": score, "failure_modes": [failure], "feedback": "ok"}
            submit_rating(assignment=a, rater=user, answers=answers, version=a.version)
    return study, admin


def report_of(client, study, admin):
    client.force_login(admin)
    page = open_computed(client, f"/analysis/{study.slug}/")
    result = AnalysisResult.objects.filter(study=study, status=AnalysisResult.Status.DONE).latest("computed_at")
    return page, result.result


def test_severity_and_drift_worked_by_hand(client, study):
    study, admin = study
    page, report = report_of(client, study, admin)
    (overall,) = [s for s in report["severity"] if s["question"] == "overall"]
    # ra against rb on each summary: 2-4, 3-3, 4-5 -> mean -1; rb the mirror, +1.
    rows = {r["rater"]: r for r in overall["raters"]}
    assert rows["ra"]["severity"] == pytest.approx(-1.0) and rows["rb"]["severity"] == pytest.approx(1.0)
    assert rows["ra"]["n_shared"] == 3 and rows["ra"]["ci_low"] <= -1.0 <= rows["ra"]["ci_high"]
    # One window each: of ra's overall answers only s2 matched rb; failure modes matched on
    # s1 and s2; free-text feedback is not compared: 3 of 6.
    windows = {w["rater"]: w for w in report["drift"]["windows"]}
    assert windows["ra"]["first"] == 1 and windows["ra"]["last"] == 6
    assert windows["ra"]["agreement_with_others"] == pytest.approx(3 / 6)
    text = page.content.decode()
    assert 'id="h-severity"' in text and "-1.00" in text
    files = report_files(report)
    severity = list(csv.DictReader(io.StringIO(files["severity.csv"])))
    assert {(r["question"], r["rater"], float(r["severity"])) for r in severity if r["question"] == "overall"} == {
        ("overall", "ra", -1.0),
        ("overall", "rb", 1.0),
    }
    assert "protocol" not in report or report["protocol"] is None


def test_the_protocol_and_its_deviations_in_the_report(client, study):
    study, admin = study
    protocol = freeze_protocol(study=study, by=admin, plan=dict(PLAN))
    page, report = report_of(client, study, admin)
    assert report["protocol"]["sha256"] == protocol.sha256
    assert report["protocol"]["n_rated"] == 3 and report["protocol"]["deviations"] == []
    assert protocol.sha256 in page.content.decode() and 'id="protocol-kept"' in page.content.decode()
    # An amendment asks for five sources: three are rated, and this report is a look at the
    # data before the fixed-n stopping rule.
    amended = freeze_protocol(study=study, by=admin, plan=dict(PLAN, planned_n=5), note="Five sources.")
    _page, report = report_of(client, study, admin)
    assert sorted(d["code"] for d in report["protocol"]["deviations"]) == ["look", "n"]
    # Another answer changes the inputs: the report is computed again, and lists the earlier
    # look (three rated) beside its own (four).
    extra = SummaryFactory(source__study=study, key="s4")
    rater = study.assignments.first().rater
    a = AssignmentFactory(summary=extra, rater=rater)
    submit_rating(assignment=a, rater=rater, answers={"overall": 3, "failure_modes": [], "feedback": "ok"}, version=1)
    page, report = report_of(client, study, admin)
    codes = sorted(d["code"] for d in report["protocol"]["deviations"])
    assert report["protocol"]["version"] == amended.version and report["protocol"]["n_rated"] == 4
    assert codes == ["look", "look", "n"]
    looks = [d["message"] for d in report["protocol"]["deviations"] if d["code"] == "look"]
    assert "with 3 of 5" in looks[0] and "with 4 of 5" in looks[1]
    deviations = list(csv.DictReader(io.StringIO(report_files(report)["protocol_deviations.csv"])))
    assert sorted(r["code"] for r in deviations) == codes
    assert all(r["protocol_sha256"] == amended.sha256 for r in deviations)
    assert 'id="protocol-deviations"' in page.content.decode()
    assert json.loads(report_files(report)["report.json"])["protocol"]["sha256"] == amended.sha256
