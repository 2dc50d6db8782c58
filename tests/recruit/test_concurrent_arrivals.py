"""30 participants arriving at once through one link (real threads, each on its own
database connection): no item ever has more than k live raters, the participant limit
holds, and nobody gets an item twice. Runs on SQLite and on PostgreSQL (DATABASE_URL)."""

import threading
from collections import Counter

import pytest
from django.contrib.auth import get_user_model
from django.db import connection

from annotate.models import Assignment
from recruit.models import Participant, RecruitmentLink
from recruit.services import participation
from tests.recruit.helpers import make_link

ARRIVALS = 30


def _arrive_all(link_pk: int, ids: list[str]) -> dict[int, str]:
    """Each id's arrival in a thread of its own, all at once: "in" or the refusal's code, by
    the id's place in `ids`."""
    barrier = threading.Barrier(len(ids))
    outcomes: dict[int, str] = {}

    def go(index: int, external_id: str):
        try:
            link = RecruitmentLink.objects.get(pk=link_pk)
            barrier.wait(timeout=300)
            address = f"10.0.0.{external_id[-3:]}"
            participation.arrive(link=link, panel="prolific", external_id=external_id, address=address)
            outcomes[index] = "in"
        except participation.ArrivalRefused as exc:
            outcomes[index] = exc.code
        finally:
            connection.close()

    threads = [threading.Thread(target=go, args=(i, external_id)) for i, external_id in enumerate(ids)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=600)
    return outcomes


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(("summaries", "items"), [(20, 3), (5, 1)])
def test_thirty_arrivals_at_once_never_exceed_k_raters_per_item(study, settings, summaries, items):
    """k = 2: 2 x summaries ratings in all (40, or 10). 30 participants want `items` each
    (90, or 30), so the pool runs dry: every summary ends with exactly 2 live raters, and
    those who arrive after that are turned away at once (no account, the screen-out code)."""
    settings.RECRUIT_ARRIVALS_PER_ADDRESS = 1000
    link = make_link(study, items=items, k=2, summaries=summaries, participants=100)
    outcomes = _arrive_all(link.pk, [f"PID{i:04d}" for i in range(ARRIVALS)])
    taken = -(-2 * summaries // items)  # participants the 2 x summaries places fill
    assert Counter(outcomes.values()) == {"in": taken, "refused": ARRIVALS - taken}
    live = Assignment.objects.filter(batch=link.batch).exclude(state="withdrawn")
    assert Participant.objects.filter(link=link).count() == live.values("rater").distinct().count() == taken
    per_item = Counter(live.values_list("summary_id", flat=True))
    assert max(per_item.values()) == 2
    assert len(per_item) == summaries and sum(per_item.values()) == 2 * summaries
    per_pair = Counter(live.values_list("summary_id", "rater_id"))
    assert max(per_pair.values()) == 1
    per_rater = Counter(live.values_list("rater_id", flat=True))
    assert max(per_rater.values()) <= items


@pytest.mark.django_db(transaction=True)
def test_thirty_arrivals_at_once_respect_the_participant_limit(study, settings):
    settings.RECRUIT_ARRIVALS_PER_ADDRESS = 1000
    link = make_link(study, items=1, k=3, summaries=10, participants=25)
    outcomes = _arrive_all(link.pk, [f"PID{i:04d}" for i in range(ARRIVALS)])
    assert Counter(outcomes.values()) == {"in": 25, "refused": 5}
    assert Participant.objects.filter(link=link).count() == 25
    per_item = Counter(
        Assignment.objects.filter(batch=link.batch).exclude(state="withdrawn").values_list("summary_id", flat=True)
    )
    assert max(per_item.values()) <= 3 and sum(per_item.values()) == 25


@pytest.mark.django_db(transaction=True)
def test_the_same_participant_arriving_eight_times_at_once_gets_one_account(study, settings):
    """A double click, or a panel's retry: one participant, one account, one set of items.
    A twin that looked before the first was made is asked to reload, and its account is
    undone with its transaction."""
    settings.RECRUIT_ARRIVALS_PER_ADDRESS = 1000
    link = make_link(study, items=3, k=2, summaries=10, participants=100)
    users_before = get_user_model().objects.count()
    outcomes = _arrive_all(link.pk, ["PID0001"] * 8)
    assert len(outcomes) == 8 and set(outcomes.values()) <= {"in", "refused"} and "in" in outcomes.values()
    assert Participant.objects.filter(link=link).count() == 1
    assert get_user_model().objects.count() == users_before + 1
    live = Assignment.objects.filter(batch=link.batch).exclude(state="withdrawn")
    assert live.count() == 3 and live.values("rater").distinct().count() == 1
