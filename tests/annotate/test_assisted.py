"""The assisted condition: raters see the pipeline's claim checks, and each rating
records that they did."""

import pytest

from annotate.models import Revision
from annotate.services.ratings import submit_rating
from annotate.services.summaries import record_claims
from tests.factories import AssignmentFactory, StudyFactory, SummaryFactory

CLAIM = {
    "text": "Drug A lowered blood pressure",
    "verdict": "not_supported",
    "explanation": "CRITIQUE-<b>no</b>-SUCH-RESULT",
}


@pytest.mark.django_db
@pytest.mark.parametrize("assisted", [True, False])
def test_claim_checks_are_shown_only_in_the_assisted_condition(client, rater_a, assisted):
    study = StudyFactory(assisted=assisted)
    summary = SummaryFactory(source__study=study)
    record_claims(summary=summary, claims=[CLAIM])
    assignment = AssignmentFactory(summary=summary, rater=rater_a)
    client.force_login(rater_a)
    html = client.get(f"/rate/{assignment.uuid}/").content.decode()
    assert ("CRITIQUE-&lt;b&gt;no&lt;/b&gt;-SUCH-RESULT" in html) is assisted
    assert "<b>no</b>" not in html
    assert "secret-model-x" not in html  # the generator stays hidden either way
    submit_rating(assignment=assignment, rater=rater_a, answers={"overall": 3}, version=assignment.version)
    assert Revision.objects.get().assisted is assisted
