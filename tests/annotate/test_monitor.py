"""The live quality monitor of a batch (docs/monitoring.md): its figures worked by hand
on a small batch, the page, and the admin's actions (pause, reassign, exclude)."""

import re

import pytest

from annotate.models import Assignment, ExpectedAnswer, RaterExclusion, RaterPause, StudyMembership
from annotate.selectors.monitor import batch_monitor
from annotate.services.assignments import move_assignment
from annotate.services.batches import create_batch
from annotate.services.members import add_study_member
from annotate.services.monitoring import exclude_rater, pause_rater, reassign_open_items, resume_rater
from annotate.services.ratings import PausedError, save_draft, submit_rating
from core.exceptions import ApplicationError
from tests.factories import SummaryFactory, UserFactory

# Three raters, four items, every rater every item (k = 3). Per item (s1..s4):
#   overall (scale 1-5)       ra 3,3,3,3   rb 3,4,2,5   rc 3,4,2,1
#   failure_modes (tickboxes) everyone [misattribution], except rc on s4: [overly_specific]
#   active seconds            ra 5,5,5,5   rb 40,60,50,30   rc 45,55,35,65
OVERALL = {"ra": (3, 3, 3, 3), "rb": (3, 4, 2, 5), "rc": (3, 4, 2, 1)}
SECONDS = {"ra": (5, 5, 5, 5), "rb": (40, 60, 50, 30), "rc": (45, 55, 35, 65)}


def failure_modes(rater: str, item: int) -> list[str]:
    return ["overly_specific"] if (rater, item) == ("rc", 3) else ["misattribution"]


@pytest.fixture
def world(study):
    admin = UserFactory(username="boss")
    add_study_member(study=study, user=admin, role=StudyMembership.Role.ADMIN)
    raters = {name: UserFactory(username=name) for name in ("ra", "rb", "rc")}
    summaries = [SummaryFactory(source__study=study, key=f"s{i + 1}") for i in range(4)]
    batch = create_batch(study=study, name="main", raters=list(raters.values()), design="k_raters", k=3, seed=7)
    return study, admin, raters, summaries, batch


def rate_everything(world):
    study, admin, raters, summaries, batch = world
    for name, user in raters.items():
        for i, summary in enumerate(summaries):
            a = Assignment.objects.get(batch=batch, rater=user, summary=summary)
            answers = {"overall": OVERALL[name][i], "failure_modes": failure_modes(name, i), "feedback": "ok"}
            submit_rating(assignment=a, rater=user, answers=answers, version=a.version)
            # The rating page counts active time; the service caps it at the wall-clock time
            # since the item was opened, so the test sets the times it describes directly.
            Assignment.objects.filter(pk=a.pk).update(active_seconds=SECONDS[name][i])
    ExpectedAnswer.objects.create(
        study=study, summary=summaries[0], purpose="gold", answers={"overall": 3}, rubric=study.rubric
    )
    ExpectedAnswer.objects.create(
        study=study, summary=summaries[3], purpose="attention", answers={"overall": 1}, rubric=study.rubric
    )
    # A training item is feedback, not a test: it never counts towards gold accuracy.
    ExpectedAnswer.objects.create(
        study=study, summary=summaries[1], purpose="training", answers={"overall": 1}, rubric=study.rubric
    )


