"""The rating page as HTML: form posts, escaping of hostile text, bounded queries."""

import re
from pathlib import Path

import pytest
from django.conf import settings

from annotate.models import Assignment
from annotate.selectors.queue import revision_answers
from tests.factories import AssignmentFactory, SummaryFactory, let_time_pass, revision_history

TEMPLATES = Path(settings.BASE_DIR) / "templates"
HOSTILE = 'Good summary <script>alert("x")</script> and <img src=x onerror="alert(1)"> end [PMC1].'


@pytest.mark.django_db
def test_hostile_summary_text_is_rendered_literally(client, rater_a, study):
    summary = SummaryFactory(source__study=study, text=HOSTILE, source__title='<b onmouseover="alert(2)">Title</b>')
    assignment = AssignmentFactory(summary=summary, rater=rater_a)
    client.force_login(rater_a)
    html = client.get(f"/rate/{assignment.uuid}/").content.decode()
    assert "<script>alert" not in html
    assert "<img src=x" not in html
    assert "<b onmouseover" not in html
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in html
    assert "&lt;img src=x onerror=&quot;alert(1)&quot;&gt;" in html
    # The only scripts are our own static files (every page's announce.js, the item pages'
    # shared item_page.js, the rating page's rate.js) and an inert JSON block, in which json_script escapes "<" so the
    # text cannot close it.
    assert re.findall(r"<script[^>]*>", html) == [
        '<script id="rating-data" type="application/json">',
        '<script src="/static/js/announce.js" defer>',
        '<script src="/static/js/item_page.js" defer>',
        '<script src="/static/js/rate.js" defer>',
    ]
    data = html.split('<script id="rating-data" type="application/json">')[1].split("</script>")[0]
    assert "<" not in data and "\\u003Cscript\\u003E" in data


def test_no_template_comment_spans_lines():
    """Django's {# #} comment is one line only: one that spans lines is printed as text (the
    item pages showed the comments of _item_head.html and _rating_form.html to raters)."""
    spanning = [
        str(path.relative_to(TEMPLATES))
        for path in TEMPLATES.rglob("*.html")
        if any("\n" in body for body in re.findall(r"\{#(.*?)#\}", path.read_text(encoding="utf-8"), re.S))
    ]
    assert spanning == []


@pytest.mark.django_db
def test_the_rating_page_shows_no_template_comment(client, assignment_a, rater_a):
    client.force_login(rater_a)
    html = client.get(f"/rate/{assignment_a.uuid}/").content.decode()
    assert "{#" not in html and "#}" not in html and "{% comment" not in html


@pytest.mark.django_db
def test_every_control_has_its_own_label(client, assignment_a, rater_a):
    client.force_login(rater_a)
    html = client.get(f"/rate/{assignment_a.uuid}/").content.decode()
    for value in range(1, 6):
        # The label points at its own radio, and its text starts with the number.
        assert re.search(rf'<input type="radio"\s+id="q-overall-{value}" name="overall" value="{value}"', html)
        assert re.search(rf'<label for="q-overall-{value}"><span class="num">{value}</span>', html)
    assert '<label class="prompt" for="q-feedback">Feedback</label>' in html
    assert '<label for="q-failure_modes-hallucination">Contains hallucinations</label>' in html
    assert ">Save draft</button>" in html and ">Submit</button>" in html


@pytest.mark.django_db
def test_form_submit_stores_the_answers_and_moves_to_the_next_item(client, rater_a, study):
    first = AssignmentFactory(summary=SummaryFactory(source__study=study), rater=rater_a, position=0)
    second = AssignmentFactory(summary=SummaryFactory(source__study=study), rater=rater_a, position=1)
    client.force_login(rater_a)
    client.get(f"/rate/{first.uuid}/")
    let_time_pass(first, 60)
    response = client.post(
        f"/rate/{first.uuid}/",
        {
            "action": "submit",
            "version": 1,
            "overall": "4",
            "failure_modes": ["overly_specific", "bad_length"],
            "feedback": "Shorten it.",
            "active_seconds": "40",
        },
    )
    assert response.status_code == 302 and response["Location"] == f"/rate/{second.uuid}/"
    first.refresh_from_db()
    assert first.state == Assignment.State.SUBMITTED and first.active_seconds == 40
    assert first.first_opened_at is not None
    [revision] = revision_history(first)
    assert revision_answers(revision)[0] == {
        "overall": 4,
        "failure_modes": ["overly_specific", "bad_length"],
        "feedback": "Shorten it.",
    }


