"""A rater judges the claims of a summary in a real browser: each recorded
claim is shown on its own with the options and a rationale; the draft is saved as the
rater goes (the page's script collects the per-claim answers), survives a reload, and the
submit stores every claim's judgement. The pipeline's verdicts are never on the page."""

import re

import pytest
from playwright.sync_api import expect

from annotate.models import Claim
from annotate.selectors.queue import latest_revision, revision_answers
from annotate.services.rubrics import load_builtin_rubric
from tests.browser.conftest import log_in, open_item
from tests.factories import PASSWORD, AssignmentFactory, SourceFactory, StudyFactory, SummaryFactory, UserFactory

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SOURCE = (
    "Adults with asthma took drug A or a placebo for 12 weeks. Attacks fell from 4 to 2 a month with drug A. "
    "No serious side effects were seen."
)
SUMMARY = "Drug A halved asthma attacks in adults. It cured asthma in children. Side effects were mild."


def test_a_rater_judges_each_claim_with_a_reason(page, settings):
    settings.DEBUG = True
    rater = UserFactory(username="rater1")
    study = StudyFactory(rubric=load_builtin_rubric(key="claims"))
    summary = SummaryFactory(study=study, source=SourceFactory(study=study, text=SOURCE), text=SUMMARY)
    claims = [
        Claim.objects.create(
            summary=summary,
            index=i,
            text=text,
            verdict=verdict,
            explanation="PIPELINE-SAYS-SO",
            probability=0.31,
        )
        for i, (text, verdict) in enumerate(
            [
                ("Drug A halved asthma attacks in adults.", "supported"),
                ("It cured asthma in children.", "not_supported"),
                ("Side effects were mild.", "supported"),
            ]
        )
    ]
    assignment = AssignmentFactory(summary=summary, rater=rater, position=0)
    log_in(page, rater.username, PASSWORD)
    open_item(page, assignment)

    items = page.locator("fieldset[data-question='claims_supported'] .claim-item")
    expect(items).to_have_count(3)
    assert [t.strip() for t in items.locator("q").all_inner_texts()] == [c.text for c in claims]
    assert "PIPELINE-SAYS-SO" not in page.content()

    choices = [
        ("supported", "Attacks fell from 4 to 2 a month."),
        ("not_supported", "Only adults took part."),
        ("cannot_tell", "The source says no serious side effects; mild ones are not mentioned."),
    ]
    for claim, (value, reason) in zip(claims[:2], choices[:2], strict=True):
        page.locator(f"label[for='q-claims_supported-{claim.uuid}-{value}']").click()
        page.locator(f"#q-claims_supported-{claim.uuid}-rationale").fill(reason)
    expect(page.locator("#save-status")).to_have_text(re.compile("^Draft saved"), timeout=30000)
    page.reload()
    page.wait_for_load_state("load")
    expect(page.locator(f"#q-claims_supported-{claims[1].uuid}-not_supported")).to_be_checked()
    assert page.locator(f"#q-claims_supported-{claims[0].uuid}-rationale").input_value() == choices[0][1]

    value, reason = choices[2]
    page.locator(f"label[for='q-claims_supported-{claims[2].uuid}-{value}']").click()
    page.locator(f"#q-claims_supported-{claims[2].uuid}-rationale").fill(reason)
    page.locator("label[for='q-overall-2']").click()
    page.get_by_role("button", name="Submit").click()
    page.wait_for_url(lambda url: str(assignment.uuid) not in url, timeout=30000)

    revision = latest_revision(assignment)
    assert revision.status == "submitted"
    answers, rationales = revision_answers(revision)
    assert answers["claims_supported"] == {str(c.uuid): v for c, (v, _) in zip(claims, choices, strict=True)}
    assert rationales["claims_supported"] == {str(c.uuid): r for c, (_, r) in zip(claims, choices, strict=True)}
    assert answers["overall"] == 2
