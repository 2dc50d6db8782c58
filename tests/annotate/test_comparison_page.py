"""The comparison page: both summaries in the rater's order, the plain form
posts preferences without JavaScript, and no response a rater gets names a generator."""

import re

import pytest
from django.urls import reverse

from annotate.models import Revision
from annotate.services import batches
from annotate.services.rubrics import load_builtin_rubric
from tests.conftest import api_client_for
from tests.factories import SourceFactory, StudyFactory, SummaryFactory, UserFactory

GENERATORS = ("secret-gpt-x", "secret-llama-y", "secret-alpaca-z")


@pytest.fixture
def batch(db):
    study = StudyFactory(rubric=load_builtin_rubric(key="pairwise"))
    for s in range(2):
        source = SourceFactory(
            study=study, key=f"SRC{s}", text="Drug A lowered blood pressure. It was safe.", ref="PMC1"
        )
        for g in GENERATORS:
            SummaryFactory(
                source=source,
                key=f"{g}-{s}",
                generator=g,
                text=f"<script>alert(1)</script> Drug A per {g[-1]} [PMC1].",
                metadata={"model": g},
            )
    raters = [UserFactory(username="ra"), UserFactory(username="rb")]
    return batches.create_batch(study=study, name="cmp", raters=raters, design="comparisons", seed=1, k=2)


def test_page_shows_both_summaries_in_the_raters_order_escaped(client, batch):
    assignment = batch.assignments.select_related("rater").first()
    client.force_login(assignment.rater)
    page = client.get(reverse("annotate:rate", args=[assignment.uuid]))
    html = page.content.decode()
    assert page.status_code == 200
    left, right = assignment.shown_order
    assert html.index(f'id="summary-a" data-summary="{left}"') < html.index(f'id="summary-b" data-summary="{right}"')
    assert "<script>alert(1)</script>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert 'data-key="a"' in html and 'value="tie"' in html


def test_plain_form_submits_preferences(client, batch):
    assignment = batch.assignments.select_related("rater").first()
    client.force_login(assignment.rater)
    left, right = assignment.shown_order
    response = client.post(
        reverse("annotate:rate", args=[assignment.uuid]),
        {
            "version": assignment.version,
            "action": "submit",
            "overall": right,
            "overall__strength": "slightly",
            "overall__rationale": "B says more.",
            "faithfulness": "tie",
            "completeness": left,
            "completeness__strength": "much",
            "problems__json": "[]",
        },
    )
    assert response.status_code == 302, response.content.decode()[:3000]
    revision = Revision.objects.get(assignment=assignment)
    assert revision.shown_order == [left, right]
    values = {r.question: r.value for r in revision.ratings.all()}
    assert values["overall"] == {"preferred": right, "strength": "slightly"}
    assert values["faithfulness"] == {"preferred": "tie"}
    # The finished comparison offers what a finished rating does: change it, or go on.
    finished = client.get(reverse("annotate:rate", args=[assignment.uuid])).content.decode()
    assert 'value="reopen"' in finished and "Change my answer" in finished
    continue_url = reverse("annotate:continue", args=[assignment.study.slug])
    assert f'id="continue" href="{continue_url}"' in finished


def test_refused_submit_names_each_missing_preference(client, batch):
    assignment = batch.assignments.select_related("rater").first()
    client.force_login(assignment.rater)
    response = client.post(
        reverse("annotate:rate", args=[assignment.uuid]), {"version": assignment.version, "action": "submit"}
    )
    assert response.status_code == 400
    html = response.content.decode()
    for prompt in ("Overall, which summary is better?", "Which summary is more faithful to the source?"):
        assert prompt in html


def test_no_generator_in_any_rater_response(client, batch):
    """Blindness: the queue, every comparison page (before and after answering), the
    rater API's assignment list, detail and rating never name a generator or the
    summaries' keys or metadata."""
    rater = batch.assignments.first().rater
    client.force_login(rater)
    api = api_client_for(rater)
    bodies = [client.get(reverse("annotate:queue")).content.decode(), api.get("/api/assignments/").content.decode()]
    for assignment in batch.assignments.filter(rater=rater):
        bodies.append(client.get(reverse("annotate:rate", args=[assignment.uuid])).content.decode())
        bodies.append(api.get(f"/api/assignments/{assignment.uuid}/").content.decode())
        bodies.append(api.get(f"/api/assignments/{assignment.uuid}/rating/").content.decode())
        left, _right = assignment.shown_order
        put = api.put(
            f"/api/assignments/{assignment.uuid}/rating/",
            {"version": assignment.version, "answers": {"overall": {"preferred": left, "strength": "much"}}},
            format="json",
        )
        assert put.status_code == 200, put.content
        bodies.append(put.content.decode())
        bodies.append(client.get(reverse("annotate:rate", args=[assignment.uuid])).content.decode())
    assert len(bodies) > 6
    for body in bodies:
        for g in GENERATORS:
            assert g not in body
        assert not re.search(r"secret-", body)


def test_a_rater_flags_a_comparison_item_and_sees_the_answer(client, batch):
    """The comparison page carries the same flag widget as the rating page (the shared
    templates/annotate/_rating_form.html partial)."""
    from annotate.models import ItemFlag, StudyMembership
    from annotate.services.members import add_study_member
    from annotate.services.monitoring import answer_flag

    assignment = batch.assignments.select_related("rater").first()
    client.force_login(assignment.rater)
    url = reverse("annotate:rate", args=[assignment.uuid])
    assert 'id="flag-form"' in client.get(url).content.decode()
    response = client.post(reverse("annotate:flag", args=[assignment.uuid]), {"kind": "guideline", "note": "Ties?"})
    assert response.status_code == 302
    admin = UserFactory(username="boss")
    add_study_member(study=batch.study, user=admin, role=StudyMembership.Role.ADMIN)
    answer_flag(flag=ItemFlag.objects.get(), answered_by=admin, answer="Ties are fine when both are equal.")
    html = client.get(url).content.decode()
    assert "Ties?" in html and "Ties are fine when both are equal." in html
