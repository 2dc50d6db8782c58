"""The Content-Security-Policy header (Django 5.2 has none built in).

One policy, settings.CONTENT_SECURITY_POLICY (directive -> sources), on every response:
no inline script or style, nothing loaded from another origin, no framing. Every page's
script and style is a file under static/, so no nonce is needed; that is why this is a
few lines here rather than the django-csp package. JSON, downloads and the SVG plots get
the header too, which costs nothing and keeps a script inside an SVG inert.

A view that needs more sets `response.csp_overrides = {directive: sources}` (the API docs
page allows the data: images Swagger UI draws its icons with); a response that already
carries the header keeps it.
"""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import HttpResponse, JsonResponse
from django.middleware.gzip import GZipMiddleware
from django.views import defaults

HEADER = "Content-Security-Policy"


def policy_header(overrides: dict[str, str] | None = None) -> str:
    directives = {**settings.CONTENT_SECURITY_POLICY, **(overrides or {})}
    return "; ".join(f"{name} {sources}".strip() for name, sources in directives.items())


class ContentSecurityPolicyMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        if HEADER not in response.headers:
            response.headers[HEADER] = policy_header(getattr(response, "csp_overrides", None))
        return response


class RequestBodyLimitMiddleware:
    """Request bodies the app will not read, refused up front with a message naming the limit:

    - a body that is not a file upload (JSON, a form) larger than
      DATA_UPLOAD_MAX_MEMORY_SIZE: 413. Django raised RequestDataTooBig while reading it,
      which became "400 The request is not valid." File uploads
      (multipart/form-data) are checked by the views that take them (MAX_IMPORT_BYTES).
    - a chunked body (Transfer-Encoding: chunked, no Content-Length): 411. Django reads a
      WSGI body only as far as its Content-Length, so a chunked upload arrived empty and
      was told "No file was submitted".

    Under /api/ the answer is the one JSON error shape; elsewhere a short text."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        refusal = self.refusal(request)
        if refusal is not None:
            return refusal
        return self.get_response(request)

    @staticmethod
    def refusal(request) -> HttpResponse | None:
        declared = request.META.get("CONTENT_LENGTH") or ""
        chunked = "chunked" in request.META.get("HTTP_TRANSFER_ENCODING", "").lower()
        if chunked and not declared:
            return _refuse(
                request,
                411,
                "length_required",
                "The request body was sent in chunks without a Content-Length, which this server does not "
                "read. Send it with its size (Content-Length), as a browser, curl -F or requests do for a file.",
            )
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        multipart = request.META.get("CONTENT_TYPE", "").lower().startswith("multipart/form-data")
        if limit is not None and declared.isdigit() and int(declared) > limit and not multipart:
            return too_large(request, f"The request body is {int(declared):,} bytes")
        return None


def too_large(request, what: str = "The request's fields are too large") -> HttpResponse:
    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    return _refuse(
        request,
        413,
        "too_large",
        f"{what}; at most {limit:,} bytes are accepted (DATA_UPLOAD_MAX_MEMORY_SIZE). "
        "Files are uploaded as multipart/form-data (docs/security.md).",
    )


def bad_request(request, exception=None):
    """handler400: Django answers 400 to every SuspiciousOperation, including form fields of
    a multipart body over DATA_UPLOAD_MAX_MEMORY_SIZE (found only while reading it, where
    the middleware above cannot see it); that one is a 413 naming the limit."""
    if isinstance(exception, RequestDataTooBig):
        return too_large(request)
    return defaults.bad_request(request, exception)


def _refuse(request, status: int, code: str, message: str) -> HttpResponse:
    from core.exceptions import API_PREFIX, error_body

    if request.path_info.startswith(API_PREFIX):
        return JsonResponse(error_body(code, message), status=status)
    return HttpResponse(message, status=status, content_type="text/plain; charset=utf-8")


class GZipTextMiddleware(GZipMiddleware):
    """Django's GZipMiddleware (with its "Heal the BREACH" padding) for text only: pages,
    JSON and JSON Lines, CSV, SVG. A zip archive, a PNG or any other already compressed
    download keeps its bytes and its Content-Length."""

    TEXT_TYPES = ("text/", "application/json", "application/jsonl", "application/javascript", "image/svg+xml")

    def process_response(self, request, response):
        if not response.get("Content-Type", "").startswith(self.TEXT_TYPES):
            return response
        return super().process_response(request, response)
