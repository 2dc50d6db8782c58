"""The rater's way through a study: phase labels and batch names in the queue, the
Continue button, the time-left estimate and the completion page."""

import pytest

from annotate.batches import create_batch, record_expected_answer
from annotate.models import Assignment
from annotate.pages.queue import time_left_text
from annotate.qualification import set_qualification_rule
from tests.conftest import GOOD_ANSWERS
from tests.factories import StudyFactory, SummaryFactory, UserFactory


@pytest.fixture
def two_batches(study, rater_a, rater_b):
    for i in range(4):
        SummaryFactory(source__study=study, key=f"s-{i}")
    pilot = create_batch(
        study=study,
        name="Pilot round",
        kind="calibration",
        raters=[rater_a, rater_b],
        design="k_raters",
        k=2,
        seed=1,
        n=1,
    )
    main = create_batch(study=study, name="Main round", raters=[rater_a, rater_b], design="k_raters", k=2, seed=2)
    return pilot, main


def post_submit(client, assignment):
    assignment.refresh_from_db()
    return client.post(f"/rate/{assignment.uuid}/", {"action": "submit", "version": assignment.version, **GOOD_ANSWERS})


@pytest.mark.django_db
def test_the_queue_labels_each_item_with_its_batch_and_phase(client, two_batches, rater_a):
    client.force_login(rater_a)
    page = client.get("/rate/").content.decode()
    assert page.count('class="tag phase phase-calibration">Calibration<') == 1
    assert page.count('class="tag phase phase-main">Main<') == 3
    assert page.count(">Pilot round<") == 1 and page.count(">Main round<") == 3


@pytest.mark.django_db
def test_continue_leads_to_the_first_unrated_item_then_to_the_completion_page(client, study, two_batches, rater_a):
    client.force_login(rater_a)
    queue = list(Assignment.objects.filter(rater=rater_a).order_by("position"))
    assert client.get(f"/rate/studies/{study.slug}/continue/")["Location"] == f"/rate/{queue[0].uuid}/"
    # Submitting leads to the next item; the last submit leads to the completion page.
    for i, a in enumerate(queue):
        response = post_submit(client, a)
        following = f"/rate/{queue[i + 1].uuid}/" if i + 1 < len(queue) else f"/rate/studies/{study.slug}/done/"
        assert response["Location"] == following
    assert client.get(f"/rate/studies/{study.slug}/continue/")["Location"] == f"/rate/studies/{study.slug}/done/"
    done = client.get(f"/rate/studies/{study.slug}/done/").content.decode()
    assert "All done: you have rated every item given to you in this study." in done
    assert "Finished: see the end page" in client.get("/rate/").content.decode()


@pytest.mark.django_db
def test_the_completion_page_sends_back_a_rater_with_items_left(client, study, two_batches, rater_a):
    client.force_login(rater_a)
    page = client.get(f"/rate/studies/{study.slug}/done/").content.decode()
    assert "All done" not in page and "You still have items to rate" in page


@pytest.mark.django_db
def test_time_left_is_the_studys_median_active_time_times_the_items_left(client, study, two_batches, rater_a, rater_b):
    """rater_b has submitted three items with 60, 300 and 120 active seconds (and one with
    none recorded, left out): the median is 120 s. rater_a has 4 items left: 4 x 120 s =
    480 s, "about 8 minutes". Time on items not yet submitted does not count."""
    mine = list(Assignment.objects.filter(rater=rater_a))
    Assignment.objects.filter(pk=mine[0].pk).update(active_seconds=5000)  # open, not submitted
    theirs = list(Assignment.objects.filter(rater=rater_b).order_by("position"))
    for a, seconds in zip(theirs, (60, 300, 120, 0), strict=True):
        Assignment.objects.filter(pk=a.pk).update(state="submitted", active_seconds=seconds)
    client.force_login(rater_a)
    page = client.get("/rate/").content.decode()
    assert "4 items left: about 8 minutes at this study's usual pace" in page


def test_time_left_reads_as_a_person_would_say_it():
    assert [time_left_text(s) for s in (None, 30, 60, 89, 150, 5340, 5400, 9000)] == [
        "",
        "under a minute",
        "about 1 minute",
        "about 1 minute",
        "about 2 minutes",
        "about 89 minutes",
        "about 1.5 hours",
        "about 2.5 hours",
    ]


@pytest.mark.django_db
def test_a_study_without_submitted_times_shows_no_estimate(client, two_batches, rater_a):
    client.force_login(rater_a)
    page = client.get("/rate/").content.decode()
    assert "4 items left" in page and "usual pace" not in page


@pytest.mark.django_db
def test_the_queue_explains_the_qualification_gate(client, study, rater_a):
    gold = SummaryFactory(source__study=study, key="gold")
    SummaryFactory(source__study=study, key="main")
    record_expected_answer(study=study, summary=gold, purpose="gold", answers={"overall": 5}, explanation="Flawless.")
    create_batch(study=study, name="Main round", raters=[rater_a], design="k_raters", k=1, seed=1)
    qual = create_batch(
        study=study,
        name="Screening",
        kind="qualification",
        raters=[rater_a],
        design="k_raters",
        k=1,
        seed=2,
        gold=[gold],
    )
    set_qualification_rule(study=study, threshold=1.0, questions=["overall"], tolerances={}, attempts_allowed=1)
    client.force_login(rater_a)
    page = client.get("/rate/").content.decode()
    assert "Qualification first" in page and ">Qualification<" in page and "Main round" not in page
    # Submitting the qualification item leads to its feedback: the expected answer and why.
    a = qual.assignments.get()
    response = client.post(f"/rate/{a.uuid}/", {"action": "submit", "version": a.version, "overall": "2"})
    assert response["Location"] == f"/rate/{a.uuid}/feedback/"
    feedback = client.get(response["Location"]).content.decode()
    assert "Qualification: how your answer compares" in feedback and "Flawless." in feedback
    assert "You did not pass the qualification" in feedback
    # Screened out: a clear message in the queue and on the completion page, no main items.
    assert "You did not pass the qualification" in client.get("/rate/").content.decode()
    done = client.get(f"/rate/studies/{study.slug}/done/").content.decode()
    assert "You did not pass the qualification" in done and "All done" not in done
    # The finished qualification item cannot be changed on its page.
    assert 'value="reopen"' not in client.get(f"/rate/{a.uuid}/").content.decode()


@pytest.mark.django_db
def test_the_rater_pages_of_a_study_are_404_to_anyone_without_items_in_it(client, study, two_batches, rater_a):
    other = StudyFactory()
    outsider = UserFactory(username="outsider")
    for user, slug in ((rater_a, other.slug), (outsider, study.slug), (rater_a, "no-such-study")):
        client.force_login(user)
        for page in ("continue", "done"):
            assert client.get(f"/rate/studies/{slug}/{page}/").status_code == 404
    client.logout()
    response = client.get(f"/rate/studies/{study.slug}/done/")
    assert response.status_code == 302 and response["Location"].startswith("/accounts/login/")
