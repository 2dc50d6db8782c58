"""The qualification pages (docs/qualification.md): the gold form with the rubric's own
widgets, the pass-rule page and its retry button, and who reaches them."""

import pytest

from annotate.models import ExpectedAnswer, QualificationRetry, QualificationRule, StudyMembership
from annotate.services.adjudication import record_expected_answer
from annotate.services.batches import create_batch
from annotate.services.members import add_study_member
from annotate.services.qualification import qualification_state, set_qualification_rule
from annotate.services.ratings import submit_rating
from tests.factories import StudyFactory, SummaryFactory, UserFactory


@pytest.fixture
def study_admin(study):
    user = UserFactory(username="study_admin")
    add_study_member(study=study, user=user, role=StudyMembership.Role.ADMIN)
    return user


def gold_url(study, summary):
    return f"/studies/{study.slug}/gold/{summary.uuid}/"


@pytest.mark.django_db
def test_the_gold_form_shows_the_rubrics_own_widgets(client, study, study_admin):
    summary = SummaryFactory(source__study=study)
    client.force_login(study_admin)
    page = client.get(gold_url(study, summary)).content.decode()
    # The scale's radios and the tickboxes, as on the rating page; no rationale boxes.
    assert 'type="radio" id="q-overall-4" name="overall" value="4"' in page
    assert 'type="checkbox" id="q-failure_modes-hallucination"' in page
    assert "__rationale" not in page
    assert 'name="explanation"' in page and "JSON" not in page


@pytest.mark.django_db
def test_the_gold_form_records_the_answers_given_with_the_widgets(client, study, study_admin):
    summary = SummaryFactory(source__study=study)
    client.force_login(study_admin)
    response = client.post(
        gold_url(study, summary),
        {
            "overall": "4",
            "failure_modes": ["hallucination", "unsupported"],
            "purpose": "gold",
            "explanation": "Reference 2 is made up.",
        },
    )
    assert response.status_code == 302
    expected = ExpectedAnswer.objects.get(summary=summary)
    assert expected.answers == {"overall": 4, "failure_modes": ["hallucination", "unsupported"]}
    assert (expected.purpose, expected.explanation, expected.created_by) == (
        "gold",
        "Reference 2 is made up.",
        study_admin,
    )
    # Shown again, checked, for a change.
    page = client.get(gold_url(study, summary)).content.decode()
    assert 'value="4"\n           checked' in page or 'value="4" checked' in " ".join(page.split())


@pytest.mark.django_db
@pytest.mark.parametrize(
    "post,named",
    [
        ({"overall": "7", "purpose": "gold"}, "Overall quality of the summary"),
        ({"overall": "x", "purpose": "gold"}, "Overall quality of the summary"),
        ({"failure_modes": ["no-such-mode"], "purpose": "gold"}, "Failure modes"),
        ({"overall": "3", "purpose": "quiz"}, "purpose"),
        ({"overall": "3", "purpose": "gold", "explanation": "Because\x00"}, "explanation"),
        ({"purpose": "gold"}, "give at least one expected answer"),
        ({"overall": "3", "purpose": "gold", "feedback": "Cite\x00 it"}, "Feedback: "),
    ],
)
def test_bad_gold_input_is_a_400_naming_the_field_and_saves_nothing(client, study, study_admin, post, named):
    summary = SummaryFactory(source__study=study)
    client.force_login(study_admin)
    response = client.post(gold_url(study, summary), post)
    assert response.status_code == 400
    assert named in response.content.decode()
    assert not ExpectedAnswer.objects.exists()


@pytest.mark.django_db
def test_gold_pages_of_another_study_are_404(client, study, study_admin):
    other = StudyFactory()
    theirs = SummaryFactory(source__study=other)
    ours = SummaryFactory(source__study=study)
    client.force_login(study_admin)
    assert client.get(f"/studies/{other.slug}/qualification/").status_code == 404
    assert client.get(gold_url(other, theirs)).status_code == 404
    # Our study's address with their summary: 404 too, and nothing saved through it.
    assert client.get(f"/studies/{study.slug}/gold/{theirs.uuid}/").status_code == 404
    assert client.post(f"/studies/{study.slug}/gold/{theirs.uuid}/", {"overall": "3"}).status_code == 404
    assert client.get(gold_url(study, ours)).status_code == 200
    assert not ExpectedAnswer.objects.exists()


@pytest.mark.django_db
def test_the_admin_sets_the_pass_rule_on_the_page(client, study, study_admin):
    client.force_login(study_admin)
    url = f"/studies/{study.slug}/qualification/"
    page = client.get(url).content.decode()
    assert 'name="tolerance_overall"' in page and 'value="feedback"' not in page  # free text: not scorable
    bad = client.post(url, {"threshold": "150", "questions": ["overall"], "attempts_allowed": "1"})
    assert bad.status_code == 400 and "Pass mark" in bad.content.decode()
    bad = client.post(
        url, {"threshold": "80", "questions": ["overall"], "attempts_allowed": "1", "tolerance_overall": "9"}
    )
    assert bad.status_code == 400 and "Tolerance on" in bad.content.decode()
    bad = client.post(url, {"threshold": "80", "attempts_allowed": "1"})
    assert bad.status_code == 400 and "Questions scored" in bad.content.decode()
    assert not QualificationRule.objects.exists()
    ok = client.post(
        url,
        {
            "threshold": "75",
            "questions": ["overall", "failure_modes"],
            "attempts_allowed": "2",
            "tolerance_overall": "1",
        },
    )
    assert ok.status_code == 302
    rule = QualificationRule.objects.get()
    assert (rule.version, rule.threshold, rule.questions, rule.tolerances, rule.attempts_allowed) == (
        1,
        0.75,
        ["failure_modes", "overall"],
        {"overall": 1},
        2,
    )
    assert rule.created_by == study_admin
    assert "at least 75 % of the answers" in client.get(url).content.decode()


