"""Accounts: API tokens that are hashed, listed, revoked and end with the password
(docs/security.md).

Tokens are stored as SHA-256 digests and die with the password they were made under, when
they expire, or when revoked; the token endpoints are in annotate/api/tokens.py, the
account page listing them in annotate/account_views.py, and the token authentication in
annotate/authentication.py.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.utils import timezone
from django.utils.crypto import constant_time_compare

from annotate.models import ApiToken
from core.exceptions import ApplicationError
from core.text_validation import check_limit, check_text

# --- API tokens ----------------------------------------------------------------------------------


class InvalidCredentials(ApplicationError):
    code = "invalid_credentials"
    http_status = 400


TOKEN_NAME_MAX_CHARS = 100


def token_digest(secret: str) -> str:
    """SHA-256, hex. The secret is 256 random bits, so a fast hash is enough: nothing can
    be guessed from the digest, and no salt is needed (salts defend guessable passwords)."""
    return hashlib.sha256(secret.encode("utf-8", "replace")).hexdigest()


def password_fingerprint(user) -> str:
    """Changes with every password change (Django's session hash of the password hash):
    a token made under one password is refused under the next."""
    return user.get_session_auth_hash()


def token_expires_at(token: ApiToken) -> datetime:
    return token.created_at + timedelta(hours=settings.API_TOKEN_TTL_HOURS)


def token_is_live(token: ApiToken, user, now: datetime | None = None) -> bool:
    return (now or timezone.now()) < token_expires_at(token) and constant_time_compare(
        token.password_fingerprint, password_fingerprint(user)
    )


@dataclass(frozen=True)
class NewToken:
    """A token just made: `secret` is shown this once and never stored."""

    token: ApiToken
    secret: str


def create_token(*, user, name: str = "") -> NewToken:
    """A new token for `user` (each client may have its own; all die with the password)."""
    name = (name or "").strip()
    check_text(name, "name")
    check_limit(name, "name", TOKEN_NAME_MAX_CHARS)
    secret = secrets.token_urlsafe(32)
    token = ApiToken.objects.create(
        user=user,
        name=name,
        prefix=secret[:8],
        digest=token_digest(secret),
        password_fingerprint=password_fingerprint(user),
    )
    return NewToken(token=token, secret=secret)


def revoke_token(*, user, token_uuid=None, token: ApiToken | None = None) -> int:
    """Delete one of the user's tokens (by uuid, or the object), or all of them when
    neither is given; clients using them are refused from then on."""
    tokens = ApiToken.objects.filter(user=user)
    if token is not None:
        tokens = tokens.filter(pk=token.pk)
    elif token_uuid is not None:
        tokens = tokens.filter(uuid=token_uuid)
    deleted, _ = tokens.delete()
    return deleted


def live_tokens(user) -> list[ApiToken]:
    """The user's tokens that still work, newest first (the account page's list)."""
    now = timezone.now()
    tokens = [t for t in ApiToken.objects.filter(user=user).order_by("-created_at") if token_is_live(t, user, now)]
    for token in tokens:
        token.expires_at = token_expires_at(token)
    return tokens
