"""Study admin pages: who reaches them, building a batch, withdrawing, moving,
disagreements and consensus in HTML; raters never see other raters' answers."""

import pytest
from django.contrib.auth.models import Permission

from annotate.models import Assignment, Batch, ConsensusAnswer, DiscussionNote, StudyMembership
from annotate.services.batches import create_batch
from annotate.services.members import add_study_member
from annotate.services.ratings import submit_rating
from tests.factories import SummaryFactory, UserFactory


@pytest.fixture
def setup(study, rater_a, rater_b):
    for _ in range(4):
        SummaryFactory(source__study=study)
    batch = create_batch(study=study, name="double", raters=[rater_a, rater_b], design="k_raters", k=2, seed=1)
    for rater, score, note in ((rater_a, 5, "A-SECRET-NOTE"), (rater_b, 2, "B-SECRET-NOTE")):
        for a in batch.assignments.filter(rater=rater):
            submit_rating(assignment=a, rater=rater, answers={"overall": score, "feedback": note}, version=a.version)
    study_admin = UserFactory(username="study_admin")
    add_study_member(study=study, user=study_admin, role=StudyMembership.Role.ADMIN)
    viewer = UserFactory(username="viewer")
    add_study_member(study=study, user=viewer, role=StudyMembership.Role.VIEWER)
    return study, batch, study_admin, viewer


STAFF_PERMISSIONS = {"staff": [], "staff_viewer": ["view_study"], "staff_admin": ["view_study", "change_study"]}


def persona(username: str):
    """The user of that name: the fixtures' personas, or a staff account with the
    permissions its name says."""
    user = UserFactory(username=username)
    if username in STAFF_PERMISSIONS:
        user.is_staff = True
        user.save()
        for codename in STAFF_PERMISSIONS[username]:
            user.user_permissions.add(Permission.objects.get(codename=codename, content_type__app_label="annotate"))
    return user


def urls(study, batch):
    summary = batch.assignments.first().summary
    base = f"/studies/{study.slug}/"
    return {
        "dashboard": base,
        "new": f"{base}batches/new/",
        "batch": f"{base}batches/{batch.uuid}/",
        "disagreements": f"{base}batches/{batch.uuid}/disagreements/",
        "item": f"{base}batches/{batch.uuid}/items/{summary.uuid}/",
        "qualification": f"{base}qualification/",
        "gold": f"{base}gold/{summary.uuid}/",
        "monitor": f"{base}batches/{batch.uuid}/monitor/",
        "flags": f"{base}flags/",
        # The recruit app's study admin pages (docs/recruitment.md).
        "onboarding": f"{base}onboarding/",
        "recruitment": f"{base}recruitment/",
    }


@pytest.mark.django_db
@pytest.mark.parametrize(
    "who,expected",
    [
        (
            "rater_a",
            {
                "dashboard": 404,
                "new": 404,
                "batch": 404,
                "disagreements": 404,
                "item": 404,
                "qualification": 404,
                "gold": 404,
                "monitor": 404,
                "flags": 404,
                "onboarding": 404,
                "recruitment": 404,
            },
        ),
        (
            "outsider",
            {
                "dashboard": 404,
                "new": 404,
                "batch": 404,
                "disagreements": 404,
                "item": 404,
                "qualification": 404,
                "gold": 404,
                "monitor": 404,
                "flags": 404,
                "onboarding": 404,
                "recruitment": 404,
            },
        ),
        (
            "viewer",
            {
                "dashboard": 200,
                "new": 404,
                "batch": 200,
                "disagreements": 404,
                "item": 404,
                "qualification": 404,
                "gold": 404,
                "monitor": 404,
                "flags": 404,
                "onboarding": 404,
                "recruitment": 404,
            },
        ),
        (
            "study_admin",
            {
                "dashboard": 200,
                "new": 200,
                "batch": 200,
                "disagreements": 200,
                "item": 200,
                "qualification": 200,
                "gold": 200,
                "monitor": 200,
                "flags": 200,
                "onboarding": 200,
                "recruitment": 200,
            },
        ),
        # Staff alone gives nothing; annotate.view_study / change_study give viewer / admin
        # of every study, as in the Django admin (docs/security.md).
        (
            "staff",
            {
                "dashboard": 404,
                "new": 404,
                "batch": 404,
                "disagreements": 404,
                "item": 404,
                "qualification": 404,
                "gold": 404,
                "monitor": 404,
                "flags": 404,
                "onboarding": 404,
                "recruitment": 404,
            },
        ),
        (
            "staff_viewer",
            {
                "dashboard": 200,
                "new": 404,
                "batch": 200,
                "disagreements": 404,
                "item": 404,
                "qualification": 404,
                "gold": 404,
                "monitor": 404,
                "flags": 404,
                "onboarding": 404,
                "recruitment": 404,
            },
        ),
        (
            "staff_admin",
            {
                "dashboard": 200,
                "new": 200,
                "batch": 200,
                "disagreements": 200,
                "item": 200,
                "qualification": 200,
                "gold": 200,
                "monitor": 200,
                "flags": 200,
                "onboarding": 200,
                "recruitment": 200,
            },
        ),
    ],
)
def test_who_reaches_the_study_pages(client, setup, outsider, who, expected):
    study, batch, *_ = setup
    client.force_login(persona(who))
    got = {name: client.get(url).status_code for name, url in urls(study, batch).items()}
    assert got == expected


