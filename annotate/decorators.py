"""Decorators of the rater's views: an item's page leads to the study's onboarding first
(`onboarding_first`), and which views a participant account may use (`participant_may_use`;
a participant is a study-only account made by a recruitment link, recruit.Participant,
docs/recruitment.md).

A view carries its mark, the way Django's `csrf_exempt` marks a view for
CsrfViewMiddleware: `@participant_may_use(ParticipantAccess.ITEM)` on a function view,
`@method_decorator(participant_may_use(...), name="dispatch")` on a class-based one (its
`as_view()` copies the mark). recruit.middleware.RecruitGateMiddleware reads the mark from
the view a request resolved to. A view without a mark is a 404 to a participant, so a new
view is closed to them until it says otherwise; ordinary accounts never meet the mark."""

from __future__ import annotations

from enum import StrEnum
from functools import wraps

from django.shortcuts import redirect
from django.utils.http import urlencode

from annotate.selectors.onboarding import OnboardingRequired

ATTRIBUTE = "participant_may_use"


def onboarding_first(view):
    """An item's page: while the rater has a step of the study's onboarding to take (the
    assignment selector raises OnboardingRequired), the page leads to the study's next step,
    which comes back here when it is through. The item API answers the same refusal as a
    403 in the one error shape instead."""

    @wraps(view)
    def page(request, *args, **kwargs):
        try:
            return view(request, *args, **kwargs)
        except OnboardingRequired as refused:
            return redirect(f"{refused.next_url}?{urlencode({'next': request.path})}")

    return page


class ParticipantAccess(StrEnum):
    # The way in: the gate steps aside (a link makes or continues a participant).
    ARRIVAL = "arrival"
    # At every step, finished or not, writes too: the language switcher and its strings,
    # signing out, leaving.
    ANY_STEP = "any_step"
    # A page of the participant's own study (another study's slug is a 404); after the
    # end, reading only.
    STUDY = "study"
    # The participant's own items, pages and API calls (the selector's rule); after the
    # end, they lead to the end page.
    ITEM = "item"
    # The rater's start pages (home, queue, Continue, completion): they lead a participant
    # to their next step.
    NEXT_STEP = "next_step"


def participant_may_use(access: ParticipantAccess):
    """Mark a view as one a participant may use, and how."""

    def mark(view):
        @wraps(view)
        def marked(request, *args, **kwargs):
            return view(request, *args, **kwargs)

        setattr(marked, ATTRIBUTE, ParticipantAccess(access))
        return marked

    return mark


def participant_access(view) -> ParticipantAccess | None:
    """The view's mark, or None: closed to participants."""
    return getattr(view, ATTRIBUTE, None)
