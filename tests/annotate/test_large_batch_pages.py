"""The batch page and the monitor on batches of different sizes (make_large_study): the same
queries whatever the size, a page of assignments at a time, no answers read that the page
does not show, and the monitor's figures computed once per state of the batch."""

import re

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test.utils import CaptureQueriesContext

from annotate.models import Assignment, Batch
from annotate.services.assignments import withdraw_assignment
from datasets.large_study import make_large_study

pytestmark = pytest.mark.django_db


def large(slug: str, sources: int):
    result = make_large_study(slug=slug, sources=sources, raters=3, seed=1)
    return result.study, result.batch, get_user_model().objects.get(username=f"{slug}-admin")


def get(client, url: str):
    with CaptureQueriesContext(connection) as queries:
        response = client.get(url)
    assert response.status_code == 200
    return response.content.decode(), [q["sql"] for q in queries]


def test_the_batch_page_and_the_disagreements_list_a_page_at_a_time(client):
    study, batch, admin = large("big", 50)  # 450 assignments, 150 items
    client.force_login(admin)
    url = f"/studies/{study.slug}/batches/{batch.uuid}/"
    first, _ = get(client, url)
    assert first.count('value="withdraw"') == 100
    assert "Assignments 1–100 of 450" in first
    assert 'href="?page=2#assignments"' in first
    last, _ = get(client, url + "?page=5")
    assert last.count('value="withdraw"') == 50
    assert "Assignments 401–450 of 450" in last
    page, _ = get(client, url + "disagreements/?question=overall&threshold=0")
    assert "150 items with disagreement: 1–100 shown." in page
    assert page.count("<tr><td><a href=") == 100
    following, _ = get(client, url + "disagreements/?question=overall&threshold=0.0&phase=initial&sort=spread&page=2")
    assert following.count("<tr><td><a href=") == 50


def test_the_batch_page_reads_neither_answers_without_gold_items_nor_summary_texts(client):
    """Gold accuracy needs answers to gold items only; progress needs states, not texts."""
    sizes = {}
    for slug, sources in (("small", 2), ("big", 20)):
        study, batch, admin = large(slug, sources)
        client.force_login(admin)
        _, queries = get(client, f"/studies/{study.slug}/batches/{batch.uuid}/")
        assert not [q for q in queries if '"annotate_rating"' in q]
        assert not [q for q in queries if '"annotate_summary"."text"' in q]
        sizes[slug] = len(queries)
    assert sizes["small"] == sizes["big"]


def test_the_monitor_reads_the_answers_once_per_state_of_the_batch(client):
    study, batch, admin = large("big", 10)  # 90 assignments
    client.force_login(admin)
    url = f"/studies/{study.slug}/batches/{batch.uuid}/monitor/"
    page, queries = get(client, url)
    assert [q for q in queries if '"annotate_rating"' in q]
    again, queries = get(client, url)
    assert not [q for q in queries if '"annotate_rating"' in q]
    assert re.sub(r"csrfmiddlewaretoken\" value=\"[^\"]+", "", again) == re.sub(
        r"csrfmiddlewaretoken\" value=\"[^\"]+", "", page
    )
    withdraw_assignment(assignment=Assignment.objects.filter(batch=batch).first())
    _, queries = get(client, url)
    assert [q for q in queries if '"annotate_rating"' in q]  # a change: computed again


def test_the_monitor_makes_the_same_queries_whatever_the_batch_size(client):
    counts = {}
    for slug, sources in (("small", 2), ("big", 20)):
        study, batch, admin = large(slug, sources)
        client.force_login(admin)
        url = f"/studies/{study.slug}/batches/{batch.uuid}/monitor/"
        counts[slug] = [len(get(client, url)[1]), len(get(client, url)[1])]
    assert counts["small"] == counts["big"]
    assert Batch.objects.count() == 2
