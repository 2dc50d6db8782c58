"""Accounts and study members, managed by study admins on the study's pages (issue 35).

A study admin (anyone who administers the study: annotate.selectors.access) may:

- invite someone by e-mail: a new account with no usable password, a role in the study,
  and a one-time link to set a password (`invite_link`). With mail configured
  (`mail_is_configured`) the link is e-mailed; otherwise, or when sending fails, the page
  shows the link to the admin to pass on. The link is Django's password-reset token: it
  stops working once the password is set (the token hashes the password) or after
  PASSWORD_RESET_TIMEOUT;
- add an existing account by its exact username or e-mail (never a list of accounts);
- set a member's roles (rater, viewer, study admin);
- remove a member from the study: their memberships go, every assignment, revision and
  rating stays (human work is never deleted; their open assignments are withdrawn so no
  queue shows the study's items to someone outside it).

Creating studies and uploading rubrics is for superusers and accounts with the Django
permission `annotate.add_study` (given in the Django admin, to a user or a group): see
`may_create_studies` and docs/accounts.md.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.password_validation import validate_password
from django.contrib.auth.tokens import default_token_generator
from django.core.exceptions import ValidationError
from django.core.mail import EmailMessage
from django.core.validators import validate_email
from django.db import transaction
from django.db.models import F, Q
from django.urls import reverse
from django.utils import timezone
from django.utils.encoding import force_bytes
from django.utils.http import urlsafe_base64_encode

from annotate.models import Assignment, Study, StudyMembership
from annotate.services import add_study_member
from core.exceptions import ApplicationError
from core.text_validation import check_text

ROLES = tuple(StudyMembership.Role.values)
USERNAME_RE = re.compile(r"^[\w.@+-]{1,150}$")
# Backends that deliver nothing: the console prints the mail, dummy drops it, locmem keeps
# it in memory (tests). With one of these the invite link is shown to the admin instead.
UNDELIVERED_BACKENDS = (
    "django.core.mail.backends.console.EmailBackend",
    "django.core.mail.backends.dummy.EmailBackend",
    "django.core.mail.backends.filebased.EmailBackend",
)


class MemberError(ApplicationError):
    http_status = 400


def may_create_studies(user) -> bool:
    """Superusers and active accounts with the permission annotate.add_study (staff or
    not): they may create studies and upload rubrics."""
    return bool(user.is_authenticated and user.is_active and (user.is_superuser or user.has_perm("annotate.add_study")))


def mail_is_configured() -> bool:
    """Whether an invitation can be e-mailed: a backend that delivers (SMTP, or any other
    than the console, dummy and file backends)."""
    return settings.EMAIL_BACKEND not in UNDELIVERED_BACKENDS


def invite_link(*, user, request=None) -> str:
    """The one-time link that lets `user` set a password (absolute when `request` is
    given). Valid until the password is set or PASSWORD_RESET_TIMEOUT passes."""
    path = reverse(
        "invite-accept",
        kwargs={
            "uidb64": urlsafe_base64_encode(force_bytes(user.pk)),
            "token": default_token_generator.make_token(user),
        },
    )
    return request.build_absolute_uri(path) if request is not None else path


@dataclass
class Invitation:
    user: object
    link: str
    mailed: bool
    mail_error: str = ""


def _clean_role(role: str) -> str:
    if role not in ROLES:
        raise MemberError(
            f"Unknown role {role!r}: choose one of {', '.join(ROLES)}.", extra={"fields": {"role": "unknown"}}
        )
    return role


def _username_for(email: str) -> str:
    """A free username from the e-mail's local part (jane.doe, jane.doe2, ...)."""
    base = re.sub(r"[^\w.+-]", "", email.split("@", 1)[0])[:140] or "user"
    users = get_user_model().objects
    name, n = base, 1
    while users.filter(username__iexact=name).exists():
        n += 1
        name = f"{base}{n}"
    return name


