"""The page models (annotate/pages/): each called directly with a user and the objects its
view's access check returns (the item pages: a request made by Django's RequestFactory, for
its user and language, and the item's uuid), no HTTP client, checking what the page would
show."""

import dataclasses

import pytest
from django.test import RequestFactory

from annotate.models import Claim, StudyMembership
from annotate.pages.batches import batch_page
from annotate.pages.monitor import flag_inbox_page, monitor_page
from annotate.pages.queue import queue_page
from annotate.pages.rating import RefusedPost, flag_page, rating_page
from annotate.selectors.access import get_study_for_viewer
from annotate.selectors.batches import get_batch
from annotate.selectors.queue import get_assignment_for_rater
from annotate.services.batches import create_batch
from annotate.services.members import add_study_member
from annotate.services.monitoring import answer_flag, pause_rater, raise_flag
from annotate.services.ratings import save_draft, submit_rating
from annotate.services.rubrics import load_builtin_rubric
from tests.factories import AssignmentFactory, SourceFactory, StudyFactory, SummaryFactory, UserFactory

ANSWERS = {"overall": 4, "failure_modes": ["misattribution"], "feedback": "Cite the second trial."}


def by_key(page) -> dict:
    return {view["q"].key: view for view in page.questions}


def page_for(rater, assignment, **kwargs):
    request = RequestFactory().get("/")
    request.user = rater
    return rating_page(request, assignment.uuid, **kwargs)


@pytest.fixture
def world(study, rater_a, rater_b):
    """A study with an admin, a viewer and a batch of two items, each rated by both raters."""
    admin, viewer = UserFactory(username="boss"), UserFactory(username="watcher")
    add_study_member(study=study, user=admin, role=StudyMembership.Role.ADMIN)
    add_study_member(study=study, user=viewer, role=StudyMembership.Role.VIEWER)
    for i in range(2):
        SummaryFactory(source__study=study, key=f"s{i + 1}")
    batch = create_batch(study=study, name="main", raters=[rater_a, rater_b], design="k_raters", k=2, seed=1)
    return study, admin, viewer, batch


def item_of(batch, rater, key="s1"):
    return batch.assignments.get(rater=rater, summary__key=key)


# --- the rating page -------------------------------------------------------------------------


@pytest.mark.django_db
def test_the_rating_page_holds_the_raters_saved_answers_and_the_source(rater_a, assignment_a):
    save_draft(assignment=assignment_a, rater=rater_a, answers=ANSWERS, version=assignment_a.version)
    page = page_for(rater_a, assignment_a)
    assert dataclasses.is_dataclass(page)
    with pytest.raises(dataclasses.FrozenInstanceError):
        page.editable = False
    assert page.template_name == "annotate/rate.html"
    questions = by_key(page)
    assert list(questions) == ["overall", "failure_modes", "feedback"]
    assert questions["overall"]["value"] == 4 and questions["overall"]["selected"] == {"4"}
    assert questions["failure_modes"]["selected"] == {"misattribution"}
    assert questions["feedback"]["value"] == "Cite the second trial."
    assert page.editable and not page.has_errors and page.form_error == ""
    # The factory's source has two sentences; the page states them and sends their offsets.
    assert page.sentence_count == 2
    assert [s["start"] for s in page.client_data["sentences"]] == [s[1] for s in assignment_a.summary.source.sentences]
    assert page.client_data["summary_text"] == assignment_a.summary.text
    assert (page.place.number, page.place.total) == (1, 1)
    assert page.keys_hint.startswith("Keys: digits answer the question you are on (1–5 on the scale)")
    assert page.compared is None


@pytest.mark.django_db
def test_a_rater_never_gets_a_page_of_another_raters_item(rater_a, rater_b, assignment_b):
    from django.http import Http404

    with pytest.raises(Http404):
        page_for(rater_a, assignment_b)


@pytest.mark.django_db
def test_a_refused_post_shows_what_was_sent_with_each_problem_linked(rater_a, assignment_a):
    refused = RefusedPost(
        answers={"overall": "9", "feedback": "typed before the refusal"},
        rationales={},
        errors={"overall": "must be between 1 and 5", "__all__": "Fix the answers below."},
    )
    page = page_for(rater_a, assignment_a, refused=refused)
    questions = by_key(page)
    assert questions["overall"]["error"] == "must be between 1 and 5"
    assert questions["overall"]["selected"] == {"9"}
    assert questions["feedback"]["value"] == "typed before the refusal"
    assert page.has_errors and page.form_error == "Fix the answers below."
    assert [(row["anchor"], row["message"]) for row in page.error_summary] == [
        ("question-overall", "must be between 1 and 5")
    ]


