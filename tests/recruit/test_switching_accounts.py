"""A recruitment link opened while signed in never switches accounts on a GET: the page
asks first, and only its POST (CSRF-protected) signs the person in as a new participant,
with the panel's ids carried in the form. The link's own participant continues as before."""

import re

import pytest
from django.contrib.auth import SESSION_KEY as AUTH_SESSION_KEY
from django.test import Client

from annotate.models import StudyMembership
from annotate.services.members import add_study_member
from recruit.middleware import SESSION_KEY
from recruit.models import Participant
from recruit.services import links
from tests.recruit.helpers import arrival_url, make_link

pytestmark = pytest.mark.django_db

PID, STUDY_ID, SESSION_ID = "5f8a1b2c3d4e5f6a7b8c9d0e", "PROLIFICSTUDY9", "SESS77"
HIDDEN = re.compile(r'<input type="hidden" name="([^"]+)" value="([^"]*)">')


@pytest.fixture
def signed_in_rater(study, rater_a):
    add_study_member(study=study, user=rater_a, role=StudyMembership.Role.RATER)
    client = Client(enforce_csrf_checks=True)
    client.force_login(rater_a)
    return client, rater_a


def session_user_pk(client) -> int:
    return int(client.session[AUTH_SESSION_KEY])


def form_fields(body: str) -> dict[str, str]:
    return dict(HIDDEN.findall(body))


def form_action(body: str) -> str:
    return re.search(r'<form method="post" action="([^"]+)" id="switch-form">', body).group(1)


def test_a_get_while_signed_in_asks_and_leaves_the_session_alone(study, signed_in_rater):
    client, rater = signed_in_rater
    link = make_link(study)
    url = arrival_url(link, pid=PID, study_id=STUDY_ID, session=SESSION_ID)
    response = client.get(url)
    body = response.content.decode()
    assert response.status_code == 200
    assert "You are signed in as <strong>rater_a</strong>" in body
    assert "Continue as a new participant" in body and '<header class="site">' in body
    assert 'href="/rate/"' in body  # a way back to the queue instead
    # The panel's ids ride in the form, not in the URL it posts to.
    assert form_action(body) == url.split("?")[0]
    fields = form_fields(body)
    assert {k: fields[k] for k in ("PROLIFIC_PID", "STUDY_ID", "SESSION_ID")} == {
        "PROLIFIC_PID": PID,
        "STUDY_ID": STUDY_ID,
        "SESSION_ID": SESSION_ID,
    }
    assert session_user_pk(client) == rater.pk and SESSION_KEY not in client.session
    assert Participant.objects.count() == 0


def test_the_post_continues_as_a_new_participant_with_the_panel_ids(study, signed_in_rater):
    client, rater = signed_in_rater
    link = make_link(study)
    page = client.get(arrival_url(link, pid=PID, study_id=STUDY_ID, session=SESSION_ID)).content.decode()
    response = client.post(form_action(page), form_fields(page))
    assert response.status_code == 302 and response["Location"] == f"/r/s/{study.slug}/next/"
    participant = Participant.objects.get()
    assert (participant.panel, participant.external_id, participant.panel_study_id, participant.panel_session_id) == (
        "prolific",
        PID,
        STUDY_ID,
        SESSION_ID,
    )
    assert session_user_pk(client) == participant.user_id != rater.pk
    assert client.session[SESSION_KEY] == participant.pk


def test_a_generic_panels_ids_survive_the_question_too(study, signed_in_rater):
    client, rater = signed_in_rater
    link = make_link(study)
    page = client.get(f"/r/{links.link_token(link)}/?participant=worker-17&study=wave2").content.decode()
    fields = form_fields(page)
    assert fields["participant"] == "worker-17" and fields["study"] == "wave2" and "session" not in fields
    client.post(form_action(page), fields)
    participant = Participant.objects.get()
    assert (participant.panel, participant.external_id, participant.panel_study_id) == ("generic", "worker-17", "wave2")


def test_a_post_without_the_csrf_token_is_refused(study, signed_in_rater):
    client, rater = signed_in_rater
    link = make_link(study)
    response = client.post(
        f"/r/{links.link_token(link)}/", {"PROLIFIC_PID": PID, "STUDY_ID": STUDY_ID, "SESSION_ID": SESSION_ID}
    )
    assert response.status_code == 403
    assert session_user_pk(client) == rater.pk and SESSION_KEY not in client.session
    assert Participant.objects.count() == 0


def test_a_participant_opening_their_own_link_again_continues(client, study):
    link = make_link(study)
    client.get(arrival_url(link, pid=PID))
    me = Participant.objects.get()
    again = client.get(arrival_url(link, pid=PID))
    assert again.status_code == 302 and again["Location"] == f"/r/s/{study.slug}/next/"
    assert session_user_pk(client) == me.user_id and client.session[SESSION_KEY] == me.pk
    assert Participant.objects.count() == 1


def test_a_participant_opening_the_link_with_another_panel_id_is_asked(client, study):
    link = make_link(study)
    client.get(arrival_url(link, pid="FIRST1"))
    me = Participant.objects.get()
    response = client.get(arrival_url(link, pid="SECOND2"))
    assert response.status_code == 200 and "Continue as a new participant" in response.content.decode()
    assert session_user_pk(client) == me.user_id and Participant.objects.count() == 1


def test_signed_out_arrivals_go_straight_in_as_before(client, study):
    link = make_link(study)
    response = client.get(arrival_url(link, pid=PID))
    assert response.status_code == 302 and response["Location"] == f"/r/s/{study.slug}/next/"
    assert session_user_pk(client) == Participant.objects.get().user_id
