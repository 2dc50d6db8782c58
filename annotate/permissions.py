"""Who may use which part of the API: the same rules as the HTML pages.

- Raters see only their own assignments and answers (annotate.selectors.get_assignment_for_rater).
- Viewers (role `viewer`) read a study's dashboards: the study, its sources, summaries,
  claims, batches with their progress, and the analysis; never one rater's answers.
- Study admins (role `admin`, or staff) read and change everything of their study.
- Anyone else gets 404 for a study, so its existence does not leak; anonymous callers
  are refused before a view runs (DRF's IsAuthenticated, 401/403).

Each API view starts with one of these helpers; the membership rule itself lives in
annotate.selectors, once.
"""

from __future__ import annotations

from django.http import Http404
from rest_framework.request import Request

from annotate import selectors
from annotate.models import Study

READ_METHODS = ("GET", "HEAD", "OPTIONS")


def study_for_viewer(request: Request, slug: str) -> Study:
    """The study if the caller may read its dashboards (viewer, admin or staff), else 404."""
    return selectors.get_study_for_viewer(request.user, slug)


def study_for_admin(request: Request, slug: str) -> Study:
    """The study if the caller administers it (admin or staff), else 404."""
    return selectors.get_study_for_admin(request.user, slug)


def study_for_method(request: Request, slug: str) -> Study:
    """Viewers may read, only admins may write: a viewer's write is a 404, as on the
    HTML pages (a viewer posting to the batch page gets 404)."""
    if request.method in READ_METHODS:
        return study_for_viewer(request, slug)
    return study_for_admin(request, slug)


def is_study_admin(user, study: Study) -> bool:
    try:
        selectors.get_study_for_admin(user, study.slug)
    except Http404:
        return False
    return True