@pytest.mark.django_db
def test_a_submitted_item_is_read_only_with_each_answer_in_words(rater_a, assignment_a):
    submit_rating(assignment=assignment_a, rater=rater_a, answers=ANSWERS, version=assignment_a.version)
    page = page_for(rater_a, assignment_a)
    assert not page.editable
    assert by_key(page)["overall"]["answer_text"] != ""
    assert by_key(page)["feedback"]["answer_text"] == "Cite the second trial."


@pytest.mark.django_db
def test_per_claim_questions_list_the_summarys_sentences_with_their_answers(rater_a):
    study = StudyFactory(rubric=load_builtin_rubric(key="claims"))
    text = "Drug A lowered blood pressure. It was safe in children."
    summary = SummaryFactory(study=study, source=SourceFactory(study=study), text=text)
    assignment = AssignmentFactory(summary=summary, rater=rater_a, position=0)
    save_draft(
        assignment=assignment,
        rater=rater_a,
        answers={"claims_supported": {"sentence-2": "not_supported"}},
        rationales={"claims_supported": {"sentence-2": "Children were excluded."}},
        version=assignment.version,
    )
    rows = by_key(page_for(rater_a, assignment))["claims_supported"]["claims"]
    assert [(r["claim"].id, r["claim"].text) for r in rows] == [
        ("sentence-1", "Drug A lowered blood pressure."),
        ("sentence-2", "It was safe in children."),
    ]
    assert [(r["selected"], r["rationale"]) for r in rows] == [("", ""), ("not_supported", "Children were excluded.")]


@pytest.mark.django_db
def test_the_pipelines_verdicts_reach_the_page_only_in_the_assisted_condition(rater_a, assignment_a):
    Claim.objects.create(summary=assignment_a.summary, index=0, text="Lowered it.", verdict="supported")
    assert page_for(rater_a, assignment_a).claims == []
    type(assignment_a.study).objects.filter(pk=assignment_a.study_id).update(assisted=True)
    assert [c.text for c in page_for(rater_a, assignment_a).claims] == ["Lowered it."]


@pytest.mark.django_db
def test_the_flag_state_on_the_item_and_the_flag_page(world, rater_a, rater_b):
    study, admin, _viewer, batch = world
    item = item_of(batch, rater_a)
    flag = raise_flag(assignment=item, rater=rater_a, kind="guideline", note="Do tables count?")
    assert [f.note for f in page_for(rater_a, item).flags.item_flags] == ["Do tables count?"]
    assert page_for(rater_b, item_of(batch, rater_b)).flags.guideline_notes == []
    answer_flag(flag=flag, answered_by=admin, answer="Tables count as context.", shared=True)
    other = page_for(rater_b, item_of(batch, rater_b))
    assert other.flags.item_flags == []  # never another rater's flag itself
    assert [f.answer for f in other.flags.guideline_notes] == ["Tables count as context."]
    refused = flag_page(rater_a, get_assignment_for_rater(rater_a, item.uuid), kind="x", note="?", error="bad kind")
    assert (refused.flags.flag_kind, refused.flags.flag_error) == ("x", "bad kind")
    assert refused.context()["flag_error"] == "bad kind"


@pytest.mark.django_db
def test_a_paused_rater_gets_a_read_only_page(world, rater_a):
    study, admin, _viewer, batch = world
    pause_rater(study=study, rater=rater_a, paused_by=admin)
    page = page_for(rater_a, item_of(batch, rater_a))
    assert page.paused and not page.editable
    assert page.context()["paused_message"] == page.paused_message != ""


# --- the comparison page ---------------------------------------------------------------------