@pytest.mark.django_db
def test_the_monitor_figures_worked_by_hand(world):
    """Worked by hand from the table at the top of this file:

    Batch median active time: the 12 times sorted are 5 5 5 5 30 35 40 45 50 55 60 65; the
    middle two are 35 and 40, so the median is 37.5 s. Too fast (fraction 0.25): under
    0.25 x 37.5 = 9.375 s: ra's four items, none of rb's or rc's.
    Median per rater: ra 5; rb (30 40 50 60) (40+50)/2 = 45; rc (35 45 55 65) (45+55)/2 = 50.
    Straight-lining on `overall` (the only scale question): ra 4 of 4 answers are 3 -> 1.0;
    rb and rc answer four different values -> 1/4 = 0.25.
    Gold accuracy (s1 gold overall=3, s4 attention overall=1; s2's training item does not
    count): ra 3 and 3 -> 1 of 2; rb 3 and 5 -> 1 of 2; rc 3 and 1 -> 2 of 2.
    Agreement, leave-one-out, pairs with each other rater on the same item and question:
      overall  s1 3/3/3: everyone 2 of 2; s2 3/4/4: ra 0 of 2, rb 1 of 2, rc 1 of 2;
               s3 3/2/2: the same as s2; s4 3/5/1: everyone 0 of 2
               -> ra 2 of 8, rb 4 of 8, rc 4 of 8
      failure_modes s1-s3 all equal: 2 of 2 each per item -> 6 of 6; s4 ra = rb, rc differs:
               ra 1 of 2, rb 1 of 2, rc 0 of 2 -> ra 7 of 8, rb 7 of 8, rc 6 of 8
      (feedback is free text: never compared)
      total: ra 9 of 16, rb 11 of 16, rc 10 of 16."""
    rate_everything(world)
    batch = world[4]
    monitor = batch_monitor(batch)
    assert monitor.figures.median_seconds == 37.5
    assert monitor.figures.fast_limit == pytest.approx(9.375)
    got = {
        row.figures.rater: (
            row.figures.items,
            row.figures.median_seconds,
            row.figures.too_fast,
            row.figures.straight_share,
            row.figures.straight_question,
            (row.figures.gold_correct, row.figures.gold_compared),
            (row.figures.agreement_matches, row.figures.agreement_pairs),
        )
        for row in monitor.rows
    }
    assert got == {
        "ra": (4, 5.0, 4, 1.0, "overall", (1, 2), (9, 16)),
        "rb": (4, 45.0, 0, 0.25, "overall", (1, 2), (11, 16)),
        "rc": (4, 50.0, 0, 0.25, "overall", (2, 2), (10, 16)),
    }
    # Half the batch median (18.75 s): rb's 30 s item is still fine, ra's four are not.
    assert [r.figures.too_fast for r in batch_monitor(batch, fast_fraction=0.5).rows] == [4, 0, 0]
    # 0.9 x 37.5 = 33.75 s: rb's 30 s item is now too fast.
    assert [r.figures.too_fast for r in batch_monitor(batch, fast_fraction=0.9).rows] == [4, 1, 0]


@pytest.mark.django_db
def test_the_monitor_page_shows_the_figures(client, world):
    rate_everything(world)
    study, admin, raters, summaries, batch = world
    client.force_login(admin)
    page = client.get(f"/studies/{study.slug}/batches/{batch.uuid}/monitor/").content.decode()
    assert "12 of 12 assignments submitted" in page
    assert "batch median active time 37.5 s" in page
    assert "9 of 16 (56%)" in page and "11 of 16 (69%)" in page and "10 of 16 (62%)" in page
    assert "100% (overall)" in page and "2 of 2" in page


@pytest.mark.django_db
@pytest.mark.parametrize("fast", ["0", "1", "abc", "nan", "-0.2", "1e400"])
def test_a_bad_fast_fraction_is_a_400_naming_the_field(client, world, fast):
    study, admin, *_, batch = world
    client.force_login(admin)
    response = client.get(f"/studies/{study.slug}/batches/{batch.uuid}/monitor/", {"fast": fast})
    assert response.status_code == 400
    assert "field &quot;fast&quot;" in response.content.decode()


