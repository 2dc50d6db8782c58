"""Crowd links: signed, refusing tampering, creating or resuming a participant, limits,
and the end with the completion or screen-out code."""

import pytest
from django.core import signing

from annotate.models import Assignment, ConsentDecision
from core.exceptions import ApplicationError
from recruit.models import Participant
from recruit.services import links, participation
from tests.recruit.helpers import COMPLETE, SCREENOUT, arrival_url, make_link, prolific_query, set_up_onboarding

pytestmark = pytest.mark.django_db


def test_a_participant_arrives_gets_items_and_is_signed_in(client, study):
    link = make_link(study, items=3, k=2)
    response = client.get(arrival_url(link, pid="PID0001"))
    assert response.status_code == 302
    assert response["Location"] == f"/r/s/{study.slug}/next/"
    participant = Participant.objects.get()
    assert (participant.panel, participant.external_id, participant.panel_study_id, participant.panel_session_id) == (
        "prolific",
        "PID0001",
        "STUDY1",
        "SESSION1",
    )
    assert not participant.user.has_usable_password()
    assert Assignment.objects.filter(rater=participant.user, batch=link.batch).count() == 3
    first = client.get(response["Location"])
    assert first.status_code == 302 and first["Location"].startswith("/rate/")


def test_the_same_participant_coming_back_resumes_their_account(client, study):
    link = make_link(study)
    client.get(arrival_url(link, pid="PID0001"))
    client.logout()
    client.get(arrival_url(link, pid="PID0001"))
    assert Participant.objects.count() == 1
    assert Assignment.objects.filter(batch=link.batch).count() == 3


@pytest.mark.parametrize(
    "mangle",
    [
        lambda t: t[:-1] + ("A" if t[-1] != "A" else "B"),  # the signature changed
        lambda t: signing.dumps("00000000-0000-0000-0000-000000000000", salt=links.LINK_SALT)[:-2] + t[-2:],
        lambda t: t.split(":")[0] + ":forged",
        lambda t: signing.dumps("x", salt="another-salt"),
    ],
)
def test_a_tampered_link_is_refused_and_creates_nothing(client, study, mangle):
    link = make_link(study)
    token = mangle(links.link_token(link))
    response = client.get(f"/r/{token}/{prolific_query()}")
    assert response.status_code == 404
    assert Participant.objects.count() == 0


def test_a_link_naming_another_link_by_guessing_is_refused(client, study):
    """The token is signed: a validly formed token for a uuid that was never signed fails."""
    link = make_link(study)
    forged = f"{link.uuid}:{'A' * 27}"
    assert client.get(f"/r/{forged}/{prolific_query()}").status_code == 404
    assert Participant.objects.count() == 0


def test_a_disabled_link_lets_nobody_new_in_and_gives_the_screenout_code(client, study):
    link = make_link(study)
    links.set_link_enabled(link=link, enabled=False)
    response = client.get(arrival_url(link))
    assert response.status_code == 403
    assert f'id="completion-code">{SCREENOUT}<' in response.content.decode()
    assert Participant.objects.count() == 0


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("", "PROLIFIC_PID"),
        ("?PROLIFIC_PID=", "PROLIFIC_PID"),
        ("?PROLIFIC_PID=<script>", "PROLIFIC_PID"),
        ("?PROLIFIC_PID=" + "a" * 65, "PROLIFIC_PID"),
        ("?PROLIFIC_PID=abc&STUDY_ID=has space", "STUDY_ID"),
        ("?participant=a%00b", "participant"),
    ],
)
def test_bad_panel_ids_are_a_400_naming_the_parameter(client, study, query, field):
    link = make_link(study)
    response = client.get(f"/r/{links.link_token(link)}/{query}")
    assert response.status_code == 400
    assert field in response.content.decode()
    assert Participant.objects.count() == 0


def test_a_generic_panel_participant(client, study):
    link = make_link(study)
    assert client.get(f"/r/{links.link_token(link)}/?participant=worker-17").status_code == 302
    assert Participant.objects.get().panel == "generic"


def test_the_participant_limit_holds(client, study):
    link = make_link(study, participants=2)
    for pid in ("P1", "P2"):
        client.logout()
        assert client.get(arrival_url(link, pid=pid)).status_code == 302
    client.logout()
    response = client.get(arrival_url(link, pid="P3"))
    assert response.status_code == 403
    assert "all the participants it needs" in response.content.decode()
    assert f'id="completion-code">{SCREENOUT}<' in response.content.decode()
    assert Participant.objects.count() == 2


