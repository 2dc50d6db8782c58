"""A rater rates a demo answer to a clinical question in a real browser: the question is
shown, a citation [n] highlights its article when hovered, every judgement has a reason."""

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command

from annotate.models import Assignment
from annotate.selectors.queue import revision_answers
from literature.demo import QUESTION_STUDY
from literature.models import Question
from tests.browser.conftest import log_in, open_item
from tests.factories import revision_history

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_rater_rates_a_demo_answer_with_a_citation_hover(page, settings):
    settings.DEBUG, settings.DEMO_PASSWORD = True, "browser-demo-password"
    call_command("load_question_demo")
    rater = get_user_model().objects.get(username="rater1")
    # An answer that cites its article.
    assignment = next(
        a
        for a in Assignment.objects.filter(study__slug=QUESTION_STUDY, rater=rater).order_by("position")
        if "[1]" in a.summary.text
    )
    question = Question.objects.get(uuid=assignment.summary.metadata["question"])
    log_in(page, "rater1", "browser-demo-password")
    open_item(page, assignment)

    assert page.locator(".question-text").inner_text().strip() == question.text
    assert page.locator("#summary-heading").inner_text().strip() == "Answer"
    cite = page.locator("#summary-text .cite", has_text="[1]").first
    assert "cite-missing" not in cite.get_attribute("class")
    linked = page.locator(".sentences li.ref-linked")
    assert linked.count() == 0
    cite.hover()
    article_one = sum(s.ref == "1" for s in assignment.summary.source.sentences)
    linked.first.wait_for(state="attached")
    assert linked.count() == article_one > 0
    assert all(li.get_attribute("data-ref") == "1" for li in linked.all())
    page.mouse.move(0, 0)
    page.wait_for_function("() => document.querySelectorAll('.sentences li.ref-linked').length === 0")

    choices = {
        "tldr_correct": ("4", "Matches the cited trial."),
        "citations_supported": ("3", "Article [1] says it, with a weaker quote."),
        "important_missing": ("no", "Only one trial is relevant."),
        "evidence_strength": ("3", "Says one trial but not its size."),
        "could_mislead": ("no", "It states its limits."),
    }
    for key, (value, reason) in choices.items():
        page.locator(f"label[for='q-{key}-{value}']").click()
        page.locator(f"#q-{key}-rationale").fill(reason)
    page.get_by_role("button", name="Submit").click()
    page.wait_for_url(lambda url: str(assignment.uuid) not in url)

    revisions = revision_history(assignment)
    assert [r.status for r in revisions] == ["submitted"]
    answers, rationales = revision_answers(revisions[0])
    expected = {k: int(v) if v.isdigit() else v for k, (v, _) in choices.items()}
    assert {k: answers[k] for k in choices} == expected
    assert {k: rationales[k] for k in choices} == {k: reason for k, (_, reason) in choices.items()}
