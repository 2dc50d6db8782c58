"""Study access: who may administer or view a study. Every page and API view
gets its study through these (or annotate.permissions, which calls them), so the rule
is written once. Anyone without access gets 404, so a study's existence does not leak.

The rule (docs/security.md):

- A study role (StudyMembership admin / viewer / rater) gives that role in that study.
- A superuser administers every study.
- A staff user with the Django permission `annotate.change_study` administers every
  study, and one with `annotate.view_study` views every study: the same permissions
  the Django admin site checks for studies, so the admin site, the pages and the API
  agree on what a staff account may do.
- Being staff alone gives nothing: a staff user without those permissions has only the
  roles their memberships give (like anyone else).

Inactive users have no access at all (Django's login refuses them; a session or token
of an account deactivated since is refused here too).
"""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.db.models import Prefetch, Q, QuerySet
from django.http import Http404

from annotate.models import (
    Study,
    StudyMembership,
)

ADMIN = StudyMembership.Role.ADMIN
VIEWER = StudyMembership.Role.VIEWER
CHANGE_STUDY = "annotate.change_study"
VIEW_STUDY = "annotate.view_study"


def instance_role(user) -> str | None:
    """The role the user has in *every* study, from their account rather than from
    memberships: `admin` (superuser, or staff with annotate.change_study), `viewer`
    (staff with annotate.view_study) or None. Django caches a user's permissions on the
    user object, so asking again within a request costs no query."""
    if not (user.is_authenticated and user.is_active):
        return None
    if user.is_superuser:
        return ADMIN
    if not user.is_staff:
        return None
    if user.has_perm(CHANGE_STUDY):
        return ADMIN
    if user.has_perm(VIEW_STUDY):
        return VIEWER
    return None


def _has_role(user, study: Study, roles: tuple[str, ...]) -> bool:
    if not (user.is_authenticated and user.is_active):
        return False
    if instance_role(user) in roles:
        return True
    return StudyMembership.objects.filter(study=study, user=user, role__in=roles).exists()


def is_study_admin(user, study: Study) -> bool:
    """Whether the user administers the study (see the module docstring for the rule)."""
    return _has_role(user, study, (ADMIN,))


def get_study_for_admin(user, slug: str) -> Study:
    """The study if the user administers it, else 404."""
    study = Study.objects.select_related("rubric").filter(slug=slug).first()
    if study is None or not _has_role(user, study, (ADMIN,)):
        raise Http404("No such study.")
    return study


def get_study_for_viewer(user, slug: str) -> Study:
    """The study if the user may read its dashboards (admin or viewer), else 404.
    A rater who is only a rater gets 404: raters see nothing of a study but their items."""
    study = Study.objects.select_related("rubric").filter(slug=slug).first()
    if study is None or not _has_role(user, study, (ADMIN, VIEWER)):
        raise Http404("No such study.")
    return study


def studies_for_staff_pages(user) -> QuerySet[Study]:
    """The studies whose dashboards the user may read, by title."""
    if instance_role(user) is not None:
        return Study.objects.order_by("title")
    if not (user.is_authenticated and user.is_active):
        return Study.objects.none()
    return (
        Study.objects.filter(memberships__user=user, memberships__role__in=(ADMIN, VIEWER)).distinct().order_by("title")
    )


def studies_for_user(user, *, role: str | None = None) -> QuerySet[Study]:
    """The studies the user has a role in, each with the user's memberships in
    `my_memberships`. `role` keeps the studies where the user has that role; a user
    whose account gives a role in every study (instance_role) counts as having it in
    every study."""
    mine = Prefetch("memberships", queryset=StudyMembership.objects.filter(user=user), to_attr="my_memberships")
    studies = Study.objects.select_related("rubric").prefetch_related(mine).order_by("slug")
    if not (user.is_authenticated and user.is_active):
        return studies.none()
    everywhere = instance_role(user)
    if everywhere is not None and role in (None, everywhere):
        return studies
    if role:
        return studies.filter(memberships__user=user, memberships__role=role).distinct()
    return studies.filter(memberships__user=user).distinct()


def study_access(user, roles) -> str:
    """What the user may do in a study, given their roles in it (from studies_for_user's
    `my_memberships`): admin, viewer or rater."""
    roles = set(roles) | {instance_role(user)}
    if ADMIN in roles:
        return ADMIN
    if VIEWER in roles:
        return VIEWER
    return StudyMembership.Role.RATER


def may_take_part_in(study: Study) -> Q:
    """Accounts that may be members of `study`: every account but those that belong to
    another study alone. A recruitment link's participant account (recruit.Participant,
    reached by its one-to-one `participant`) exists for its own study: listing it in
    another study's forms, or adding it there, would give it items it can never reach.
    Read through the relation's name, so annotate imports no other app."""
    return Q(participant__isnull=True) | Q(participant__study=study)


def users_enrollable_by(user, study: Study) -> QuerySet:
    """The active accounts the user may give work in the study (batch raters, moving an
    item): anyone for whoever administers every study (superusers, staff with
    annotate.change_study); for a study admin by membership, the study's own members.
    Bringing someone new into a study goes through an account administrator (the Django
    admin's study memberships), so a study admin cannot list or enrol every user of the
    instance."""
    users = get_user_model().objects.filter(may_take_part_in(study), is_active=True).order_by("username")
    if instance_role(user) == ADMIN:
        return users
    return users.filter(memberships__study=study).distinct()