@pytest.mark.django_db
def test_form_submit_without_score_shows_message_next_to_the_question(client, assignment_a, rater_a):
    client.force_login(rater_a)
    response = client.post(
        f"/rate/{assignment_a.uuid}/",
        {"action": "submit", "version": 1, "failure_modes": ["hallucination"], "feedback": "keep me"},
    )
    assert response.status_code == 400
    html = response.content.decode()
    assert '<p class="error" id="q-overall-error" role="alert">an answer is required</p>' in html
    # What the rater typed is still there.
    assert ">keep me</textarea>" in html
    assert re.search(r'value="hallucination"\s+checked', html)
    assert not revision_history(assignment_a)


@pytest.mark.django_db
def test_stale_form_post_gets_409_and_keeps_the_stored_answer(client, assignment_a, rater_a):
    client.force_login(rater_a)
    client.post(f"/rate/{assignment_a.uuid}/", {"action": "save", "version": 1, "overall": "2"})
    response = client.post(f"/rate/{assignment_a.uuid}/", {"action": "submit", "version": 1, "overall": "5"})
    assert response.status_code == 409
    assert "changed elsewhere" in response.content.decode()
    assert [revision_answers(r)[0] for r in revision_history(assignment_a)] == [{"overall": 2}]


@pytest.mark.django_db
def test_skip_and_reopen_from_the_page(client, assignment_a, rater_a):
    client.force_login(rater_a)
    client.post(f"/rate/{assignment_a.uuid}/", {"action": "skip", "version": 1, "skip_reason": "Not my field"})
    assignment_a.refresh_from_db()
    assert assignment_a.state == "skipped" and assignment_a.skip_reason == "Not my field"
    client.post(f"/rate/{assignment_a.uuid}/", {"action": "reopen", "version": 2})
    assignment_a.refresh_from_db()
    assert assignment_a.state == "in_progress"


@pytest.mark.django_db
def test_queue_shows_progress(client, rater_a, study):
    items = [
        AssignmentFactory(summary=SummaryFactory(source__study=study), rater=rater_a, position=i) for i in range(3)
    ]
    client.force_login(rater_a)
    client.post(f"/rate/{items[1].uuid}/", {"action": "submit", "version": 1, "overall": "3"})
    html = client.get("/rate/").content.decode()
    assert "1 of 3 submitted" in html
    assert '<progress id="progress-' in html and 'max="3" value="1"' in html
    assert html.index(str(items[0].uuid)) < html.index(str(items[1].uuid)) < html.index(str(items[2].uuid))


def _make_queue(study, rater, n, offset=0):
    return [
        AssignmentFactory(summary=SummaryFactory(source__study=study), rater=rater, position=offset + i)
        for i in range(n)
    ]


@pytest.mark.django_db
def test_queue_page_runs_a_bounded_number_of_queries(client, rater_a, study, django_assert_max_num_queries):
    _make_queue(study, rater_a, 3)
    client.force_login(rater_a)
    client.get("/rate/")
    with django_assert_max_num_queries(6) as small:
        client.get("/rate/")
    _make_queue(study, rater_a, 30, offset=3)
    with django_assert_max_num_queries(len(small.captured_queries)):
        client.get("/rate/")


@pytest.mark.django_db
def test_rating_page_runs_a_bounded_number_of_queries(client, assignment_a, rater_a, django_assert_max_num_queries):
    client.force_login(rater_a)
    client.post(
        f"/rate/{assignment_a.uuid}/",
        {
            "action": "save",
            "version": 1,
            "overall": "2",
            "failure_modes": ["hallucination", "unsupported"],
            "feedback": "x",
        },
    )
    client.get(f"/rate/{assignment_a.uuid}/")
    # 11: the item's questions and guideline notes (one query) and
    # the onboarding gate's check (recruit's middleware: one query when the study asks no
    # consent or instructions). The bound still does not grow with the item's contents.
    with django_assert_max_num_queries(11):
        client.get(f"/rate/{assignment_a.uuid}/")


@pytest.mark.django_db
@pytest.mark.parametrize(
    "post, message",
    [
        ({"action": "publish", "version": 1}, "action: Select a valid choice"),
        ({"action": "save"}, "version: is required"),
        ({"action": "save", "version": "two"}, "version: Enter a whole number"),
        ({"action": "save", "version": 1, "active_seconds": "-5"}, "active_seconds: Ensure this value is greater"),
    ],
)
def test_a_malformed_post_is_refused_with_the_field_named_and_nothing_saved(
    client, assignment_a, rater_a, post, message
):
    client.force_login(rater_a)
    client.get(f"/rate/{assignment_a.uuid}/")
    response = client.post(f"/rate/{assignment_a.uuid}/", {**post, "overall": "4"})
    assert response.status_code == 400
    assert message in response.content.decode()
    assert not revision_history(assignment_a)