@pytest.mark.django_db
@pytest.mark.parametrize(
    "post, field",
    [
        ({"action": "explode", "rater": "ra"}, "action"),
        ({"action": "pause", "rater": ""}, "rater"),
        ({"action": "pause", "rater": "nobody"}, "rater"),
        ({"action": "exclude", "rater": "ra", "reason": "   "}, "reason"),
        ({"action": "exclude", "rater": "ra", "reason": "a\x00b"}, "reason"),
        ({"action": "pause", "rater": "ra", "reason": "x" * 2001}, "reason"),
    ],
)
def test_bad_monitor_actions_are_400s_naming_the_field_and_change_nothing(client, world, post, field):
    study, admin, *_, batch = world
    client.force_login(admin)
    response = client.post(f"/studies/{study.slug}/batches/{batch.uuid}/monitor/", post)
    assert response.status_code == 400
    error = re.search(r'id="monitor-error">([^<]*)</p>', response.content.decode()).group(1)
    assert field in error
    assert not RaterPause.objects.exists() and not RaterExclusion.objects.exists()


@pytest.mark.django_db
def test_a_paused_rater_gets_no_new_items_cannot_write_and_is_told(client, world):
    study, admin, raters, summaries, batch = world
    ra = raters["ra"]
    client.force_login(admin)
    url = f"/studies/{study.slug}/batches/{batch.uuid}/monitor/"
    response = client.post(url, {"action": "pause", "rater": "ra", "reason": "Too fast on every item."})
    assert response.status_code == 302
    pause = RaterPause.objects.get()
    assert (pause.rater, pause.paused_by, pause.reason) == (ra, admin, "Too fast on every item.")
    assert "Paused" in client.get(url).content.decode()
    # No new items: not in a new batch, not by a move.
    extra = SummaryFactory(source__study=study, key="s5")
    with pytest.raises(ApplicationError, match="paused"):
        create_batch(study=study, name="more", raters=[ra], design="k_raters", k=1, seed=1)
    newcomer = UserFactory(username="rd")
    add_study_member(study=study, user=newcomer, role=StudyMembership.Role.RATER)
    other = create_batch(study=study, name="other", raters=[newcomer], design="k_raters", k=1, seed=1)
    with pytest.raises(ApplicationError, match="paused"):
        move_assignment(assignment=other.assignments.get(summary=extra), to_rater=ra)
    # No writes, and the pages say why.
    a = Assignment.objects.filter(batch=batch, rater=ra).first()
    with pytest.raises(PausedError):
        save_draft(assignment=a, rater=ra, answers={"overall": 2}, version=a.version)
    client.force_login(ra)
    page = client.get(f"/rate/{a.uuid}/")
    assert page.status_code == 200 and 'id="paused-notice"' in page.content.decode()
    assert 'name="action" value="submit"' not in page.content.decode()
    posted = client.post(f"/rate/{a.uuid}/", {"action": "save", "version": a.version, "overall": "2"})
    assert posted.status_code == 403 and "paused your work" in posted.content.decode()
    assert not a.revisions.exists()
    assert "paused your work" in client.get("/rate/").content.decode()
    api = client.put(
        f"/api/assignments/{a.uuid}/rating/",
        {"version": a.version, "answers": {"overall": 2}},
        content_type="application/json",
    )
    assert api.status_code == 403 and "paused" in api.json()["error"]["message"]
    # Resumed: writes again.
    resume_rater(study=study, rater=ra, resumed_by=admin)
    save_draft(assignment=a, rater=ra, answers={"overall": 2}, version=a.version)
    assert a.revisions.count() == 1
    assert RaterPause.objects.get().resumed_by == admin  # the record stays


@pytest.mark.django_db
def test_pausing_twice_and_resuming_someone_not_paused_are_refused(world):
    study, admin, raters, *_ = world
    pause_rater(study=study, rater=raters["ra"], paused_by=admin)
    with pytest.raises(ApplicationError, match="already paused"):
        pause_rater(study=study, rater=raters["ra"], paused_by=admin)
    with pytest.raises(ApplicationError, match="not paused"):
        resume_rater(study=study, rater=raters["rb"], resumed_by=admin)


