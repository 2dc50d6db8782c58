"""One error type for the platform and one JSON shape for every API error.

Every API error is answered as
    {"error": {"code": "<machine code>", "message": "<for people>", "fields": {...}?}}
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import PermissionDenied
from django.http import Http404
from rest_framework import exceptions as drf_exceptions
from rest_framework import status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler


class ApplicationError(Exception):
    """A business rule said no. `extra` carries machine-readable details."""

    code = "invalid"
    http_status = 400

    def __init__(self, message: str, extra: dict[str, Any] | None = None):
        super().__init__(message)
        self.message = message
        self.extra = extra or {}


class StaleWriteError(ApplicationError):
    """The writer read an older version than the one stored."""

    code = "conflict"
    http_status = 409


class InvalidStateError(ApplicationError):
    """The operation does not apply to the object's current state."""

    code = "invalid_state"
    http_status = 409


def _flatten(detail: Any) -> Any:
    if isinstance(detail, dict):
        return {str(k): _flatten(v) for k, v in detail.items()}
    if isinstance(detail, list):
        flat = [_flatten(v) for v in detail]
        return flat[0] if len(flat) == 1 and isinstance(flat[0], str) else flat
    return str(detail)


def api_exception_handler(exc: Exception, context: dict) -> Response | None:
    if isinstance(exc, ApplicationError):
        body: dict[str, Any] = {"code": exc.code, "message": exc.message}
        body.update(exc.extra)
        return Response({"error": body}, status=exc.http_status)
    if isinstance(exc, Http404):
        exc = drf_exceptions.NotFound()
    elif isinstance(exc, PermissionDenied):
        exc = drf_exceptions.PermissionDenied()
    response = drf_exception_handler(exc, context)
    if response is None:
        return None
    if isinstance(exc, drf_exceptions.ValidationError):
        fields = _flatten(exc.detail)
        if not isinstance(fields, dict):
            fields = {"non_field_errors": fields}
        body = {"code": "invalid", "message": "The request is not valid.", "fields": fields}
    else:
        detail = exc.detail if isinstance(exc, drf_exceptions.APIException) else str(exc)
        code = getattr(exc, "default_code", "error")
        body = {"code": code, "message": str(_flatten(detail))}
    response.data = {"error": body}
    if response.status_code == status.HTTP_500_INTERNAL_SERVER_ERROR:  # pragma: no cover - never expected
        response.data = {"error": {"code": "server_error", "message": "Internal error."}}
    return response
