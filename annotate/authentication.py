"""API token authentication: `Authorization: Token <token>`, looked up by its SHA-256
digest, refused once expired (API_TOKEN_TTL_HOURS) or once the owner's password changed.
Its own module because DRF imports the authentication classes while it loads its views:
this one may import nothing that imports rest_framework.views at module level
(core.exceptions does, and annotate.services.accounts through it)."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone
from rest_framework import exceptions
from rest_framework.authentication import TokenAuthentication

# How often a token's `last_used_at` is written: at most once a minute, not on every request.
LAST_USED_RESOLUTION = timedelta(minutes=1)


class TokenExpired(exceptions.APIException):
    """An expired token: 401 with `WWW-Authenticate: Token` (not AuthenticationFailed,
    which DRF turns into 403 because session authentication is listed first)."""

    status_code = 401
    default_code = "token_expired"
    default_detail = "The token has expired: obtain a new one with POST /api/auth/token/."
    auth_header = "Token"


class HashedTokenAuthentication(TokenAuthentication):
    """DRF's `Token` header, checked against annotate.models.ApiToken's digests."""

    def authenticate_credentials(self, key):
        from annotate.models import ApiToken
        from annotate.services.accounts import password_fingerprint, token_digest, token_expires_at

        token = ApiToken.objects.select_related("user").filter(digest=token_digest(key)).first()
        if token is None or not token.user.is_active:
            raise exceptions.AuthenticationFailed("Invalid token.")
        if token.password_fingerprint != password_fingerprint(token.user):
            # The password changed since the token was made: it is revoked for good.
            token.delete()
            raise exceptions.AuthenticationFailed("Invalid token.")
        now = timezone.now()
        if now >= token_expires_at(token):
            raise TokenExpired()
        if token.last_used_at is None or now - token.last_used_at >= LAST_USED_RESOLUTION:
            ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
        return token.user, token
