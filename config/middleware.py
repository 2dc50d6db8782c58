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