@pytest.mark.django_db
def test_the_retry_button_gives_a_screened_out_rater_another_attempt(client, study, study_admin, rater_a, rater_b):
    gold = SummaryFactory(source__study=study)
    record_expected_answer(study=study, summary=gold, purpose="gold", answers={"overall": 5})
    qual = create_batch(
        study=study,
        name="screen",
        kind="qualification",
        raters=[rater_a, rater_b],
        design="k_raters",
        k=1,
        seed=1,
        gold=[gold],
    )
    set_qualification_rule(study=study, threshold=1.0, questions=["overall"], tolerances={}, attempts_allowed=1)
    a = qual.assignments.get(rater=rater_a)
    submit_rating(assignment=a, rater=rater_a, answers={"overall": 1}, version=a.version)
    assert qualification_state(study=study, rater=rater_a) == "failed"
    client.force_login(study_admin)
    url = f"/studies/{study.slug}/qualification/"
    page = client.get(url).content.decode()
    assert "0/1 (0 %) failed" in page and page.count('value="retry"') == 1  # rater_b is pending
    # A rater who has not failed, or who is not in the qualification: refused, nothing recorded.
    for who in ("rater_b", "nobody"):
        refused = client.post(url, {"action": "retry", "rater": who}, follow=True)
        assert "may try the qualification again" not in refused.content.decode()
    assert not QualificationRetry.objects.exists()
    done = client.post(url, {"action": "retry", "rater": "rater_a"}, follow=True)
    assert "rater_a may try the qualification again" in done.content.decode()
    assert QualificationRetry.objects.get().granted_by == study_admin
    assert qualification_state(study=study, rater=rater_a) == "pending"


@pytest.mark.django_db
def test_raters_cannot_reach_or_use_the_qualification_pages(client, study, rater_a):
    summary = SummaryFactory(source__study=study)
    add_study_member(study=study, user=rater_a, role=StudyMembership.Role.RATER)
    client.force_login(rater_a)
    url = f"/studies/{study.slug}/qualification/"
    assert client.get(url).status_code == 404
    assert client.post(url, {"threshold": "0", "questions": ["overall"], "attempts_allowed": "1"}).status_code == 404
    assert client.post(gold_url(study, summary), {"overall": "3", "purpose": "gold"}).status_code == 404
    assert not QualificationRule.objects.exists() and not ExpectedAnswer.objects.exists()


@pytest.mark.django_db
def test_the_batch_builder_makes_a_qualification_batch_of_the_gold_items(client, study, study_admin, rater_a):
    gold = SummaryFactory(source__study=study, key="gold-item")
    for _ in range(3):
        SummaryFactory(source__study=study)
    record_expected_answer(study=study, summary=gold, purpose="gold", answers={"overall": 4})
    add_study_member(study=study, user=rater_a, role=StudyMembership.Role.RATER)
    client.force_login(study_admin)
    form = {"name": "screen", "kind": "qualification", "raters": [rater_a.pk], "design": "k_raters", "k": 1}
    form |= {"share": 0.2, "m": 1, "seed": 3, "blinded": "on"}
    # Without gold items: refused at the field, nothing made.
    refused = client.post(f"/studies/{study.slug}/batches/new/", form)
    assert refused.status_code == 400 and "a qualification batch is made of gold items" in refused.content.decode()
    made = client.post(f"/studies/{study.slug}/batches/new/", form | {"gold": "gold-item"})
    assert made.status_code == 302
    batch = study.batches.get(name="screen")
    assert batch.kind == "qualification"
    assert list(batch.assignments.values_list("summary__key", flat=True)) == ["gold-item"]


@pytest.mark.django_db
def test_the_gold_form_asks_per_finding_questions_finding_by_finding(client, admin_user, rater_a):
    """FactPICO: its per-finding question is one row of radios per finding; its highlight
    questions are not on the form (they need the rating page's script)."""
    from tests.annotate.factpico import make_factpico_assignment

    assignment, finding = make_factpico_assignment(rater_a)
    study, summary = assignment.study, assignment.summary
    client.force_login(admin_user)
    page = client.get(gold_url(study, summary)).content.decode()
    assert f'name="evidence__{finding.uuid}"' in page
    assert "added_info__json" not in page and 'id="question-contradictions"' not in page
    bad = client.post(gold_url(study, summary), {f"evidence__{finding.uuid}": "9", "purpose": "training"})
    assert bad.status_code == 400 and not ExpectedAnswer.objects.exists()
    ok = client.post(
        gold_url(study, summary),
        {"population": "4", f"evidence__{finding.uuid}": "2", "purpose": "training", "explanation": "See finding 1."},
    )
    assert ok.status_code == 302
    assert ExpectedAnswer.objects.get().answers == {"population": 4, "evidence": {str(finding.uuid): 2}}
