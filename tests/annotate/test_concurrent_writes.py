"""Two writers holding the same version race; exactly one wins, the other gets a
conflict, and the winner's answer is what is stored."""

import threading

import pytest
from django.db import connection

from annotate.models import Assignment
from annotate.selectors.queue import revision_answers
from annotate.services.ratings import save_draft
from core.exceptions import StaleWriteError
from tests.factories import revision_history


@pytest.mark.django_db(transaction=True)
def test_racing_writers_with_the_same_version_one_wins(assignment_a, rater_a):
    barrier = threading.Barrier(2)
    outcomes = {}

    def write(score):
        try:
            assignment = Assignment.objects.get(pk=assignment_a.pk)
            barrier.wait(timeout=10)
            save_draft(assignment=assignment, rater=rater_a, answers={"overall": score}, version=1)
            outcomes[score] = "saved"
        except StaleWriteError:
            outcomes[score] = "conflict"
        finally:
            connection.close()

    threads = [threading.Thread(target=write, args=(score,)) for score in (2, 5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert sorted(outcomes.values()) == ["conflict", "saved"]
    winner = next(score for score, outcome in outcomes.items() if outcome == "saved")
    assignment_a.refresh_from_db()
    assert assignment_a.version == 2
    [revision] = revision_history(assignment_a)
    assert revision_answers(revision)[0] == {"overall": winner}