@transaction.atomic
def invite_member(*, study: Study, email: str, role: str, invited_by, username: str = "", request=None) -> Invitation:
    """Create an account for `email` with no usable password, give it `role` in the study,
    and make its set-password link; e-mail it when mail is configured. An e-mail that
    already has an account is refused (add that account instead): one person, one account."""
    check_text(email, "email")
    check_text(username, "username")
    email = email.strip()
    try:
        validate_email(email)
    except ValidationError:
        raise MemberError("Enter a valid e-mail address.", extra={"fields": {"email": "invalid"}}) from None
    role = _clean_role(role)
    users = get_user_model().objects
    if users.filter(email__iexact=email).exists():
        raise MemberError(
            "An account with this e-mail address exists already: add it under “Add an existing account”.",
            extra={"fields": {"email": "exists"}},
        )
    username = username.strip()
    if username:
        if not USERNAME_RE.match(username):
            raise MemberError(
                "A username has at most 150 letters, digits and @ . + - _ characters.",
                extra={"fields": {"username": "invalid"}},
            )
        if users.filter(username__iexact=username).exists():
            raise MemberError("This username is taken.", extra={"fields": {"username": "taken"}})
    else:
        username = _username_for(email)
    user = users.create_user(username=username, email=email, password=None)  # unusable password
    add_study_member(study=study, user=user, role=role)
    link = invite_link(user=user, request=request)
    invitation = Invitation(user=user, link=link, mailed=False)
    if mail_is_configured():
        _mail_invitation(invitation, study=study, invited_by=invited_by)
    return invitation


def reissue_invitation(*, study: Study, user, invited_by, request=None) -> Invitation:
    """A new set-password link for a member who has not set a password yet (the old link
    still works until then: both are the same token while the password is unchanged);
    only for an account that is a newcomer to this study alone (see below)."""
    if not StudyMembership.objects.filter(study=study, user=user).exists():
        raise MemberError("This account is not a member of the study.")
    if user.has_usable_password():
        raise MemberError(
            f"{user.get_username()} has set a password already; they can use “Forgot your password?” on the login page."
        )
    # The link sets the account's password, so it is given only for an account that is
    # nothing but a newcomer to this study: never logged in, no staff or superuser flag,
    # no role in another study. Otherwise a study admin could take over an account whose
    # password login is switched off (a superuser's, another study's admin).
    if (
        user.is_staff
        or user.is_superuser
        or user.last_login is not None
        or StudyMembership.objects.filter(user=user).exclude(study=study).exists()
    ):
        raise MemberError(
            f"A link for {user.get_username()} can only come from an administrator of the instance "
            "(the account has logged in before, is staff, or has roles in other studies)."
        )
    invitation = Invitation(user=user, link=invite_link(user=user, request=request), mailed=False)
    if mail_is_configured() and user.email:
        _mail_invitation(invitation, study=study, invited_by=invited_by)
    return invitation


def _mail_invitation(invitation: Invitation, *, study: Study, invited_by) -> None:
    """Send the link; a failure is recorded on the invitation (the page then shows the
    link instead), never raised: the account and membership are made either way."""
    inviter = invited_by.get_full_name() or invited_by.get_username()
    body = (
        f"{inviter} invites you to rate in the study “{study.title}”.\n\n"
        f"Your username is {invitation.user.get_username()}. Set your password here (the link works once):\n\n"
        f"{invitation.link}\n"
    )
    message = EmailMessage(
        subject=f"Invitation: {study.title}"[:200],
        body=body,
        from_email=settings.DEFAULT_FROM_EMAIL,
        to=[invitation.user.email],
    )
    try:
        message.send()
    except OSError as exc:  # a refused or timed-out connection; smtplib.SMTPException is one too
        invitation.mail_error = f"{type(exc).__name__}: {exc}"
    else:
        invitation.mailed = True


def find_account(identifier: str):
    """The active account whose username or e-mail is exactly `identifier` (case-insensitive),
    or None. Only an exact name finds an account: nobody lists the instance's users here."""
    check_text(identifier, "account")
    identifier = identifier.strip()
    if not identifier:
        return None
    matches = list(
        get_user_model().objects.filter(Q(username__iexact=identifier) | Q(email__iexact=identifier), is_active=True)[
            :2
        ]
    )
    return matches[0] if len(matches) == 1 else None


