"""A lab's smaller needs: skip reasons on the batch page, the batch preview per system
and per rater pair, and the answers API's summary key filter, unknown rater and page size."""

import pytest
from django.test import Client

from annotate.models import StudyMembership
from annotate.services.batches import create_batch, preview_tables
from annotate.services.members import add_study_member
from annotate.services.ratings import skip_assignment, submit_rating
from tests.conftest import api_client_for
from tests.factories import SummaryFactory, UserFactory


@pytest.fixture
def lab(study, rater_a, rater_b):
    pi = UserFactory(username="pi")
    add_study_member(study=study, user=pi, role=StudyMembership.Role.ADMIN)
    for i in range(4):
        SummaryFactory(source__study=study, key=f"m{i}", generator="sysA" if i % 2 == 0 else "sysB")
    client = Client()
    client.force_login(pi)
    return study, pi, client


@pytest.mark.django_db
def test_the_batch_page_shows_who_skipped_an_item_and_why(lab, rater_a, rater_b):
    study, pi, client = lab
    batch = create_batch(study=study, name="b", raters=[rater_a, rater_b], design="k_raters", k=2, seed=1)
    a = batch.assignments.get(rater=rater_a, summary__key="m0")
    skip_assignment(assignment=a, rater=rater_a, version=a.version, reason="The <source> is not an RCT")
    body = client.get(f"/studies/{study.slug}/batches/{batch.uuid}/").content.decode()
    assert "0 of 2 submitted;\n    skipped by rater_a: “The &lt;source&gt; is not an RCT”" in body


def test_preview_tables_count_per_system_and_rater_pair_by_hand():
    """Worked by hand: s1 (sysA) to ann and bob, s2 (sysA) to ann and cat, s3 (sysB) to
    ann, bob and cat. sysA: 2 summaries, 4 assignments; sysB: 1 summary, 3 assignments.
    Pairs: ann+bob share s1 and s3 (2), ann+cat share s2 and s3 (2), bob+cat share s3 (1)."""
    rows = [
        (1, "sysA", "ann"),
        (1, "sysA", "bob"),
        (2, "sysA", "cat"),
        (2, "sysA", "ann"),
        (3, "sysB", "cat"),
        (3, "sysB", "bob"),
        (3, "sysB", "ann"),
    ]
    tables = preview_tables(rows)
    assert tables["per_rater"] == {"ann": 3, "bob": 2, "cat": 2}
    assert tables["per_system"] == {"sysA": (2, 4), "sysB": (1, 3)}
    assert tables["per_pair"] == {("ann", "bob"): 2, ("ann", "cat"): 2, ("bob", "cat"): 1}


@pytest.mark.django_db
def test_the_batch_preview_page_shows_systems_and_rater_pairs(lab, rater_a, rater_b):
    study, pi, client = lab
    add_study_member(study=study, user=rater_a, role="rater")
    add_study_member(study=study, user=rater_b, role="rater")
    form = {
        "name": "main",
        "kind": "main",
        "raters": [rater_a.pk, rater_b.pk],
        "design": "k_raters",
        "k": 2,
        "share": 0.2,
        "m": 1,
        "seed": 7,
        "action": "preview",
    }
    response = client.post(f"/studies/{study.slug}/batches/new/", form)
    body = response.content.decode()
    assert response.status_code == 200, body[:2000]
    systems = body.split('id="preview-systems"', 1)[1].split("</table>", 1)[0]
    assert "<td>sysA</td><td>2</td><td>4</td>" in systems and "<td>sysB</td><td>2</td><td>4</td>" in systems
    pairs = body.split('id="preview-pairs"', 1)[1].split("</table>", 1)[0]
    assert "<td>rater_a and rater_b</td><td>4</td>" in pairs


@pytest.fixture
def answered(lab, rater_a, rater_b):
    study, pi, _ = lab
    batch = create_batch(study=study, name="b", raters=[rater_a, rater_b], design="k_raters", k=2, seed=1)
    for a in batch.assignments.all():
        submit_rating(assignment=a, rater=a.rater, answers={"overall": 3}, version=a.version)
    return study, batch, api_client_for(pi)


def answers_url(study, batch) -> str:
    return f"/api/studies/{study.slug}/batches/{batch.uuid}/answers/"


@pytest.mark.django_db
def test_answers_filter_by_summary_key_as_well_as_uuid(answered):
    study, batch, client = answered
    m2 = study.summaries.get(key="m2")
    by_key = client.get(answers_url(study, batch), {"summary_key": "m2"}).json()
    by_uuid = client.get(answers_url(study, batch), {"summary": str(m2.uuid)}).json()
    assert by_key["count"] == by_uuid["count"] == 2
    assert {row["summary"]["key"] for row in by_key["results"]} == {"m2"}
    assert by_key["results"] == by_uuid["results"]
    assert client.get(answers_url(study, batch), {"summary_key": "nope"}).json()["count"] == 0


@pytest.mark.django_db
def test_an_unknown_rater_is_a_400_naming_the_field(answered):
    study, batch, client = answered
    UserFactory(username="not_in_batch")
    for name in ("nobody", "not_in_batch"):
        response = client.get(answers_url(study, batch), {"rater": name})
        assert response.status_code == 400
        assert "rater" in response.json()["error"]["fields"]
    assert client.get(answers_url(study, batch), {"rater": "rater_a"}).json()["count"] == 4
    stream = client.get(f"/api/studies/{study.slug}/batches/{batch.uuid}/answers.jsonl", {"rater": "nobody"})
    assert stream.status_code == 400


@pytest.mark.django_db
def test_page_size_sets_the_rows_per_page(answered):
    study, batch, client = answered
    page = client.get(answers_url(study, batch), {"page_size": 3}).json()
    assert page["count"] == 8 and len(page["results"]) == 3 and "page_size=3" in page["next"]
    cursor = client.get(answers_url(study, batch), {"page_size": 5, "cursor": ""}).json()
    assert len(cursor["results"]) == 5
    rest = client.get(cursor["next"]).json()
    assert len(rest["results"]) == 3 and rest["next"] is None
