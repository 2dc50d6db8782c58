"""The account rules of single sign-on, the same for every provider and protocol
(docs/accounts.md): which account a signed-in person gets, and the study roles their
groups bring. The protocol modules check the provider's answer; this module trusts it."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.exceptions import ImproperlyConfigured
from django.db import transaction
from django.utils.http import urlsafe_base64_decode
from django.utils.translation import gettext, gettext_noop

from annotate.models import Study, StudyMembership
from annotate.services import members
from core.exceptions import ApplicationError

logger = logging.getLogger(__name__)


class SignInRefused(ApplicationError):
    """The provider signed the person in, and the platform gives them no account."""

    code = "sign_in_refused"
    http_status = 403


# The refusal of an answer that did not pass the protocol's checks, for either protocol;
# translated where it is raised, in the request's language.
NOT_VERIFIED = gettext_noop("The sign-in with %(provider)s could not be verified: sign in again.")


@dataclass(frozen=True)
class Identity:
    """A person as a provider vouched for them: a verified e-mail address and the groups
    it names (empty without a groups claim or attribute)."""

    provider: str
    email: str
    groups: tuple[str, ...] = ()


@dataclass(frozen=True)
class PendingInvitation:
    """An invitation the person chose to accept by signing in (its link's uid and token)."""

    uidb64: str
    token: str


def saml_configured() -> bool:
    """Whether a SAML identity provider is configured (its metadata URL or file)."""
    return bool(settings.SAML_IDP_METADATA_URL or settings.SAML_IDP_METADATA_FILE)


def group_roles() -> dict[str, list[tuple[str, str]]]:
    """SSO_GROUP_ROLES as group -> [(study slug, role)]."""
    mapping: dict[str, list[tuple[str, str]]] = {}
    for item in settings.SSO_GROUP_ROLES:
        group, _, target = item.partition("=")
        slug, _, role = target.partition(":")
        if not (group and slug and role in members.ROLES):
            raise ImproperlyConfigured(
                f"SSO_GROUP_ROLES item {item!r} must be group=study-slug:role with a role among {members.ROLES}"
            )
        mapping.setdefault(group, []).append((slug, role))
    return mapping


@transaction.atomic
def account_for(*, identity: Identity, invitation: PendingInvitation | None = None):
    """The account `identity` signs in to, else SignInRefused.

    With an invitation: the invited account (annotate.services.members
    .accept_invitation_by_sign_in decides). Otherwise the one account whose e-mail address
    is the provider's (case-insensitive); none: a new account when SSO_CREATE_ACCOUNTS is
    on. Never a staff or superuser account: those sign in with their password, so a
    provider that vouches for a wrong address cannot take over the instance. Then the roles
    that the identity's groups map to (SSO_GROUP_ROLES) are added."""
    if not identity.email:
        raise SignInRefused(
            gettext("%(provider)s gave no e-mail address: ask your study admin.") % {"provider": identity.provider}
        )
    users = get_user_model().objects
    if invitation is not None:
        account = users.filter(pk=uid_to_pk(invitation.uidb64)).first()
        if account is None:
            raise SignInRefused(gettext("This invitation link is not valid."))
        try:
            user = members.accept_invitation_by_sign_in(account=account, token=invitation.token, email=identity.email)
        except members.MemberError as exc:
            raise SignInRefused(exc.message) from None
    else:
        matches = list(users.filter(email__iexact=identity.email)[:2])
        if len(matches) > 1:
            raise SignInRefused(gettext("More than one account has your address: ask an administrator of this site."))
        if matches:
            user = matches[0]
        elif settings.SSO_CREATE_ACCOUNTS:
            user = members.create_signed_in_account(email=identity.email)
        else:
            raise SignInRefused(
                gettext("No account here has the address %(email)s: ask your study admin for an invitation.")
                % {"email": identity.email}
            )
    if not user.is_active:
        raise SignInRefused(gettext("This account is switched off: ask an administrator of this site."))
    if user.is_staff or user.is_superuser:
        raise SignInRefused(gettext("Staff and administrator accounts log in with their password."))
    try:
        add_group_roles(user=user, groups=identity.groups)
    except ApplicationError as exc:  # a participant account of another study
        raise SignInRefused(exc.message) from None
    return user


def add_group_roles(*, user, groups) -> list[StudyMembership]:
    """Give `user` the study roles their groups map to; a study slug that names no study is
    skipped (and logged). Roles are only added: a study admin takes one away."""
    given = []
    mapping = group_roles()
    for group in groups:
        for slug, role in mapping.get(group, ()):
            study = Study.objects.filter(slug=slug).first()
            if study is None:
                logger.warning("SSO_GROUP_ROLES names study %r, which does not exist", slug)
                continue
            given.append(members.add_study_member(study=study, user=user, role=role))
    return given


def uid_to_pk(uidb64: str) -> int | None:
    try:
        return int(urlsafe_base64_decode(uidb64).decode())
    except (ValueError, UnicodeDecodeError):
        return None