@transaction.atomic
def add_existing_member(*, study: Study, identifier: str, role: str) -> StudyMembership:
    role = _clean_role(role)
    user = find_account(identifier)
    if user is None:
        raise MemberError(
            "No single active account has this username or e-mail address: invite them by e-mail instead.",
            extra={"fields": {"account": "unknown"}},
        )
    return add_study_member(study=study, user=user, role=role)


@transaction.atomic
def set_member_roles(*, study: Study, user, roles, changed_by) -> list[str]:
    """Give `user` exactly `roles` in the study (at least one; remove_member takes them
    all away). A study admin cannot take their own admin role away (someone must be
    left to administer the study: another admin does it)."""
    wanted = {_clean_role(r) for r in roles}
    if not wanted:
        raise MemberError("Choose at least one role, or remove the member from the study.")
    if not StudyMembership.objects.filter(study=study, user=user).exists():
        raise MemberError("This account is not a member of the study.")
    if user.pk == changed_by.pk and StudyMembership.Role.ADMIN not in wanted and _is_member_admin(study, user):
        raise MemberError("You cannot take away your own study admin role: ask another study admin.")
    StudyMembership.objects.filter(study=study, user=user).exclude(role__in=wanted).delete()
    for role in sorted(wanted):
        add_study_member(study=study, user=user, role=role)
    return sorted(wanted)


def _is_member_admin(study: Study, user) -> bool:
    return StudyMembership.objects.filter(study=study, user=user, role=StudyMembership.Role.ADMIN).exists()


@transaction.atomic
def remove_member(*, study: Study, user, removed_by) -> int:
    """Take every role in the study from `user`. Their answers stay (assignments,
    revisions and ratings are PROTECTed and untouched); their open assignments are
    withdrawn. Returns how many assignments were withdrawn."""
    if user.pk == removed_by.pk:
        raise MemberError("You cannot remove yourself from the study: ask another study admin.")
    deleted, _ = StudyMembership.objects.filter(study=study, user=user).delete()
    if not deleted:
        raise MemberError("This account is not a member of the study.")
    now = timezone.now()
    return Assignment.objects.filter(
        study=study, rater=user, state__in=(Assignment.State.PENDING, Assignment.State.IN_PROGRESS)
    ).update(state=Assignment.State.WITHDRAWN, withdrawn_at=now, updated_at=now, version=F("version") + 1)


def study_members(study: Study) -> list[dict]:
    """The study's members, one row per account: user, roles, whether they have set a password."""
    rows: dict[int, dict] = {}
    for m in StudyMembership.objects.filter(study=study).select_related("user").order_by("user__username", "role"):
        row = rows.setdefault(m.user_id, {"user": m.user, "roles": [], "invited": not m.user.has_usable_password()})
        row["roles"].append(m.role)
    return list(rows.values())


# --- the first admin of an empty install ----------------------------------------------------


@transaction.atomic
def create_first_admin(*, username: str, password: str, email: str = ""):
    """The first superuser of an empty install (`make run` with DEMO=0 or
    `manage.py prepare`, from ADMIN_USERNAME/ADMIN_PASSWORD/ADMIN_EMAIL). Refused when a
    superuser exists already (the environment never changes an existing account) or the
    password fails the password validators."""
    users = get_user_model().objects
    if users.filter(is_superuser=True).exists():
        raise ApplicationError("An admin account exists already; nothing was changed.")
    if not USERNAME_RE.match(username or ""):
        raise ApplicationError("ADMIN_USERNAME must be 1-150 letters, digits and @ . + - _ characters.")
    if users.filter(username__iexact=username).exists():
        raise ApplicationError(f"An account {username!r} exists already; nothing was changed.")
    candidate = get_user_model()(username=username, email=email)
    try:
        validate_password(password, candidate)
    except ValidationError as exc:
        raise ApplicationError("ADMIN_PASSWORD is refused: " + " ".join(exc.messages)) from None
    if email:
        try:
            validate_email(email)
        except ValidationError:
            raise ApplicationError("ADMIN_EMAIL is not a valid e-mail address.") from None
    return users.create_superuser(username=username, email=email, password=password)
