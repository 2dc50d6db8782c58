"""One error type for the platform and one JSON shape for every API error.

Every API error is answered as
    {"error": {"code": "<machine code>", "message": "<for people>", "fields": {...}?}}

Two places produce it, both through `error_body`: the DRF exception handler, for what
an API view raises, and `ApiErrorMiddleware`, for the errors under /api/ that never
reach a DRF view (a URL no route matches, Django's 500 page).
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.utils.translation import gettext, gettext_lazy

if TYPE_CHECKING:
    from rest_framework.response import Response

# DRF is imported where it is used, not here: every service module imports this one for
# ApplicationError, and DRF's import (its compat module pulls in psycopg's types, requests,
# markdown and pygments) was a fifth of `manage.py import_jsonl`'s start-up.


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


API_PREFIX = "/api/"


# The code and message of an error response that no API view produced, by status.
@cache
def _status_errors() -> dict[int, tuple[str, Any]]:
    from rest_framework import exceptions as drf_exceptions

    return {
        400: ("invalid", gettext_lazy("The request is not valid.")),
        401: ("not_authenticated", drf_exceptions.NotAuthenticated.default_detail),
        403: ("permission_denied", drf_exceptions.PermissionDenied.default_detail),
        404: ("not_found", drf_exceptions.NotFound.default_detail),
        406: ("not_acceptable", drf_exceptions.NotAcceptable.default_detail),
        413: ("too_large", "The request is too large."),
        415: ("unsupported_media_type", "Unsupported media type in the request."),
        429: ("throttled", drf_exceptions.Throttled.default_detail),
    }


def error_body(code: str, message: str, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """The one error shape. `extra` adds details (`fields`, `current_version`, ...) but
    can never replace the code or the message. The message is in the request's language
    where the catalogue has it (one raised with gettext is already; gettext leaves others)."""
    text = str(message)
    body: dict[str, Any] = {"code": code, "message": gettext(text) if text else text}
    for key, value in (extra or {}).items():
        body.setdefault(key, value)
    return {"error": body}


class ApiErrorMiddleware:
    """Under /api/, an error response that is not JSON already (Django's 404 for a URL no
    route matches, in DEBUG its technical 404 page, a 405 or 403 of a plain Django view,
    the 500 page) is replaced by the error shape. Pages outside /api/ keep Django's HTML.

    It sits outside CommonMiddleware, so an API URL missing its trailing slash is still
    redirected (the redirect is not an error). In DEBUG a 500 keeps Django's debug page."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if response.status_code < 400 or not request.path_info.startswith(API_PREFIX):
            return response
        if response.get("Content-Type", "").startswith("application/json"):
            return response  # an API view answered, through api_exception_handler
        status_code = response.status_code
        if status_code >= 500:
            if settings.DEBUG:
                return response
            code, message = "server_error", "Internal error."
        elif status_code == 405:
            from rest_framework import exceptions as drf_exceptions

            code, message = "method_not_allowed", drf_exceptions.MethodNotAllowed(request.method).detail
        else:
            code, message = _status_errors().get(status_code, ("error", response.reason_phrase))
        json_response = JsonResponse(error_body(code, message), status=status_code)
        if response.has_header("Allow"):
            json_response["Allow"] = response["Allow"]
        return json_response


class UnavailablePageMiddleware:
    """A page (outside /api/) whose view raised an ApplicationError of a 5xx status (the
    task queue is unavailable: core.background.QueueUnavailableError) is answered with
    that status and the error's message on a page of its own, instead of Django's 500.
    Under /api/ the DRF handler below answers the same error as JSON."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if not isinstance(exception, ApplicationError) or exception.http_status < 500:
            return None
        if request.path_info.startswith(API_PREFIX):
            return JsonResponse(error_body(exception.code, exception.message), status=exception.http_status)
        from django.shortcuts import render

        response = render(request, "unavailable.html", {"message": exception.message}, status=exception.http_status)
        response["Retry-After"] = "60"
        return response


def _flatten(detail: Any) -> Any:
    if isinstance(detail, dict):
        return {str(k): _flatten(v) for k, v in detail.items()}
    if isinstance(detail, list):
        flat = [_flatten(v) for v in detail]
        return flat[0] if len(flat) == 1 and isinstance(flat[0], str) else flat
    return str(detail)


def api_exception_handler(exc: Exception, context: dict) -> Response | None:
    from rest_framework import exceptions as drf_exceptions
    from rest_framework import status
    from rest_framework.response import Response
    from rest_framework.views import exception_handler as drf_exception_handler

    if isinstance(exc, ApplicationError):
        response = Response(error_body(exc.code, exc.message, exc.extra), status=exc.http_status)
        if exc.http_status == status.HTTP_503_SERVICE_UNAVAILABLE:
            response["Retry-After"] = "60"
        return response
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
        response.data = error_body("invalid", gettext("The request is not valid."), {"fields": fields})
    else:
        detail = exc.detail if isinstance(exc, drf_exceptions.APIException) else str(exc)
        response.data = error_body(getattr(exc, "default_code", "error"), str(_flatten(detail)))
    if response.status_code == status.HTTP_500_INTERNAL_SERVER_ERROR:  # pragma: no cover - never expected
        response.data = error_body("server_error", "Internal error.")
    return response


def permission_denied_page(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """handler403: a refused page in the site's layout that says why (the refusal's
    message, written for the person: who may and how to get it) and what to do. Under
    /api/ ApiErrorMiddleware turns the answer into the error shape."""
    from django.shortcuts import render

    message = str(exception) if isinstance(exception, PermissionDenied) and str(exception) else ""
    return render(request, "403.html", {"message": message}, status=403)
