"""One live assignment per (summary, rater): the database refuses a second, create_batch
skips existing pairs and says how many, the batch form previews what it would create and
passes the quality-control options through, and batch actions ask before they act."""

import pytest
from django.db import IntegrityError, transaction

from annotate.models import Assignment, Batch, StudyMembership
from annotate.services.adjudication import record_expected_answer
from annotate.services.assignments import move_assignment, withdraw_assignment
from annotate.services.batches import create_batch, preview_batch
from annotate.services.members import add_study_member
from annotate.services.ratings import submit_rating
from core.exceptions import ApplicationError
from tests.factories import AssignmentFactory, SummaryFactory, UserFactory


def live_pairs(study):
    rows = Assignment.objects.filter(study=study).exclude(state="withdrawn").values_list("summary_id", "rater_id")
    return list(rows)


@pytest.mark.django_db
def test_the_database_refuses_a_second_live_assignment(summary, rater_a):
    first = AssignmentFactory(summary=summary, rater=rater_a, position=0)
    batch = Batch.objects.create(study=summary.study, name="b", seed=0)
    with pytest.raises(IntegrityError), transaction.atomic():
        Assignment.objects.create(study=summary.study, batch=batch, summary=summary, rater=rater_a, position=1)
    withdraw_assignment(assignment=first)  # once withdrawn, the pair may be assigned again
    Assignment.objects.create(study=summary.study, batch=batch, summary=summary, rater=rater_a, position=1)
    assert len(live_pairs(summary.study)) == 1


@pytest.mark.django_db
def test_a_second_batch_skips_the_pairs_raters_already_have(study, rater_a, rater_b):
    summaries = [SummaryFactory(source__study=study) for _ in range(6)]
    first = create_batch(study=study, name="first", raters=[rater_a], design="k_raters", k=1, seed=1, n=4)
    assert first.skipped_pairs == 0 and first.design["skipped_pairs"] == 0
    had = set(first.assignments.values_list("summary_id", flat=True))
    second = create_batch(study=study, name="second", raters=[rater_a, rater_b], design="k_raters", k=2, seed=2)
    # rater_a already had 4 of the 6 summaries; rater_b had none.
    assert second.skipped_pairs == 4 and second.design["skipped_pairs"] == 4
    assert second.assignments.count() == 6 + 2
    assert (
        set(second.assignments.filter(rater=rater_a).values_list("summary_id", flat=True))
        == {s.pk for s in summaries} - had
    )
    pairs = live_pairs(study)
    assert len(pairs) == len(set(pairs)) == 12


@pytest.mark.django_db
def test_a_batch_of_nothing_but_existing_pairs_is_refused_and_not_created(study, rater_a):
    SummaryFactory(source__study=study)
    create_batch(study=study, name="first", raters=[rater_a], design="k_raters", k=1, seed=1)
    with pytest.raises(ApplicationError, match="nothing to create: the chosen raters already have each of the 1 "):
        create_batch(study=study, name="again", raters=[rater_a], design="k_raters", k=1, seed=1)
    assert not Batch.objects.filter(name="again").exists()


@pytest.mark.django_db
def test_preview_counts_what_create_then_makes_and_keeps_nothing(study, rater_a, rater_b):
    for _ in range(5):
        SummaryFactory(source__study=study)
    create_batch(study=study, name="first", raters=[rater_a], design="k_raters", k=1, seed=1, n=2)
    options = dict(study=study, name="second", raters=[rater_a, rater_b], design="k_raters", k=2, seed=4)
    before = Assignment.objects.count()
    preview = preview_batch(**options)
    assert Assignment.objects.count() == before and not Batch.objects.filter(name="second").exists()
    assert preview == {
        "items": 5,
        "assignments": 8,
        "skipped_pairs": 2,
        "held_summaries": 0,
        "per_rater": {"rater_a": 3, "rater_b": 5},
        # One system (the factory's generator): 5 summaries, 8 new assignments; the two
        # raters share the 3 summaries rater_a did not have yet.
        "per_system": {"secret-model-x": (5, 8)},
        "per_pair": {("rater_a", "rater_b"): 3},
    }
    batch = create_batch(**options)
    assert batch.assignments.count() == preview["assignments"] and batch.skipped_pairs == preview["skipped_pairs"]


