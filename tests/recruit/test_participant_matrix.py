"""The permission matrix with participant accounts: a participant reaches its own study's
participant pages, its own items and the API calls its rating page makes, and nothing else.
Every URL pattern of the site is tried (GET and POST), with the participant's own study and
another's, so a page added later is covered without listing it here."""

import uuid

import pytest
from django.urls import URLPattern, URLResolver, get_resolver

from annotate.models import Assignment, StudyMembership
from annotate.services.members import add_study_member
from recruit.models import Participant
from tests.factories import AssignmentFactory, StudyFactory, SummaryFactory
from tests.recruit.helpers import arrival_url, make_link

pytestmark = pytest.mark.django_db

REACHABLE = {
    "recruit:next",
    "recruit:consent",
    "recruit:instructions",
    "recruit:questionnaire",
    "recruit:not-passed",
    "recruit:done",
    "recruit:leave",
    "annotate:rate",
    "annotate:feedback",
    "annotate:flag",
    "api:assignment-detail",
    "api:assignment-rating",
    "api:assignment-submit",
    "api:assignment-skip",
    "api:assignment-reopen",
    "logout",
    "recruit:arrive",
    # The language switcher and the scripts' strings: no study data (docs/languages.md).
    "set_language",
    "javascript-catalog",
}
TO_NEXT_STEP = {"home", "annotate:queue", "annotate:continue", "annotate:done"}


def _patterns(resolver, prefix="", namespace=""):
    for p in resolver.url_patterns:
        if isinstance(p, URLResolver):
            ns = f"{namespace}{p.namespace}:" if p.namespace else namespace
            yield from _patterns(p, prefix + str(p.pattern), ns)
        elif isinstance(p, URLPattern) and p.name:
            yield f"{namespace}{p.name}", prefix + str(p.pattern)


def _fill(route: str, values: dict[str, str]) -> str:
    import re

    def one(match):
        converter, name = (match.group(1) or "str"), match.group(2)
        if name in values:
            return values[name]
        return {"uuid": str(uuid.uuid4()), "int": "1", "slug": values["slug"], "path": "x"}.get(converter, "x")

    url = re.sub(r"<(?:(\w+):)?(\w+)>", one, route)
    return "/" + url.lstrip("^").rstrip("$").replace("\\Z", "")


@pytest.fixture
def world(client, study, rater_a):
    link = make_link(study, items=2)
    client.get(arrival_url(link, pid="PARTICIPANT1"))
    me = Participant.objects.get()
    mine = Assignment.objects.filter(rater=me.user).first()
    other_study = StudyFactory()
    add_study_member(study=other_study, user=rater_a, role=StudyMembership.Role.RATER)
    others = AssignmentFactory(summary=SummaryFactory(source__study=study), rater=rater_a, position=0)
    return {"me": me, "mine": mine, "other_study": other_study, "others": others}


def test_a_participant_reaches_nothing_outside_its_study(client, world, study):
    me, mine = world["me"], world["mine"]
    tried = 0
    for name, route in _patterns(get_resolver()):
        if name.startswith("admin:") or name in ("recruit:arrive",):
            continue
        for slug in (study.slug, world["other_study"].slug):
            values = {"slug": slug, "assignment_uuid": str(mine.uuid), "summary_uuid": str(mine.summary.uuid)}
            url = _fill(route, values)
            for method in ("get", "post"):
                response = getattr(client, method)(url)
                tried += 1
                if name in TO_NEXT_STEP:
                    assert response.status_code == 302, (name, url)
                    assert response["Location"] == f"/r/s/{study.slug}/next/", (name, url)
                elif name in REACHABLE and (slug == study.slug or "<slug" not in route):
                    assert response.status_code not in (403, 500), (name, url, method, response.status_code)
                else:
                    assert response.status_code in (404, 405), (name, url, method, response.status_code)
                # Leaving, or skipping every item, ends the participation (and a finished
                # participant's writes are refused): taking part again, for the next URLs.
                Participant.objects.filter(pk=me.pk).update(outcome="", finished_at=None)
                if name == "logout" and method == "post":
                    client.force_login(me.user)
                    session = client.session
                    session["recruit_participant"] = me.pk
                    session.save()
    assert tried > 200
    # The Django admin: never.
    assert client.get("/admin/").status_code in (302, 404)
    assert client.get("/admin/recruit/participant/").status_code in (302, 404)


def test_a_participant_cannot_reach_another_raters_item_or_list_studies(client, world, study):
    others = world["others"]
    assert client.get(f"/rate/{others.uuid}/").status_code == 404
    assert client.get(f"/api/assignments/{others.uuid}/").status_code == 404
    assert client.get("/api/studies/").status_code == 404
    assert client.get("/api/assignments/").status_code == 404
    assert client.get("/studies/").status_code == 404
    assert client.get(f"/r/s/{world['other_study'].slug}/next/").status_code == 404
    assert client.get(f"/rate/{world['mine'].uuid}/").status_code == 200


def test_an_ordinary_rater_cannot_reach_a_participants_pages_or_item(client, world, rater_a):
    client.logout()
    client.force_login(rater_a)
    assert client.get(f"/rate/{world['mine'].uuid}/").status_code == 404
    assert client.get("/r/done/").status_code == 404