@pytest.mark.django_db
def test_a_submitted_item_states_each_answer_plainly(client, assignment_a, rater_a):
    from annotate.services.ratings import submit_rating
    from tests.conftest import GOOD_ANSWERS

    submit_rating(assignment=assignment_a, rater=rater_a, answers=GOOD_ANSWERS, version=1)
    client.force_login(rater_a)
    html = client.get(f"/rate/{assignment_a.uuid}/").content.decode()
    # Labels from fixtures/rubrics/litsumm.yaml.
    assert 'Your answer: <strong dir="auto">4 — Good</strong>' in html
    assert 'Your answer: <strong dir="auto">Reference misattribution</strong>' in html
    assert 'Your answer: <strong dir="auto">Cite the second trial.</strong>' in html


@pytest.mark.django_db
def test_an_editable_item_shows_no_answer_lines(client, assignment_a, rater_a):
    client.force_login(rater_a)
    assert "Your answer:" not in client.get(f"/rate/{assignment_a.uuid}/").content.decode()


@pytest.mark.django_db
def test_an_item_reopened_for_the_rerating_round_says_so(client, assignment_a, rater_a):
    from annotate.models import Batch
    from annotate.services.adjudication import open_rerating
    from annotate.services.ratings import submit_rating
    from tests.conftest import GOOD_ANSWERS

    batch = Batch.objects.create(study=assignment_a.study, name="pilot", seed=1)
    Assignment.objects.filter(pk=assignment_a.pk).update(batch=batch)
    client.force_login(rater_a)
    html_before = client.get(f"/rate/{assignment_a.uuid}/").content.decode()
    submit_rating(assignment=assignment_a, rater=rater_a, answers=GOOD_ANSWERS, version=1)
    assert open_rerating(batch=batch) == 1
    html = client.get(f"/rate/{assignment_a.uuid}/").content.decode()
    assert 'id="rerating-notice"' in html and 'id="rerating-notice"' not in html_before


@pytest.mark.django_db
def test_a_reopened_item_shows_the_notes_the_admin_shared_and_no_others(client, assignment_a, rater_a):
    from annotate.models import Batch, DiscussionNote, StudyMembership
    from annotate.services.adjudication import open_rerating
    from annotate.services.members import add_study_member
    from annotate.services.ratings import submit_rating
    from tests.conftest import GOOD_ANSWERS
    from tests.factories import UserFactory

    study = assignment_a.study
    batch = Batch.objects.create(study=study, name="pilot", seed=1)
    Assignment.objects.filter(pk=assignment_a.pk).update(batch=batch)
    admin = UserFactory(username="panel-chair")
    add_study_member(study=study, user=admin, role=StudyMembership.Role.ADMIN)
    client.force_login(admin)
    item = f"/studies/{study.slug}/batches/{batch.uuid}/items/{assignment_a.summary.uuid}/"
    hostile = "Read the methods again <script>alert(1)</script>"
    client.post(item, {"action": "note", "text": hostile, "question": "overall", "shared": "on"})
    client.post(item, {"action": "note", "text": "rater_b misread the table"})  # not shared
    assert list(DiscussionNote.objects.order_by("pk").values_list("shared", flat=True)) == [True, False]
    assert "shared with raters" in client.get(item).content.decode()

    client.force_login(rater_a)
    submit_rating(assignment=assignment_a, rater=rater_a, answers=GOOD_ANSWERS, version=1)
    before = client.get(f"/rate/{assignment_a.uuid}/").content.decode()
    assert "Read the methods again" not in before  # only once the item is reopened
    open_rerating(batch=batch)
    html = client.get(f"/rate/{assignment_a.uuid}/").content.decode()
    assert "From the discussion" in html
    assert "Read the methods again &lt;script&gt;alert(1)&lt;/script&gt;" in html and "<script>alert" not in html
    assert "misread the table" not in html and "panel-chair" not in html


@pytest.mark.django_db
def test_the_notes_api_takes_and_returns_shared(assignment_a, admin_user):
    from annotate.models import Batch
    from tests.conftest import api_client_for

    batch = Batch.objects.create(study=assignment_a.study, name="pilot", seed=1)
    Assignment.objects.filter(pk=assignment_a.pk).update(batch=batch)
    url = f"/api/studies/{assignment_a.study.slug}/batches/{batch.uuid}/notes/"
    body = {"summary": str(assignment_a.summary.uuid), "text": "Check the dose.", "shared": True}
    response = api_client_for(admin_user).post(url, body, format="json")
    assert response.status_code == 201 and response.json()["shared"] is True
    plain = api_client_for(admin_user).post(url, {**body, "shared": False}, format="json")
    assert plain.json()["shared"] is False
