"""The study report's per-system table (FactPICO Tables 3 and 12) on the page and in
by_system.csv, from ratings submitted through the rating service."""

import csv
import io

import pytest
from django.urls import reverse

from analysis import services
from annotate.models import StudyMembership
from annotate.services.members import add_study_member
from annotate.services.ratings import submit_rating
from tests.analysis.reports import open_computed
from tests.factories import AssignmentFactory, StudyFactory, SummaryFactory, UserFactory

pytestmark = pytest.mark.django_db


def test_people_s_scores_per_system_by_hand(client, monkeypatch):
    monkeypatch.setattr(services, "BOOTSTRAP_RESAMPLES", 10)
    study = StudyFactory()
    admin = UserFactory(username="pi")
    add_study_member(study=study, user=admin, role=StudyMembership.Role.ADMIN)
    raters = [UserFactory(username=f"r{i}") for i in range(2)]
    # Overall scores: system "alpha" 5 and 4 (rater 1), 3 and 4 (rater 2) -> summary means 4 and 4 -> 4.00;
    # system "beta" 2 and 1 (summary 0), 2 and 2 (summary 1) -> 1.5 and 2 -> 1.75.
    scores = {("alpha", 0): (5, 3), ("alpha", 1): (4, 4), ("beta", 0): (2, 1), ("beta", 1): (2, 2)}
    for (system, i), by_rater in scores.items():
        summary = SummaryFactory(source__study=study, generator=system, key=f"{system}-{i}")
        for rater, score in zip(raters, by_rater, strict=True):
            assignment = AssignmentFactory(summary=summary, rater=rater)
            modes = ["hallucination"] if score <= 2 else []
            submit_rating(
                assignment=assignment,
                rater=rater,
                answers={"overall": score, "failure_modes": modes, "feedback": "ok"},
                version=assignment.version,
            )
    client.force_login(admin)
    page = open_computed(client, reverse("analysis:report", args=[study.slug])).content.decode()
    assert "People&#x27;s scores per system" in page or "People's scores per system" in page
    response = client.get(reverse("analysis:download", args=[study.slug, "by_system.csv"]))
    rows = {r["generator"]: r for r in csv.DictReader(io.StringIO(response.content.decode()))}
    assert set(rows) == {"alpha", "beta"}
    assert float(rows["alpha"]["overall"]) == pytest.approx(4.0) and float(rows["beta"]["overall"]) == 1.75
    assert rows["alpha"]["n_rated"] == "2" and float(rows["beta"]["average"]) == pytest.approx(1.75)
    assert "<td>1.75</td>" in page and "<td>4.00</td>" in page