@pytest.mark.django_db
def test_reassigning_moves_open_items_keeping_k(study):
    """Four raters, four items, k = 2 (each rater two items). ra's two open items go to
    raters who do not have them yet, the least loaded first, never the paused rc; every
    item still has two live raters and nobody has an item twice."""
    admin = UserFactory(username="boss")
    add_study_member(study=study, user=admin, role=StudyMembership.Role.ADMIN)
    users = {name: UserFactory(username=name) for name in ("ra", "rb", "rc", "rd")}
    for i in range(4):
        SummaryFactory(source__study=study, key=f"s{i + 1}")
    batch = create_batch(study=study, name="main", raters=list(users.values()), design="k_raters", k=2, seed=3)
    assert batch.assignments.count() == 8
    pause_rater(study=study, rater=users["rc"], paused_by=admin)
    mine = list(batch.assignments.filter(rater=users["ra"]))
    rc_before = set(batch.assignments.filter(rater=users["rc"]).values_list("pk", flat=True))
    done = reassign_open_items(batch=batch, rater=users["ra"])
    live = batch.assignments.exclude(state="withdrawn")
    assert not live.filter(rater=users["ra"]).exists()
    assert set(batch.assignments.filter(rater=users["rc"]).values_list("pk", flat=True)) == rc_before  # paused
    per_item = {}
    for a in live:
        per_item.setdefault(a.summary_id, []).append(a.rater_id)
    for rater_ids in per_item.values():
        assert len(rater_ids) == len(set(rater_ids))
    moved_items = {a.summary_id for a in mine}
    kept = [s for s in moved_items if len(per_item.get(s, [])) < 2]
    assert done.moved + done.kept == 2 and len(kept) == done.kept
    assert all(len(per_item[s]) == 2 for s in moved_items if s not in kept)


@pytest.mark.django_db
def test_excluding_a_rater_records_who_when_and_why_and_leaves_the_counting_answers(world):
    from annotate.selectors.frames import ratings_frame

    rate_everything(world)
    study, admin, raters, summaries, batch = world
    before = ratings_frame(study=study)
    exclusion = exclude_rater(batch=batch, rater=raters["ra"], excluded_by=admin, reason="Straight-lined.")
    after = ratings_frame(study=study)
    assert (exclusion.excluded_by, exclusion.reason) == (admin, "Straight-lined.") and exclusion.created_at
    assert set(before["rater"]) == {str(u.pk) for u in raters.values()}
    assert set(after["rater"]) == {str(raters["rb"].pk), str(raters["rc"].pk)}
    assert len(after) * 3 == len(before) * 2
    assert Assignment.objects.filter(batch=batch, rater=raters["ra"], state="submitted").count() == 4  # kept
    with pytest.raises(ApplicationError, match="already excluded"):
        exclude_rater(batch=batch, rater=raters["ra"], excluded_by=admin, reason="Again.")


@pytest.mark.django_db
def test_the_monitor_page_reads_a_fixed_number_of_queries_however_many_raters(client, study):
    """The page is fetched every 5 seconds: its queries must not grow with the raters."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    admin = UserFactory(username="boss")
    add_study_member(study=study, user=admin, role=StudyMembership.Role.ADMIN)
    for i in range(4):
        SummaryFactory(source__study=study, key=f"s{i + 1}")
    client.force_login(admin)
    counts = []
    for n in (2, 5):
        raters = [UserFactory(username=f"r{n}-{i}") for i in range(n)]
        batch = create_batch(study=study, name=f"b{n}", raters=raters, design="k_raters", k=2, seed=n)
        for a in batch.assignments.select_related("rater"):
            submit_rating(assignment=a, rater=a.rater, answers={"overall": 3}, version=a.version)
        url = f"/studies/{study.slug}/batches/{batch.uuid}/monitor/"
        client.get(url)
        with CaptureQueriesContext(connection) as context:
            assert client.get(url).status_code == 200
        counts.append(len(context))
    assert counts[0] == counts[1], counts
