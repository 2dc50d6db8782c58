"""API tokens: obtain one with a username and password, revoke it. Logins here are
throttled like the login page (429 `locked_out` while the pair or address is locked or the
username delayed: annotate/throttling.py); tokens are stored hashed, expire after
API_TOKEN_TTL_HOURS and die with the password (annotate.services.accounts)."""

from __future__ import annotations

from django.contrib.auth import authenticate
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.permissions import AllowAny
from rest_framework.response import Response
from rest_framework.views import APIView

from annotate import throttling
from annotate.models import ApiToken
from annotate.services import accounts


class TokenObtainSerializer(serializers.Serializer):
    username = serializers.CharField(max_length=150)
    password = serializers.CharField(max_length=4096, trim_whitespace=False, style={"input_type": "password"})
    name = serializers.CharField(
        max_length=accounts.TOKEN_NAME_MAX_CHARS,
        required=False,
        allow_blank=True,
        help_text="What the token is for (a script, a client): shown on the account page.",
    )


class TokenSerializer(serializers.Serializer):
    token = serializers.CharField(help_text='Send it as "Authorization: Token <token>". Shown this once.')
    prefix = serializers.CharField(help_text="Its first characters, as the account page lists it.")
    name = serializers.CharField()
    expires_at = serializers.DateTimeField(help_text="After this the token is refused (401 token_expired).")


class AuthToken(APIView):
    def get_permissions(self):
        if self.request.method == "POST":
            return [AllowAny()]
        return super().get_permissions()

    @extend_schema(
        request=TokenObtainSerializer,
        responses={200: TokenSerializer},
        auth=[],
        description="A new API token (each call makes another; the secret is shown once and stored only as "
        "a hash). Failed attempts count towards the login throttling: 429 `locked_out` with Retry-After "
        "while a lock or delay lasts. Every token of an account stops working when its password changes.",
    )
    def post(self, request):
        body = TokenObtainSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        # The Django request, not DRF's wrapper: the throttle leaves its lock on it.
        django_request = request._request
        user = authenticate(
            django_request, username=body.validated_data["username"], password=body.validated_data["password"]
        )
        lock = getattr(django_request, "login_lock", None)
        if lock is not None:
            django_request.login_lock = None  # answered here, not again by the middleware
            return throttling.lockout_response(django_request, lock)
        if user is None:
            raise accounts.InvalidCredentials("The username or password is not correct.")
        made = accounts.create_token(user=user, name=body.validated_data.get("name", ""))
        return Response(
            TokenSerializer(
                {
                    "token": made.secret,
                    "prefix": made.token.prefix,
                    "name": made.token.name,
                    "expires_at": accounts.token_expires_at(made.token),
                }
            ).data
        )

    @extend_schema(
        request=None,
        responses={204: None},
        description="Revoke the token this request is made with; signed in with a session, revoke every "
        "token of your account.",
    )
    def delete(self, request):
        token = request.auth if isinstance(request.auth, ApiToken) else None
        accounts.revoke_token(user=request.user, token=token)
        return Response(status=204)
