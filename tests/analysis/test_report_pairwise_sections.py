"""The report of a side-by-side study shows what applies to comparisons: no agreement
table for summaries nobody rated alone, no per-system scores "rated 0", comparisons
counted as comparisons, and the resamples it used."""

from __future__ import annotations

import pytest
from django.urls import reverse

from analysis import services
from annotate.models import Comparison, Study, StudyMembership
from annotate.services.members import add_study_member
from datasets.demo import PAIRWISE_STUDY, load_demo
from tests.analysis.reports import open_computed
from tests.factories import UserFactory


@pytest.mark.django_db
def test_a_pairwise_report_shows_only_the_sections_that_apply(client, monkeypatch):
    monkeypatch.setattr(services, "BOOTSTRAP_RESAMPLES", 30)
    load_demo(password="x", with_answers=True)
    study = Study.objects.get(slug=PAIRWISE_STUDY)
    admin = UserFactory(username="pairwise-admin")
    add_study_member(study=study, user=admin, role=StudyMembership.Role.ADMIN)
    client.force_login(admin)
    response = open_computed(client, reverse("analysis:report", args=[study.slug]))
    html = response.content.decode()
    report = response.context["report"]()  # the report's names reach the template as lazy calls
    assert report["comparisons"] and report["agreement"] == []
    # Comparison items are not summaries rated one at a time.
    assert report["n_items_rated"] == 0 and report["raters"] == []
    assert report["by_system"]["rows"] == []
    assert "No rater pair rated the same summary" not in html
    assert 'id="h-systems"' not in html and 'id="h-agreement"' not in html
    judged = report["comparisons"][0]["n_comparisons"]
    assert judged <= Comparison.objects.filter(study=study).count()
    assert f"{judged} comparisons judged by 2 raters" in html
    assert "summaries rated" not in html
    assert '<span id="n-resamples">30</span> resamples' in html
