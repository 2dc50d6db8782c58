"""Decorators of the rater's views: an item's page leads to the study's onboarding first."""

from __future__ import annotations

from functools import wraps

from django.shortcuts import redirect
from django.utils.http import urlencode

from annotate.selectors.onboarding import OnboardingRequired


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
