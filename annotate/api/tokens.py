"""API tokens: obtain one with a username and password, revoke your own. Logins here are
throttled by django-axes like the login page (429 `locked_out` while the username or the
address is locked); tokens expire after API_TOKEN_TTL_HOURS (annotate.accounts)."""

from __future__ import annotations

from django.contrib.auth import authenticate
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.permissions import AllowAny
from rest_framework.response import Response
from rest_framework.views import APIView

from annotate import accounts
from annotate.authentication import token_expires_at


class TokenObtainSerializer(serializers.Serializer):
    username = serializers.CharField(max_length=150)
    password = serializers.CharField(max_length=4096, trim_whitespace=False, style={"input_type": "password"})


class TokenSerializer(serializers.Serializer):
    token = serializers.CharField(help_text='Send it as "Authorization: Token <token>".')
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
        description="Your API token (the current one while it is valid, else a new one). Failed attempts "
        "count towards the login lockout: 429 `locked_out` with Retry-After while it lasts.",
    )
    def post(self, request):
        body = TokenObtainSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        # The Django request, not DRF's wrapper: django-axes marks a locked-out attempt on it.
        django_request = request._request
        user = authenticate(
            django_request, username=body.validated_data["username"], password=body.validated_data["password"]
        )
        if getattr(django_request, "axes_locked_out", False):
            return accounts.lockout_response(django_request)
        if user is None:
            raise accounts.InvalidCredentials("The username or password is not correct.")
        token = accounts.obtain_token(user=user)
        return Response(TokenSerializer({"token": token.key, "expires_at": token_expires_at(token)}).data)

    @extend_schema(request=None, responses={204: None}, description="Revoke your API token (if you have one).")
    def delete(self, request):
        accounts.revoke_token(user=request.user)
        return Response(status=204)
