"""API token authentication with an expiry (API_TOKEN_TTL_HOURS). Its own module because
DRF imports the authentication classes while it loads its views: this one may import
nothing that imports rest_framework.views (core.exceptions does)."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings
from django.utils import timezone
from rest_framework import exceptions
from rest_framework.authentication import TokenAuthentication
from rest_framework.authtoken.models import Token


class TokenExpired(exceptions.APIException):
    """An expired token: 401 with `WWW-Authenticate: Token` (not AuthenticationFailed,
    which DRF turns into 403 because session authentication is listed first)."""

    status_code = 401
    default_code = "token_expired"
    default_detail = "The token has expired: obtain a new one with POST /api/auth/token/."
    auth_header = "Token"


def token_expires_at(token: Token) -> datetime:
    return token.created + timedelta(hours=settings.API_TOKEN_TTL_HOURS)


class ExpiringTokenAuthentication(TokenAuthentication):
    """DRF's token authentication, refusing tokens older than API_TOKEN_TTL_HOURS."""

    def authenticate_credentials(self, key):
        user, token = super().authenticate_credentials(key)
        if timezone.now() >= token_expires_at(token):
            raise TokenExpired()
        return user, token