@pytest.mark.django_db
def test_anonymous_is_sent_to_login(client, setup):
    study, batch, *_ = setup
    for url in urls(study, batch).values():
        response = client.get(url)
        assert response.status_code == 302 and response["Location"].startswith("/accounts/login/")


@pytest.mark.django_db
def test_viewer_cannot_act(client, setup):
    study, batch, _, viewer = setup
    client.force_login(viewer)
    a = batch.assignments.first()
    response = client.post(urls(study, batch)["batch"], {"action": "withdraw", "assignment": a.uuid})
    assert response.status_code == 404
    a.refresh_from_db()
    assert a.state == "submitted"


@pytest.mark.django_db
def test_admin_builds_a_batch_from_the_form(client, setup, rater_a, rater_b):
    study, first_batch, study_admin, _ = setup
    # rater_a and rater_b have every summary already (the batch would be all skipped pairs).
    newcomers = [UserFactory(username=name) for name in ("rater_c", "rater_d")]
    for user in newcomers:
        add_study_member(study=study, user=user, role=StudyMembership.Role.RATER)
    client.force_login(study_admin)
    response = client.post(
        urls(study, first_batch)["new"],
        {
            "name": "pilot",
            "kind": "calibration",
            "raters": [u.pk for u in newcomers],
            "design": "partial_overlap",
            "k": 2,
            "share": 0.5,
            "m": 1,
            "n": 4,
            "seed": 3,
            "blinded": "on",
        },
    )
    batch = Batch.objects.get(name="pilot")
    assert response.status_code == 302 and response["Location"].endswith(f"/batches/{batch.uuid}/")
    assert batch.kind == "calibration" and batch.assignments.count() == 6  # 2 doubled + 2 single
    bad = client.post(
        urls(study, batch)["new"],
        {
            "name": "pilot",
            "kind": "main",
            "raters": [rater_a.pk],
            "design": "k_raters",
            "k": 1,
            "share": 0.2,
            "m": 1,
            "seed": 0,
        },
    )
    assert bad.status_code == 400 and "already has a batch named" in bad.content.decode()


@pytest.mark.django_db
def test_admin_withdraws_and_moves_keeping_answers(client, setup, rater_a, rater_b):
    study, batch, study_admin, _ = setup
    client.force_login(study_admin)
    a = batch.assignments.filter(rater=rater_a).first()
    third = UserFactory(username="third")
    # A study admin moves items among the study's members (docs/security.md).
    add_study_member(study=study, user=third, role=StudyMembership.Role.RATER)
    client.post(urls(study, batch)["batch"], {"action": "move", "assignment": a.uuid, "to": "third"})
    a.refresh_from_db()
    assert a.state == "withdrawn" and a.moved_to.rater == third
    assert a.revisions.filter(status="submitted").count() == 1
    b = batch.assignments.filter(rater=rater_b).first()
    # Withdrawing asks first, saying what it touches, and changes nothing until confirmed.
    asked = client.post(urls(study, batch)["batch"], {"action": "withdraw", "assignment": b.uuid})
    page = asked.content.decode()
    assert asked.status_code == 200 and "Withdraw this assignment?" in page
    assert f"<strong>{b.summary.key}</strong>" in page and "Its 1 revision of answers stays stored." in page
    b.refresh_from_db()
    assert b.state == "submitted"
    client.post(urls(study, batch)["batch"], {"action": "withdraw", "assignment": b.uuid, "confirmed": "yes"})
    b.refresh_from_db()
    assert b.state == "withdrawn" and b.revisions.count() == 1
    page = client.get(urls(study, batch)["batch"]).content.decode()
    assert "items still missing ratings" in page.lower()


