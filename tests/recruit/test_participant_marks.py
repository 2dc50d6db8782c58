"""What a participant may use is marked on each view (annotate.decorators): a view without
a mark is closed to them, whatever app it is in, without a list of URL names to edit."""

import pytest
from django.urls import resolve

from annotate.decorators import ParticipantAccess, participant_access
from recruit.models import Participant
from tests.recruit.helpers import arrival_url, make_link

pytestmark = pytest.mark.django_db


@pytest.mark.urls("tests.recruit.urls_with_new_views")
def test_a_new_view_is_closed_to_participants_until_it_is_marked(client, study, rater_a):
    client.get(arrival_url(make_link(study), pid="PARTICIPANT1"))
    assert Participant.objects.count() == 1
    assert client.get("/new-page/").status_code == 404
    assert client.post("/new-page/").status_code == 404
    assert client.get("/new-item-page/").status_code == 200
    client.logout()
    client.force_login(rater_a)
    assert client.get("/new-page/").status_code == 200


def test_the_marks_survive_django_and_drf_class_based_views_and_the_other_decorators(assignment_a):
    def mark(path):
        return participant_access(resolve(path).func)

    item = f"/api/assignments/{assignment_a.uuid}/"
    assert mark(item) == mark(item + "submit/") == ParticipantAccess.ITEM  # DRF, method_decorator
    assert mark(item + "flags/") is None
    assert mark(f"/rate/{assignment_a.uuid}/") == ParticipantAccess.ITEM  # login_required & co. above it
    assert mark("/jsi18n/") == mark("/accounts/logout/") == mark("/r/leave/") == ParticipantAccess.ANY_STEP
    assert mark("/rate/") == mark("/") == ParticipantAccess.NEXT_STEP
    assert mark("/api/studies/") is None and mark("/studies/") is None