@pytest.mark.django_db
def test_a_sample_is_drawn_from_the_summaries_the_raters_do_not_all_have(study, rater_a, rater_b):
    """A report from use: "Sample size 6" with "Assigned: Any" gave 2 summaries and 8 skipped pairs,
    because the sample was drawn before the summaries both raters had were left out."""
    summaries = [SummaryFactory(source__study=study) for _ in range(20)]
    first = create_batch(study=study, name="first", raters=[rater_a, rater_b], design="k_raters", k=2, seed=1, n=10)
    had = set(first.assignments.values_list("summary_id", flat=True))
    for seed in range(5):  # whatever the seed: the sample never lands on work both raters have
        options = dict(study=study, raters=[rater_a, rater_b], design="k_raters", k=2, seed=seed, n=6)
        assert preview_batch(name=f"p{seed}", **options) == {
            "items": 6,
            "assignments": 12,
            "skipped_pairs": 0,
            "held_summaries": 10,
            "per_rater": {"rater_a": 6, "rater_b": 6},
            "per_system": {"secret-model-x": (6, 12)},
            "per_pair": {("rater_a", "rater_b"): 6},
        }
    second = create_batch(name="second", **options)
    assert set(second.assignments.values_list("summary_id", flat=True)).isdisjoint(had)
    assert second.design["held_summaries"] == 10 and second.skipped_pairs == 0
    assert len({s.pk for s in summaries} - had) == 10
    with pytest.raises(ApplicationError, match="cannot sample 11 of 4 summaries: the other 16 that match"):
        create_batch(name="third", **{**options, "n": 11})


@pytest.mark.django_db
def test_moving_to_a_rater_who_has_the_summary_is_refused(study, rater_a, rater_b):
    SummaryFactory(source__study=study)
    batch = create_batch(study=study, name="b", raters=[rater_a, rater_b], design="k_raters", k=2, seed=1)
    a = batch.assignments.get(rater=rater_a)
    with pytest.raises(ApplicationError, match="already has this summary"):
        move_assignment(assignment=a, to_rater=rater_b)
    a.refresh_from_db()
    assert a.state == "pending"
    third = UserFactory(username="third")
    new = move_assignment(assignment=a, to_rater=third)
    a.refresh_from_db()
    assert a.state == "withdrawn" and a.moved_to == new


# --- through the form ---------------------------------------------------------------------


FORM = {"kind": "main", "design": "k_raters", "k": "2", "share": "0.2", "m": "1", "seed": "0", "rated": ""}


@pytest.fixture
def admin_page(client, study, rater_a, rater_b):
    admin = UserFactory(username="study_admin")
    add_study_member(study=study, user=admin, role=StudyMembership.Role.ADMIN)
    for rater in (rater_a, rater_b):
        add_study_member(study=study, user=rater, role=StudyMembership.Role.RATER)
    client.force_login(admin)
    return f"/studies/{study.slug}/batches/new/"


@pytest.mark.django_db
def test_the_default_form_never_duplicates_a_pair(client, admin_page, study, rater_a, rater_b):
    for _ in range(3):
        SummaryFactory(source__study=study)
    form = {**FORM, "raters": [rater_a.pk, rater_b.pk]}  # "Rated: Any", the default
    first = client.post(admin_page, {**form, "name": "one", "action": "create"})
    assert first.status_code == 302
    for _ in range(2):
        SummaryFactory(source__study=study)
    preview = client.post(admin_page, {**form, "name": "two", "action": "preview"})
    page = preview.content.decode()
    assert preview.status_code == 200 and not Batch.objects.filter(name="two").exists()
    assert "<strong>4 assignments</strong>" in page and "<strong>2 summaries</strong>" in page
    # The 3 summaries both raters have are left out before anything is assigned.
    assert "No rater gets a summary they already have." in page and "Nothing has been created yet." in page
    assert "3 matching summaries were left out before sampling: every chosen rater already has them." in " ".join(
        page.split()
    )
    created = client.post(admin_page, {**form, "name": "two", "action": "create"}, follow=True)
    assert "created with 4 assignments; 3 matching summaries left out: every rater has it" in created.content.decode()
    pairs = live_pairs(study)
    assert len(pairs) == len(set(pairs)) == 10


