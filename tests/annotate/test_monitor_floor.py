""" "Too fast" has an absolute floor per study besides the rule relative to the batch's
median, 0 s is always too fast, and the queue's time-left estimate uses believable times
only (docs/monitoring.md)."""

import re

import pytest

from annotate.models import Assignment, StudyMembership
from annotate.services.batches import create_batch
from annotate.services.members import add_study_member
from tests.factories import SummaryFactory, UserFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def clicked_through(study):
    """Two raters, three items each, submitted with the given active seconds."""
    admin = UserFactory(username="boss")
    add_study_member(study=study, user=admin, role=StudyMembership.Role.ADMIN)
    raters = [UserFactory(username="ra"), UserFactory(username="rb")]
    for i in range(3):
        SummaryFactory(source__study=study, key=f"s{i}")
    batch = create_batch(study=study, name="main", raters=raters, design="k_raters", k=2, seed=3)

    def submit(seconds_by_rater: dict[str, tuple[int, ...]]) -> None:
        for rater in raters:
            mine = Assignment.objects.filter(batch=batch, rater=rater).order_by("position")
            for a, seconds in zip(mine, seconds_by_rater[rater.username], strict=True):
                # The rating page counts active time; the test sets the times it describes.
                Assignment.objects.filter(pk=a.pk).update(state="submitted", active_seconds=seconds)

    return study, admin, batch, submit


def too_fast_column(client, study, batch) -> dict[str, int]:
    page = client.get(f"/studies/{study.slug}/batches/{batch.uuid}/monitor/").content.decode()
    rows = re.findall(r'data-rater="(\w+)">.*?<td class="too-fast">(\d+)</td>', page, re.S)
    return {rater: int(n) for rater, n in rows}


def test_raters_clicking_through_at_0_seconds_are_all_too_fast(client, clicked_through):
    """Median active time 0 s: a quarter of it flags nothing, yet every item is too fast."""
    study, admin, batch, submit = clicked_through
    submit({"ra": (0, 0, 0), "rb": (0, 0, 0)})
    client.force_login(admin)
    assert too_fast_column(client, study, batch) == {"ra": 3, "rb": 3}


def test_items_under_the_studys_floor_are_too_fast_and_the_floor_is_a_setting(client, clicked_through):
    """ra 1, 2, 3 s; rb 2, 3, 4 s: the batch median is 2.5 s, a quarter of it 0.625 s, so the
    relative rule flags nothing; the default floor of 5 s flags all six. With the floor set
    to 3 s on the settings page: under 3 s are ra's 1 and 2 and rb's 2."""
    study, admin, batch, submit = clicked_through
    submit({"ra": (1, 2, 3), "rb": (2, 3, 4)})
    client.force_login(admin)
    assert study.min_seconds_per_item == 5
    assert too_fast_column(client, study, batch) == {"ra": 3, "rb": 3}
    response = client.post(
        f"/studies/{study.slug}/settings/",
        {
            "title": study.title,
            "guidelines": study.guidelines,
            "licence": study.licence,
            "description": "",
            "min_seconds_per_item": "3",
        },
    )
    assert response.status_code == 302
    assert too_fast_column(client, study, batch) == {"ra": 2, "rb": 1}


def test_the_time_left_estimate_leaves_out_too_fast_items(client, study, rater_a):
    """Submitted times 0, 1, 2, 100, 120 and 140 s. All recorded ones (0 is not): median of
    1 2 100 120 140 = 100 s; believable ones are at least max(0.25 x 100, 5) = 25 s: 100,
    120, 140, median 120 s. rater_a has 4 items left: 4 x 120 s = 480 s, "about 8 minutes"
    (not 4 x 100 s, "about 7 minutes")."""
    other = UserFactory()
    for i in range(6):
        SummaryFactory(source__study=study, key=f"s{i}")
    create_batch(study=study, name="theirs", raters=[other], design="k_raters", k=1, seed=1)
    mine = create_batch(study=study, name="mine", raters=[rater_a], design="k_raters", k=1, seed=2, n=4)
    assert Assignment.objects.filter(batch=mine).count() == 4
    theirs = Assignment.objects.filter(rater=other).order_by("position")
    for a, seconds in zip(theirs, (0, 1, 2, 100, 120, 140), strict=True):
        Assignment.objects.filter(pk=a.pk).update(state="submitted", active_seconds=seconds)
    client.force_login(rater_a)
    page = client.get("/rate/").content.decode()
    assert "4 items left: about 8 minutes at this study's usual pace" in page


def test_no_estimate_when_every_submitted_time_is_too_fast(client, study, rater_a):
    other = UserFactory()
    for i in range(5):
        SummaryFactory(source__study=study, key=f"s{i}")
    create_batch(study=study, name="theirs", raters=[other], design="k_raters", k=1, seed=1, n=3)
    create_batch(study=study, name="mine", raters=[rater_a], design="k_raters", k=1, seed=2, n=2)
    for a, seconds in zip(Assignment.objects.filter(rater=other), (1, 1, 2), strict=True):
        Assignment.objects.filter(pk=a.pk).update(state="submitted", active_seconds=seconds)
    client.force_login(rater_a)
    page = client.get("/rate/").content.decode()
    assert "2 items left" in page and "usual pace" not in page