@pytest.mark.django_db
def test_disagreements_and_consensus_in_html(client, setup):
    study, batch, study_admin, _ = setup
    client.force_login(study_admin)
    page = client.get(urls(study, batch)["disagreements"] + "?question=overall&threshold=2").content.decode()
    assert "4 items with disagreement" in page
    item_url = urls(study, batch)["item"]
    item = client.get(item_url).content.decode()
    assert "A-SECRET-NOTE" in item and "B-SECRET-NOTE" in item  # side by side, for the admin
    client.post(item_url, {"action": "note", "text": "Discussed: the dose claim is unsupported."})
    client.post(item_url, {"action": "consensus", "question": "overall", "value": "3", "rationale": "Agreed."})
    assert DiscussionNote.objects.get().text.startswith("Discussed")
    assert ConsensusAnswer.objects.get().value == 3
    bad = client.post(item_url, {"action": "consensus", "question": "overall", "value": "9"})
    assert bad.status_code == 400 and ConsensusAnswer.objects.count() == 1


@pytest.mark.django_db
def test_raters_never_receive_other_raters_answers_or_the_generator(client, setup, rater_a):
    study, batch, *_ = setup
    client.force_login(rater_a)
    pages = [client.get(u).content.decode() for u in urls(study, batch).values()]
    pages += [client.get("/rate/").content.decode()]
    pages += [client.get(f"/rate/{a.uuid}/").content.decode() for a in Assignment.objects.filter(rater=rater_a)]
    pages += [
        client.get(f"/api/assignments/{a.uuid}/rating/").content.decode()
        for a in Assignment.objects.filter(rater=rater_a)
    ]
    for page in pages:
        assert "B-SECRET-NOTE" not in page and "secret-model-x" not in page


@pytest.mark.django_db
@pytest.mark.parametrize("field", ["topic__contains", "contains", "isnull", "a b"])
def test_metadata_filter_accepts_plain_field_names_only(client, setup, rater_a, field):
    study, first_batch, study_admin, _ = setup
    client.force_login(study_admin)
    response = client.post(
        urls(study, first_batch)["new"],
        {
            "name": "x",
            "kind": "main",
            "raters": [rater_a.pk],
            "design": "k_raters",
            "k": 1,
            "share": 0.2,
            "m": 1,
            "seed": 0,
            "source_field": f"{field}=x",
        },
    )
    assert response.status_code == 400 and "is not a plain field name" in response.content.decode()
    assert not Batch.objects.filter(name="x").exists()


@pytest.mark.django_db
@pytest.mark.parametrize("who", ["viewer", "rater_a", "outsider", "staff_viewer"])
def test_only_study_admins_act_on_the_monitor_and_the_inbox(client, setup, outsider, who):
    from annotate.models import ItemFlag, RaterExclusion, RaterPause
    from annotate.services.monitoring import raise_flag

    study, batch, *_ = setup
    a = batch.assignments.first()
    flag = raise_flag(assignment=a, rater=a.rater, kind="other", note="Why?")
    client.force_login(persona(who))
    monitor = urls(study, batch)["monitor"]
    for action in ("pause", "reassign"):
        assert client.post(monitor, {"action": action, "rater": a.rater.username}).status_code == 404
    assert client.post(monitor, {"action": "exclude", "rater": a.rater.username, "reason": "x"}).status_code == 404
    assert client.post(urls(study, batch)["flags"], {"flag": flag.uuid, "answer": "No."}).status_code == 404
    assert not RaterPause.objects.exists() and not RaterExclusion.objects.exists()
    assert ItemFlag.objects.get().answered_at is None