@pytest.mark.django_db
def test_the_comparison_page_shows_the_summaries_in_the_raters_order_and_never_a_generator(rater_a):
    study = StudyFactory(rubric=load_builtin_rubric(key="pairwise"))
    source = SourceFactory(study=study, key="SRC", text="Drug A lowered blood pressure. It was safe.", ref="PMC1")
    for g in ("secret-gpt-x", "secret-llama-y"):
        SummaryFactory(source=source, key=g, generator=g, text=f"Summary by {g[-1]}.", metadata={"model": g})
    batch = create_batch(study=study, name="cmp", raters=[rater_a], design="comparisons", seed=1, k=1)
    item = batch.assignments.get()
    page = page_for(rater_a, item)
    assert page.template_name == "annotate/compare.html"
    assert [c.uuid for c in page.compared] == list(item.shown_order)
    assert [c.label for c in page.compared] == ["A", "B"]
    choices = by_key(page)["overall"]["choices"]
    assert [c["value"] for c in choices] == [*item.shown_order, "tie"]
    assert page.keys_hint.startswith("Keys: a, b or t")
    assert [c["uuid"] for c in page.client_data["compared"]] == list(item.shown_order)
    assert "secret" not in repr(page.client_data)


# --- the queue -------------------------------------------------------------------------------


@pytest.mark.django_db
def test_the_queue_counts_the_raters_own_items_per_study(world, rater_a, rater_b):
    study, _admin, _viewer, batch = world
    first = item_of(batch, rater_a)
    submit_rating(assignment=first, rater=rater_a, answers=ANSWERS, version=first.version)
    page = queue_page(rater_a)
    assert {a.rater_id for a in page.assignments} == {rater_a.pk}
    assert [a.phase_label for a in page.assignments] == ["Main", "Main"]
    (way,) = page.studies
    assert (way.p.study, way.p.total, way.p.submitted, way.left) == (study, 2, 1, 1)
    assert way.gate is None  # the study has no qualification
    assert queue_page(UserFactory(username="newcomer")).studies == []


# --- the batch page --------------------------------------------------------------------------


@pytest.mark.django_db
def test_the_batch_page_shows_admins_every_assignment_and_viewers_none(world, rater_a):
    study, admin, viewer, batch = world
    first = item_of(batch, rater_a)
    submit_rating(assignment=first, rater=rater_a, answers=ANSWERS, version=first.version)
    page = batch_page(admin, get_study_for_viewer(admin, study.slug), get_batch(study, batch.uuid))
    assert page.is_admin
    assert [(a.summary.key, a.rater.username) for a in page.assignments] == [
        ("s1", "rater_a"),
        ("s1", "rater_b"),
        ("s2", "rater_a"),
        ("s2", "rater_b"),
    ]
    assert sorted((row["summary"].key, row["done"], row["planned"]) for row in page.missing) == [
        ("s1", 1, 2),
        ("s2", 0, 2),
    ]
    assert [q.key for q in page.questions] == ["overall", "failure_modes"]
    seen = batch_page(viewer, get_study_for_viewer(viewer, study.slug), get_batch(study, batch.uuid))
    assert not seen.is_admin and seen.assignments == []


# --- the monitor and the inbox ---------------------------------------------------------------


@pytest.mark.django_db
def test_the_monitor_has_a_row_per_rater_and_the_batchs_counts(world, rater_a):
    study, admin, _viewer, batch = world
    first = item_of(batch, rater_a)
    submit_rating(assignment=first, rater=rater_a, answers=ANSWERS, version=first.version)
    pause_rater(study=study, rater=rater_a, paused_by=admin)
    page = monitor_page(admin, study, batch, fast=0.3, error="")
    assert (page.monitor.submitted, page.monitor.planned, page.fast) == (1, 4, 0.3)
    rows = {row.user.username: row for row in page.monitor.rows}
    assert set(rows) == {"rater_a", "rater_b"}
    assert (rows["rater_a"].open_items, rows["rater_b"].open_items) == (1, 2)
    assert rows["rater_a"].paused is not None and rows["rater_b"].paused is None


@pytest.mark.django_db
def test_the_inbox_lists_open_questions_first_and_filters_them(world, rater_a, rater_b):
    study, admin, _viewer, batch = world
    answered = raise_flag(assignment=item_of(batch, rater_a), rater=rater_a, kind="other", note="First?")
    raise_flag(assignment=item_of(batch, rater_b), rater=rater_b, kind="other", note="Second?")
    answer_flag(flag=answered, answered_by=admin, answer="Yes.")
    assert [f.note for f in flag_inbox_page(admin, study, shown="all").flags] == ["Second?", "First?"]
    assert [f.note for f in flag_inbox_page(admin, study, shown="open").flags] == ["Second?"]
    assert [f.note for f in flag_inbox_page(admin, study, shown="answered").flags] == ["First?"]
