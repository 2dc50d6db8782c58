"""A qualification set up from the browser alone (docs/qualification.md): gold answers from
the Qualification page's list of the study's summaries, and a qualification batch that needs
no rater (no admin-as-rater pending for ever, no "items missing ratings")."""

import re

import pytest

from annotate.models import Assignment, Batch, StudyMembership
from annotate.selectors.batches import batch_progress
from annotate.services.adjudication import record_expected_answer
from annotate.services.batches import create_batch
from annotate.services.members import add_study_member
from annotate.services.qualification import set_qualification_rule
from recruit.services import participation
from tests.conftest import api_client_for
from tests.factories import SummaryFactory, UserFactory
from tests.recruit.helpers import make_link

pytestmark = pytest.mark.django_db


@pytest.fixture
def study_admin(study):
    user = UserFactory(username="study_admin")
    add_study_member(study=study, user=user, role=StudyMembership.Role.ADMIN)
    return user


def _gold(study, keys=("gold-0", "gold-1")):
    gold = [SummaryFactory(source__study=study, key=key) for key in keys]
    for summary in gold:
        record_expected_answer(study=study, summary=summary, purpose="gold", answers={"overall": 4})
    return gold


def test_the_qualification_page_lists_the_summaries_with_record_gold_links(client, study, study_admin):
    summaries = [SummaryFactory(source__study=study, key=f"s-{i}") for i in range(3)]
    client.force_login(study_admin)
    page = client.get(f"/studies/{study.slug}/qualification/").content.decode()
    for summary in summaries:
        assert f'href="/studies/{study.slug}/gold/{summary.uuid}/">record gold</a>' in page
    # The link leads to the gold form, which records the answers; the list then says so.
    assert client.get(f"/studies/{study.slug}/gold/{summaries[0].uuid}/").status_code == 200
    posted = client.post(
        f"/studies/{study.slug}/gold/{summaries[0].uuid}/", {"overall": "4", "purpose": "gold", "explanation": ""}
    )
    assert posted.status_code == 302
    page = client.get(f"/studies/{study.slug}/qualification/?q=s-0").content.decode()
    rows = re.findall(r"<tr><td>(s-\d)</td>.*?</tr>", page, flags=re.S)
    assert rows == ["s-0"]
    assert "Gold item" in page


def test_the_qualification_page_is_for_study_admins_only(client, study, rater_a):
    add_study_member(study=study, user=rater_a, role=StudyMembership.Role.RATER)
    client.force_login(rater_a)
    assert client.get(f"/studies/{study.slug}/qualification/").status_code == 404


def test_a_qualification_batch_needs_no_rater_on_the_form(client, study, study_admin):
    gold = _gold(study)
    client.force_login(study_admin)
    response = client.post(
        f"/studies/{study.slug}/batches/new/",
        {
            "name": "Screening",
            "kind": "qualification",
            "design": "k_raters",
            "k": 1,
            "share": 0.2,
            "m": 1,
            "seed": 1,
            "gold": "gold-0, gold-1",
        },
    )
    assert response.status_code == 302, response.context["form"].errors
    batch = Batch.objects.get(name="Screening")
    assert batch.assignments.count() == 0
    assert not StudyMembership.objects.filter(study=study, user=study_admin, role="rater").exists()
    assert sorted(batch.design["gold"]) == sorted(g.pk for g in gold)
    # The dashboard: no rater pending, no item missing ratings.
    page = client.get(f"/studies/{study.slug}/").content.decode()
    row = re.search(r"<tr><td><a [^>]*>Screening</a></td>(.*?)</tr>", page, flags=re.S).group(1)
    assert re.findall(r"<td>(.*?)</td>", row, flags=re.S)[-1] == "0"


def test_a_main_batch_still_needs_a_rater(client, study, study_admin):
    SummaryFactory(source__study=study)
    client.force_login(study_admin)
    response = client.post(
        f"/studies/{study.slug}/batches/new/",
        {"name": "Main", "kind": "main", "design": "k_raters", "k": 1, "share": 0.2, "m": 1, "seed": 1},
    )
    assert response.status_code == 400
    assert "at least one rater" in response.content.decode()
    assert not Batch.objects.exists()


def test_the_api_makes_a_qualification_batch_without_raters(study, study_admin):
    _gold(study)
    response = api_client_for(study_admin).post(
        f"/api/studies/{study.slug}/batches/",
        {"name": "Screening", "kind": "qualification", "gold": ["gold-0", "gold-1"], "seed": 1},
        format="json",
    )
    assert response.status_code == 201, response.json()
    assert Batch.objects.get(name="Screening").assignments.count() == 0


def test_participants_get_the_gold_items_of_a_batch_made_without_raters(study, admin_user):
    gold = _gold(study)
    batch = create_batch(
        study=study, name="Screening", kind="qualification", raters=[], design="k_raters", seed=1, gold=gold
    )
    set_qualification_rule(study=study, threshold=1.0, questions=["overall"], tolerances={}, attempts_allowed=1)
    link = make_link(study, items=1)
    participant, _ = participation.arrive(link=link, panel="prolific", external_id="QUAL1")
    mine = Assignment.objects.filter(rater=participant.user, batch=batch).order_by("position")
    assert sorted(mine.values_list("summary__key", flat=True)) == ["gold-0", "gold-1"]
    # Their open qualification items are never counted as missing ratings.
    assert batch_progress(batch).items_missing == []