@pytest.mark.django_db
def test_training_attention_and_gold_from_the_form_reach_the_batch(client, admin_page, study, rater_a, rater_b):
    items = [SummaryFactory(source__study=study, key=f"item-{i}") for i in range(6)]
    gold, check = SummaryFactory(source__study=study, key="gold-1"), SummaryFactory(source__study=study, key="check-1")
    record_expected_answer(study=study, summary=gold, purpose="gold", answers={"overall": 4})
    record_expected_answer(study=study, summary=check, purpose="attention", answers={"overall": 1})
    form = {**FORM, "raters": [rater_a.pk, rater_b.pk], "name": "qc", "action": "create"}
    response = client.post(admin_page, {**form, "training": "on", "attention_every": "3", "gold": "gold-1"})
    assert response.status_code == 302, response.content.decode()[:2000]
    batch = Batch.objects.get(name="qc")
    assert batch.training is True and batch.attention_every == 3
    for rater in (rater_a, rater_b):
        keys = set(batch.assignments.filter(rater=rater).values_list("summary__key", flat=True))
        assert {"gold-1", "check-1"} <= keys and keys - {"gold-1", "check-1"} == {s.key for s in items}
    unknown = client.post(admin_page, {**form, "name": "qc2", "gold": "nope"})
    assert unknown.status_code == 400 and "No such summary key(s) in this study: nope." in unknown.content.decode()


@pytest.mark.django_db
def test_gold_accuracy_fills_the_batch_page(client, admin_page, study, rater_a, rater_b):
    gold = SummaryFactory(source__study=study, key="gold-1")
    SummaryFactory(source__study=study)
    record_expected_answer(study=study, summary=gold, purpose="gold", answers={"overall": 4})
    client.post(
        admin_page, {**FORM, "raters": [rater_a.pk], "name": "g", "k": "1", "gold": "gold-1", "action": "create"}
    )
    batch = Batch.objects.get(name="g")
    a = batch.assignments.get(summary=gold)
    submit_rating(assignment=a, rater=rater_a, answers={"overall": 4, "feedback": ""}, version=a.version)
    page = client.get(f"/studies/{study.slug}/batches/{batch.uuid}/").content.decode()
    assert "<td>rater_a</td><td>1</td><td>1</td><td>1</td>" in page


@pytest.mark.django_db
def test_the_rerating_round_asks_first_saying_how_many_it_reopens(client, admin_page, study, rater_a, rater_b):
    for _ in range(3):
        SummaryFactory(source__study=study)
    batch = create_batch(study=study, name="b", raters=[rater_a, rater_b], design="k_raters", k=2, seed=1)
    for a in batch.assignments.filter(rater=rater_a)[:2]:
        submit_rating(assignment=a, rater=rater_a, answers={"overall": 3, "feedback": ""}, version=a.version)
    url = f"/studies/{study.slug}/batches/{batch.uuid}/"
    asked = client.post(url, {"action": "rerate"}).content.decode()
    assert "Open the re-rating round?" in asked
    assert "<strong>2 submitted assignments</strong>" in asked and "<strong>2 summaries</strong>" in asked
    assert "<strong>1 rater</strong>" in asked
    assert not batch.assignments.filter(state="in_progress").exists()
    client.post(url, {"action": "rerate", "confirmed": "yes"})
    assert batch.assignments.filter(state="in_progress").count() == 2


@pytest.mark.django_db
def test_the_api_reports_skipped_pairs(study, rater_a, rater_b, admin_user):
    from tests.conftest import api_client_for

    for _ in range(2):
        SummaryFactory(source__study=study)
    create_batch(study=study, name="first", raters=[rater_a], design="k_raters", k=1, seed=1)
    body = {"name": "api", "raters": ["rater_a", "rater_b"], "design": "k_raters", "k": 2, "seed": 3}
    response = api_client_for(admin_user).post(f"/api/studies/{study.slug}/batches/", body, format="json")
    assert response.status_code == 201, response.json()
    assert response.json()["skipped_pairs"] == 2 and response.json()["design"]["skipped_pairs"] == 2
    again = api_client_for(admin_user).post(
        f"/api/studies/{study.slug}/batches/", {**body, "name": "api-2"}, format="json"
    )
    assert again.status_code == 400 and "nothing to create" in again.json()["error"]["message"]
