"""The Plan page: a pilot's estimates, a power curve, freezing the plan, the protocol."""

from __future__ import annotations

import hashlib
import random

import pytest
from django.http import QueryDict
from django.test import Client
from django.urls import reverse

from annotate.models import StudyMembership
from annotate.services.members import add_study_member
from annotate.services.ratings import submit_rating
from planning.models import Protocol
from planning.pages import plan_page
from tests.factories import AssignmentFactory, SourceFactory, StudyFactory, SummaryFactory, UserFactory
from tests.planning.plans import pointwise_plan

POWER = (
    "run=1&kind=pointwise&effect=1.0&item_sd=0.5&rater_sd=0.2&residual_sd=0.6&raters_per_item=2"
    "&n_systems=2&tie_rate=0&grid=4,8,16&target=0.8&alpha=0.05&simulations=60&seed=3"
)


@pytest.fixture
def pilot(db):
    """Ten sources, each summarised by two systems, every summary scored by two raters:
    system "strong" a point above "weak"."""
    rng = random.Random(1)
    study = StudyFactory()
    admin = UserFactory(username=f"{study.slug}-admin")
    add_study_member(study=study, user=admin, role=StudyMembership.Role.ADMIN)
    raters = [UserFactory(username=f"{study.slug}-r{i}") for i in range(2)]
    for user in raters:
        add_study_member(study=study, user=user, role=StudyMembership.Role.RATER)
    for _ in range(10):
        source = SourceFactory(study=study)
        for system, base in (("strong", 4), ("weak", 3)):
            summary = SummaryFactory(source=source, generator=system)
            for user in raters:
                assignment = AssignmentFactory(summary=summary, rater=user)
                score = max(1, min(5, base + rng.choice([-1, 0, 0, 1])))
                submit_rating(
                    assignment=assignment,
                    rater=user,
                    answers={"overall": score, "failure_modes": [], "feedback": "ok"},
                    version=assignment.version,
                )
    return study, admin, raters


def test_the_page_model_runs_the_power_curve_without_a_client(pilot):
    study, admin, _ = pilot
    page = plan_page(admin, study, QueryDict(POWER))
    assert [p.n_items for p in page.curve.points] == [4, 8, 16]
    assert page.curve.points[0].power < page.curve.points[-1].power
    assert page.freeze_form.initial["planned_n"] == page.curve.smallest_n
    assert page.chart.points.count(",") == 3


def test_the_page_model_reads_a_pilot(pilot):
    study, admin, _ = pilot
    page = plan_page(admin, study, QueryDict(f"pilot={study.slug}&question=overall"))
    assert page.pilot.n_sources == 10 and page.pilot.n_raters == 2
    assert list(page.pilot.system_means) == ["strong", "weak"]
    assert page.power_form.initial["effect"] == round(page.pilot.effect, 3)
    assert 0.5 < page.pilot.effect < 1.5
    other = StudyFactory()
    refused = plan_page(admin, other, QueryDict("pilot=nope&question=overall"))
    assert refused.pilot is None and "administer" in refused.pilot_error


def test_only_the_studys_admins_plan_it(pilot):
    study, admin, raters = pilot
    url = reverse("planning:plan", kwargs={"slug": study.slug})
    client = Client()
    client.force_login(raters[0])
    assert client.get(url).status_code == 404
    assert client.post(reverse("planning:freeze", kwargs={"slug": study.slug})).status_code == 404
    client.force_login(admin)
    page = client.get(f"{url}?{POWER}")
    assert page.status_code == 200
    assert b'id="power-chart"' in page.content and b'id="smallest-n"' in page.content


def test_freezing_from_the_page_and_reading_the_protocol(pilot):
    study, admin, raters = pilot
    client = Client(enforce_csrf_checks=True)
    client.force_login(admin)
    freeze = reverse("planning:freeze", kwargs={"slug": study.slug})
    form = {
        "kind": "pointwise",
        "primary_question": "overall",
        "test": "wilcoxon_signed_rank",
        "correction": "holm",
        "alpha": "0.05",
        "planned_n": "10",
        "stopping_rule": "fixed_n",
        "exclusion_rules": "Attention check\n\nToo fast",
        "power": '{"smallest_n": 8}',
    }
    assert client.post(freeze, form).status_code == 403  # no CSRF token
    page = client.get(reverse("planning:plan", kwargs={"slug": study.slug}))
    token = page.cookies["csrftoken"].value
    bad = client.post(freeze, dict(form, alpha="2"), HTTP_X_CSRFTOKEN=token)
    assert bad.status_code == 400 and not Protocol.objects.exists()
    done = client.post(freeze, form, HTTP_X_CSRFTOKEN=token)
    protocol = Protocol.objects.get(study=study)
    assert done.status_code == 302 and done["Location"].endswith(f"/protocol/{protocol.version}/")
    assert protocol.document["plan"]["exclusion_rules"] == ["Attention check", "Too fast"]
    assert protocol.document["plan"]["power"] == {"smallest_n": 8}
    shown = client.get(done["Location"])
    assert protocol.sha256.encode() in shown.content
    download = client.get(done["Location"], {"format": "json"})
    assert hashlib.sha256(download.content).hexdigest() == protocol.sha256
    # A rater of the study may not read it either.
    other = Client()
    other.force_login(raters[0])
    assert other.get(done["Location"]).status_code == 404


def test_hostile_text_in_a_plan_is_escaped(pilot):
    study, admin, _ = pilot
    from planning.services import freeze_protocol

    plan = pointwise_plan(planned_n=10, exclusion_rules=["<script>alert(1)</script>"])
    protocol = freeze_protocol(study=study, by=admin, plan=plan)
    client = Client()
    client.force_login(admin)
    shown = client.get(reverse("planning:protocol", kwargs={"slug": study.slug, "version": protocol.version}))
    assert b"<script>alert(1)</script>" not in shown.content
