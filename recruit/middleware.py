"""The participant's gate in front of the site (docs/recruitment.md): a participant (an
account a recruitment link made, marked in its session) reaches only the views marked for
them (annotate.decorators.participant_may_use: its own study's participant pages, its own
items and the API calls its rating page makes, the language switcher, signing out); every
other view is a 404, as if it did not exist. Their queue and the home page lead to their
next step instead. After the time budget, their writes are refused.

The study's onboarding (consent, instructions, questionnaire) is not checked here: the
assignment selector refuses an item before it is through, for every rater and every way in
(annotate.selectors.onboarding). The participant mark is read from the session, so
ordinary requests cost no query."""

from __future__ import annotations

from django.http import Http404, JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse

from annotate.decorators import ParticipantAccess, participant_access
from core.exceptions import error_body
from recruit import selectors
from recruit.services import participation

SESSION_KEY = "recruit_participant"
SAFE_METHODS = {"GET", "HEAD", "OPTIONS"}


class RecruitGateMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        return self.get_response(request)

    def process_view(self, request, view_func, view_args, view_kwargs):
        access = participant_access(view_func)
        if access == ParticipantAccess.ARRIVAL or not request.user.is_authenticated:
            return None
        if request.session.get(SESSION_KEY) is None:
            return None
        participant = selectors.participant_of(request.user)
        if participant is None or participant.pk != request.session.get(SESSION_KEY):
            raise Http404("No such page.")
        participation.touch(participant=participant)
        if not participant.outcome and participation.time_is_up(participant):
            # The time budget holds on every request, writes above all: an answer sent after
            # it ran out is not stored.
            participant = participation.finish_participation(participant=participant, outcome="timed_out")
        if participant.outcome and request.method not in SAFE_METHODS and access != ParticipantAccess.ANY_STEP:
            return _refuse_write(request, participant)
        if access == ParticipantAccess.ANY_STEP:
            return None
        if access == ParticipantAccess.NEXT_STEP:
            return redirect("recruit:next", slug=participant.study.slug)
        if access == ParticipantAccess.STUDY:
            if "slug" in view_kwargs and view_kwargs["slug"] != participant.study.slug:
                raise Http404("No such study.")
            return None
        if access != ParticipantAccess.ITEM:
            raise Http404("No such page.")
        if participant.outcome:
            return redirect("recruit:done")
        return None


def _refuse_write(request, participant):
    """A finished participant's write (an answer after the time budget, a second tab after
    leaving) is refused and stores nothing: the API answers in its error shape, a page in
    the site's layout ends with the participant's code."""
    code, url = participation.completion(participant)
    message = (
        "Your time for this study ran out: this answer was not stored."
        if participant.outcome == "timed_out"
        else "Your part in this study has ended: this answer was not stored."
    )
    if request.path.startswith("/api/"):
        return JsonResponse(error_body("participation_over", message, {"next": reverse("recruit:done")}), status=403)
    return render(
        request,
        "recruit/refused_write.html",
        {"participant": participant, "message": message, "code": code, "return_url": url},
        status=403,
    )
