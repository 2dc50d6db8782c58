"""The site's URLconf with two views added as a newcomer would add them: one without a
mark, one marked for participants' items (tests/recruit/test_participant_marks.py)."""

from django.http import HttpResponse
from django.urls import path

from annotate.decorators import ParticipantAccess, participant_may_use
from config.urls import urlpatterns as site


def new_page(request):
    return HttpResponse("a new page")


@participant_may_use(ParticipantAccess.ITEM)
def new_item_page(request):
    return HttpResponse("a new item page")


urlpatterns = [
    path("new-page/", new_page, name="new-page"),
    path("new-item-page/", new_item_page, name="new-item-page"),
    *site,
]
