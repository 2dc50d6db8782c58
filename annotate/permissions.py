"""Who may use which part of the API: the same rules as the HTML pages.

- Raters see only their own assignments and answers (annotate.selectors.queue.get_assignment_for_rater).
- Viewers (role `viewer`) read a study's dashboards: the study, its sources, summaries,
  claims, batches with their progress, and the analysis; never one rater's answers.
- Study admins (role `admin`; superusers and staff with `annotate.change_study` for every study)
  read and change everything of their study. Staff without those permissions are only
  what their memberships make them (annotate.selectors.access has the rule).
- Anyone else gets 404 for a study, so its existence does not leak; anonymous callers
  are refused before a view runs (DRF's IsAuthenticated, 401/403).

Each API view starts with one of these helpers; the membership rule itself lives in
annotate.selectors, once.
"""

from __future__ import annotations

from rest_framework.request import Request

from annotate.models import Study
from annotate.selectors.access import get_study_for_admin, get_study_for_viewer, is_study_admin

__all__ = ["is_study_admin", "study_for_admin", "study_for_viewer"]


def study_for_viewer(request: Request, slug: str) -> Study:
    """The study if the caller may read its dashboards (viewer or admin), else 404."""
    return get_study_for_viewer(request.user, slug)


def study_for_admin(request: Request, slug: str) -> Study:
    """The study if the caller administers it , else 404."""
    return get_study_for_admin(request.user, slug)
