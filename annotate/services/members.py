"""Accounts and study members, managed by study admins on the study's pages; a role
in a study (`add_study_member`), the one write every other service gives a role through.

A study admin (anyone who administers the study: annotate.selectors.access) may:

- invite someone by e-mail: a new account with no usable password, a role in the study,
  and a one-time link to set a password (`invite_link`). With mail configured
  (`mail_is_configured`) the link is e-mailed; otherwise, or when sending fails, the page
  shows the link to the admin to pass on. The link is a password-reset token of its own
  (`InvitationTokens`) naming the study and the admin it was made for: it stops working
  once the password is set or the account logs in (the token hashes both), after
  PASSWORD_RESET_TIMEOUT, and as soon as `set_password_link_refusal` (the one rule for
  giving such a link) would refuse a new one;
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
import secrets
from dataclasses import dataclass

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.password_validation import validate_password
from django.contrib.auth.tokens import PasswordResetTokenGenerator
from django.core.exceptions import ValidationError
from django.core.mail import EmailMessage
from django.core.validators import validate_email
from django.db import transaction
from django.db.models import F, Q
from django.urls import reverse
from django.utils import timezone
from django.utils.encoding import force_bytes
from django.utils.http import base36_to_int, int_to_base36, urlsafe_base64_encode
from django.utils.translation import gettext, gettext_noop

from annotate.models import Assignment, Study, StudyMembership
from annotate.selectors.access import is_study_admin, may_take_part_in
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


# --- set-password links ------------------------------------------------------------------


@dataclass(frozen=True)
class LinkRefusal:
    """Why an account gets no set-password link from a study admin: `reason` says what the
    account is, `remedy` what to do instead (shown to the admin and on the link's page)."""

    code: str
    reason: str
    remedy: str

    def message_for(self, user) -> str:
        return f"No link for {user.get_username()}: {self.reason}. {self.remedy}"


# The remedies a refused link names, marked for the catalogue: the person whose link it was
# reads them on the refusal page, in the page's language (LinkRefusal is made per request).
INSTANCE_ADMIN = gettext_noop(
    "Only an administrator of the instance can give this account a password (in the Django admin); "
    "anyone who knows their password can use “Forgot your password?” on the login page."
)
FORGOT_PASSWORD = gettext_noop(
    "Its owner logs in with that password, or uses “Forgot your password?” on the login page."
)
ASK_STUDY_ADMIN = gettext_noop("Ask a study admin of the study for a new link.")


def _refused(code: str, reason: str, remedy: str) -> LinkRefusal:
    return LinkRefusal(code, reason, gettext(remedy))


def set_password_link_refusal(*, account, study: Study, issuer) -> LinkRefusal | None:
    """The one rule for a set-password link made by a study admin (`issuer`) of `study`:
    None when the link may be given, else why not. Checked when the link is made and again
    every time it is used, so a link dies as soon as its account would get no new one.

    The link sets the account's password, so it is only for a newcomer to this study alone:
    an active account that has never logged in, has no usable password, is neither staff
    nor superuser, holds no Django permission or group, and has roles in this study only;
    and only while the issuer still administers the study. Otherwise a study admin could
    take over an account whose password login is switched off (a superuser's, another
    study's admin, an account that signs in some other way)."""
    if not account.is_active:
        return _refused("inactive", gettext("the account is switched off"), INSTANCE_ADMIN)
    if account.is_staff or account.is_superuser:
        return _refused("staff", gettext("the account is staff or a superuser of the instance"), INSTANCE_ADMIN)
    if account.has_usable_password():
        return _refused("password_set", gettext("the account has set a password already"), FORGOT_PASSWORD)
    if account.last_login is not None:
        return _refused("logged_in", gettext("the account has logged in before"), INSTANCE_ADMIN)
    if account.user_permissions.exists() or account.groups.exists():
        return _refused("permissions", gettext("the account has permissions on the instance"), INSTANCE_ADMIN)
    studies = set(StudyMembership.objects.filter(user=account).values_list("study_id", flat=True))
    if study.pk not in studies:
        return _refused(
            "not_member",
            gettext("the account is not a member of the study “%(study)s”") % {"study": study.title},
            ASK_STUDY_ADMIN,
        )
    if studies != {study.pk}:
        return _refused("other_study", gettext("the account has a role in another study"), INSTANCE_ADMIN)
    if issuer is None or not is_study_admin(issuer, study):
        return _refused(
            "issuer",
            gettext("whoever made it no longer administers the study “%(study)s”") % {"study": study.title},
            ASK_STUDY_ADMIN,
        )
    return None


@dataclass(frozen=True)
class LinkGrant:
    """What a valid set-password link was made for: the study and the admin who made it."""

    study: Study
    issuer: object


class InvitationTokens:
    """Set-password tokens that name the study and the admin they were made for:
    `<study>.<issuer>-<Django password-reset token>`, where the inner token is Django's
    (it hashes the password, the last login and a timestamp: one use, PASSWORD_RESET_TIMEOUT)
    keyed with a salt that holds the study and the issuer, so neither can be changed.
    The salt differs from Django's own reset tokens, so an invitation is no
    `/accounts/reset/` link, nor the other way round. `check_token` lets Django's
    PasswordResetConfirmView use it."""

    SALT = "annotate.members.InvitationTokens"

    def _inner(self, prefix: str) -> PasswordResetTokenGenerator:
        generator = PasswordResetTokenGenerator()
        generator.key_salt = f"{self.SALT}:{prefix}"
        return generator

    def make_token(self, user, *, study: Study, issuer) -> str:
        prefix = f"{int_to_base36(study.pk)}.{int_to_base36(issuer.pk)}"
        return f"{prefix}-{self._inner(prefix).make_token(user)}"

    def grant(self, user, token) -> LinkGrant | None:
        """The study and issuer of a valid token for `user`, else None."""
        if user is None or not isinstance(token, str):
            return None
        prefix, _, inner = token.partition("-")
        study_b36, _, issuer_b36 = prefix.partition(".")
        try:
            study_pk, issuer_pk = base36_to_int(study_b36), base36_to_int(issuer_b36)
        except ValueError:
            return None
        if not self._inner(prefix).check_token(user, inner):
            return None
        study = Study.objects.filter(pk=study_pk).first()
        issuer = get_user_model().objects.filter(pk=issuer_pk).first()
        return LinkGrant(study=study, issuer=issuer) if study is not None and issuer is not None else None

    def check_token(self, user, token) -> bool:
        return self.grant(user, token) is not None


invitation_tokens = InvitationTokens()


def invite_link(*, user, study: Study, issuer, request=None) -> str:
    """The one-time link that lets `user` set a password (absolute when `request` is
    given), made by `issuer` for `study`; refused (MemberError) when
    set_password_link_refusal says no."""
    refusal = set_password_link_refusal(account=user, study=study, issuer=issuer)
    if refusal is not None:
        raise MemberError(refusal.message_for(user), extra={"code": refusal.code})
    path = reverse(
        "invite-accept",
        kwargs={
            "uidb64": urlsafe_base64_encode(force_bytes(user.pk)),
            "token": invitation_tokens.make_token(user, study=study, issuer=issuer),
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
    link = invite_link(user=user, study=study, issuer=invited_by, request=request)
    invitation = Invitation(user=user, link=link, mailed=False)
    if mail_is_configured():
        _mail_invitation(invitation, study=study, invited_by=invited_by)
    return invitation


@transaction.atomic
def accept_invitation_by_sign_in(*, account, token: str, email: str):
    """Accept an invitation by signing in with the institution's identity provider instead
    of setting a password (sso/, docs/accounts.md). `token` is the invitation's, `email` the
    address the provider vouched for. The link must still be valid for `account` and pass
    `set_password_link_refusal`, as when a password is set through it; the account keeps no
    usable password and takes the provider's address (refused when another account has it),
    so later sign-ins find it by that address. The caller logs the account in, which sets
    its last login and so ends the link."""
    grant = invitation_tokens.grant(account, token)
    if grant is None:
        raise MemberError(gettext("This invitation link is not valid: it has been used already, or it has expired."))
    refusal = set_password_link_refusal(account=account, study=grant.study, issuer=grant.issuer)
    if refusal is not None:
        raise MemberError(
            gettext("This invitation no longer works: %(reason)s. %(remedy)s")
            % {"reason": refusal.reason, "remedy": refusal.remedy}
        )
    users = get_user_model().objects
    if users.filter(email__iexact=email).exclude(pk=account.pk).exists():
        raise MemberError(
            gettext(
                "Another account has the address your provider gave: sign in with the provider "
                "from the login page instead, or ask your study admin."
            )
        )
    if account.email != email:
        account.email = email
        account.save(update_fields=["email"])
    return account


def create_signed_in_account(*, email: str):
    """A new account for a person a provider signed in (SSO_CREATE_ACCOUNTS): a username
    from the address, no usable password, no role (a study admin or SSO_GROUP_ROLES gives one)."""
    return get_user_model().objects.create_user(username=_username_for(email), email=email, password=None)


def reissue_invitation(*, study: Study, user, invited_by, request=None) -> Invitation:
    """A new set-password link for a member who has not set a password yet (an older link
    keeps working until then), on the terms of set_password_link_refusal."""
    invitation = Invitation(
        user=user, link=invite_link(user=user, study=study, issuer=invited_by, request=request), mailed=False
    )
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
    if user is not None and not get_user_model().objects.filter(may_take_part_in(study), pk=user.pk).exists():
        user = None  # another study's participant account reads as unknown: it is not offered here
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


# --- memberships and accounts made by commands ------------------------------------------


@transaction.atomic
def add_study_member(*, study: Study, user, role: str, seed: int | None = None) -> StudyMembership:
    """Give `user` `role` in the study (kept if they have it). Another study's participant
    account is refused (annotate.selectors.access.may_take_part_in): it belongs to its study."""
    if not get_user_model().objects.filter(pk=user.pk).filter(may_take_part_in(study)).exists():
        raise ApplicationError(
            f"{user.get_username()} is a participant account of another study and cannot take part in this one.",
            extra={"fields": {"raters": "a participant account of another study"}},
        )
    membership, _ = StudyMembership.objects.get_or_create(
        study=study,
        user=user,
        role=role,
        defaults={"order_seed": seed if seed is not None else secrets.randbelow(2**31)},
    )
    return membership


def ensure_user(*, username: str, password: str, is_staff: bool = False, is_superuser: bool = False):
    """Create the account if it does not exist; an existing account is left as it is."""
    user_model = get_user_model()
    user, created = user_model.objects.get_or_create(
        username=username, defaults={"is_staff": is_staff, "is_superuser": is_superuser}
    )
    if created:
        user.set_password(password)
        user.save(update_fields=["password"])
    return user, created


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
