"""A submit costs a fixed number of queries, whatever the size of the rating.

FactPICO is the largest rubric: a rating per PICO item, one per finding of the source, a
rationale on most, and any number of "added information" spans. The queries of one
submit (and of a draft save over an existing draft) are counted on the real database for
a small and a large rating: the count must not grow with the rating, and stays under a
ceiling so that a new per-answer query cannot slip in unnoticed.
"""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from annotate.models import Finding, Rating, Span
from tests.annotate.factpico import complete_answers, make_factpico_assignment
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db

# Measured when the writes became bulk (61 before for the small rating, growing by 7 per
# answer): reading the assignment and findings (2), the version claim (3), the revision
# (2), one insert per table (3), the revision's status (1), the answer read back (3).
MAX_SUBMIT_QUERIES = 16
PHRASES = ("Grown-ups", "asthma", "drug A", "a dummy pill", "Attacks fell")


def rating(rater, *, findings: int, spans: int):
    assignment, first = make_factpico_assignment(rater)
    extra = [
        Finding.objects.create(
            source=first.source,
            index=k,
            intervention=f"drug A dose {k}",
            comparator="placebo",
            outcome="asthma attacks",
            label="significantly decreased",
            start=first.start,
            end=first.end,
            evidence=first.evidence,
        )
        for k in range(1, findings)
    ]
    answers, rationales = complete_answers(assignment, first)
    for finding in extra:
        answers["evidence"][str(finding.uuid)] = 2
        rationales["evidence"][str(finding.uuid)] = f"Dose {finding.index} not reported."
    text = assignment.summary.text
    answers["added_info"] = [
        {
            "start": text.index(phrase),
            "end": text.index(phrase) + len(phrase),
            "text": phrase,
            "answers": {"factual": "no"},
            "rationale": f"{phrase!r} is not in the source.",
        }
        for phrase in PHRASES[:spans]
    ]
    return assignment, answers, rationales


def queries(client, method, assignment, answers, rationales):
    url = f"/api/assignments/{assignment.uuid}/" + ("submit/" if method == "post" else "rating/")
    assignment.refresh_from_db()
    body = {"answers": answers, "rationales": rationales, "version": assignment.version}
    with CaptureQueriesContext(connection) as captured:
        response = getattr(client, method)(url, body, format="json")
    assert response.status_code == 200, response.content
    return len(captured.captured_queries)


def client_for(rater):
    client = APIClient()
    client.force_authenticate(rater)
    return client


def test_a_submit_costs_the_same_queries_for_a_small_and_a_large_rating():
    small_rater, large_rater = UserFactory(), UserFactory()
    small, small_answers, small_rationales = rating(small_rater, findings=1, spans=1)
    large, large_answers, large_rationales = rating(large_rater, findings=6, spans=5)

    small_count = queries(client_for(small_rater), "post", small, small_answers, small_rationales)
    large_count = queries(client_for(large_rater), "post", large, large_answers, large_rationales)

    # The large rating really is larger, and all of it was stored.
    assert (
        Rating.objects.filter(revision__assignment=large).count()
        == Rating.objects.filter(revision__assignment=small).count() + 5
    )
    assert Span.objects.filter(revision__assignment=large).count() == 5
    assert large_count == small_count
    assert small_count <= MAX_SUBMIT_QUERIES


def test_saving_over_a_draft_and_then_submitting_stay_constant():
    counts = {}
    for size, (findings, spans) in {"small": (1, 1), "large": (6, 5)}.items():
        rater = UserFactory()
        client = client_for(rater)
        assignment, answers, rationales = rating(rater, findings=findings, spans=spans)
        first = {key: value for key, value in answers.items() if key != "population"}
        queries(client, "put", assignment, first, rationales)  # the first draft
        # Over it: a changed rating, a changed and a removed rationale, new spans.
        changed = dict(answers, comparator=2)
        changed_rationales = {key: value for key, value in rationales.items() if key != "intervention"}
        changed_rationales["comparator"] = "Vague."
        counts[size] = (
            queries(client, "put", assignment, changed, changed_rationales),
            queries(client, "post", assignment, answers, rationales),
        )
    assert counts["large"] == counts["small"]
    assert max(counts["small"]) <= MAX_SUBMIT_QUERIES + 3  # a draft may also delete what went away