def test_account_creation_is_rate_limited_per_address(client, study, settings):
    settings.RECRUIT_ARRIVALS_PER_ADDRESS = 3
    link = make_link(study, participants=100)
    for i in range(3):
        client.logout()
        assert client.get(arrival_url(link, pid=f"P{i}")).status_code == 302
    client.logout()
    assert client.get(arrival_url(link, pid="P9")).status_code == 429
    assert Participant.objects.count() == 3
    # From another address the link still works; a returning participant is no new account.
    assert client.get(arrival_url(link, pid="P9"), REMOTE_ADDR="10.0.0.7").status_code == 302
    client.logout()
    assert client.get(arrival_url(link, pid="P0")).status_code == 302


def test_finishing_all_items_shows_and_redirects_with_the_completion_code(client, study):
    from annotate.services.ratings import submit_rating
    from tests.conftest import GOOD_ANSWERS

    link = make_link(study, items=2)
    client.get(arrival_url(link))
    participant = Participant.objects.get()
    for a in Assignment.objects.filter(rater=participant.user):
        submit_rating(assignment=a, rater=participant.user, answers=GOOD_ANSWERS, version=a.version)
    response = client.get(f"/r/s/{study.slug}/next/", follow=True)
    participant.refresh_from_db()
    assert participant.outcome == "completed"
    page = response.content.decode()
    assert f'id="completion-code">{COMPLETE}<' in page
    assert f'content="5;url=http://127.0.0.1:9/complete?cc={COMPLETE}"' in page


def test_declining_consent_ends_with_the_screenout_code_and_releases_the_items(client, study):
    set_up_onboarding(study)
    link = make_link(study, items=3)
    client.get(arrival_url(link))
    participant = Participant.objects.get()
    page = client.get(f"/r/s/{study.slug}/next/", follow=True)
    assert page.request["PATH_INFO"] == f"/r/s/{study.slug}/consent/"
    version = page.context["version"]
    response = client.post(
        f"/r/s/{study.slug}/consent/", {"decision": "decline", "version": str(version.uuid)}, follow=True
    )
    assert f'id="completion-code">{SCREENOUT}<' in response.content.decode()
    participant.refresh_from_db()
    assert participant.outcome == "declined"
    decision = ConsentDecision.objects.get()
    assert (decision.accepted, decision.version.number) == (False, 1)
    assert not Assignment.objects.filter(rater=participant.user).exclude(state="withdrawn").exists()
    # Finished: their pages lead to the end, whatever they try.
    assert client.get(f"/r/s/{study.slug}/next/", follow=True).request["PATH_INFO"] == "/r/done/"


def test_finish_participation_keeps_the_first_outcome(study):
    link = make_link(study)
    participant, _ = participation.arrive(link=link, panel="prolific", external_id="P1")
    participation.finish_participation(participant=participant, outcome="screened_out")
    again = participation.finish_participation(participant=participant, outcome="completed")
    assert again.outcome == "screened_out"
    with pytest.raises(ApplicationError):
        participation.finish_participation(participant=participant, outcome="bored")
    with pytest.raises(ApplicationError):
        participation.finish_participation(participant=participant, outcome="")


def test_the_admin_creates_and_disables_a_link_on_the_page(client, study, rater_a, outsider):
    from annotate.models import StudyMembership
    from annotate.services.members import add_study_member
    from recruit.models import RecruitmentLink
    from tests.factories import SummaryFactory

    for _ in range(3):
        SummaryFactory(source__study=study)
    add_study_member(study=study, user=rater_a, role=StudyMembership.Role.ADMIN)
    client.force_login(rater_a)
    url = f"/studies/{study.slug}/recruitment/"
    form = {
        "name": "wave 1",
        "raters_per_item": 2,
        "items_per_participant": 2,
        "max_participants": 10,
        "time_budget_minutes": 45,
        "lease_minutes": 20,
        "completion_url": "https://app.prolific.com/submissions/complete",
        "completion_code": "CODE1",
        "screenout_code": "CODE1",
    }
    same = client.post(url, form)
    assert same.status_code == 400 and "screenout_code" in same.content.decode()
    bad = client.post(url, {**form, "screenout_code": "NOPE", "raters_per_item": 0})
    assert bad.status_code == 400 and "raters_per_item" in bad.content.decode()
    assert not RecruitmentLink.objects.exists()
    assert client.post(url, {**form, "screenout_code": "NOPE"}).status_code == 302
    link = RecruitmentLink.objects.get()
    assert (link.batch.raters_per_item, link.batch.name, len(link.batch.design["pool"])) == (2, "crowd: wave 1", 3)
    page = client.get(url).content.decode()
    token = links.link_token(link)
    assert f"/r/{token}/?PROLIFIC_PID={{{{%PROLIFIC_PID%}}}}&amp;STUDY_ID=" in page

    client.force_login(outsider)
    assert client.post(f"{url}{link.uuid}/", {"enabled": "0"}).status_code == 404
    client.force_login(rater_a)
    assert client.post(f"{url}{link.uuid}/", {"enabled": "0"}).status_code == 302
    link.refresh_from_db()
    assert not link.enabled
    client.logout()
    assert client.get(arrival_url(link)).status_code == 403
