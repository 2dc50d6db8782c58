"""The OpenAPI schema (/api/schema/) and its Swagger UI (/api/docs/): open to anyone only
when API_SCHEMA_PUBLIC is on (the default with DEBUG), else to signed-in users (session
or token). The UI is drf-spectacular's CSP-friendly variant: its start-up script is a
separate request, and its page has no inline style (templates/api/swagger_ui.html), so
the site's Content-Security-Policy applies to it with one addition: Swagger UI draws its
icons as data: images."""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth.views import redirect_to_login
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView
from rest_framework import exceptions
from rest_framework.permissions import BasePermission
from rest_framework.renderers import JSONRenderer


class SchemaAccess(BasePermission):
    def has_permission(self, request, view) -> bool:
        # Read per request, so a test or a restarted server sees the current setting.
        return settings.API_SCHEMA_PUBLIC or bool(request.user and request.user.is_authenticated)


class JsonErrorsMixin:
    """Errors in the one JSON shape, whatever the view renders when it succeeds (the
    schema as YAML, the UI's start-up script as JavaScript)."""

    def handle_exception(self, exc):
        response = super().handle_exception(exc)
        self.request.accepted_renderer = JSONRenderer()
        self.request.accepted_media_type = JSONRenderer.media_type
        return response


class SchemaView(JsonErrorsMixin, SpectacularAPIView):
    permission_classes = [SchemaAccess]


class DocsView(JsonErrorsMixin, SpectacularSwaggerSplitView):
    permission_classes = [SchemaAccess]
    template_name = "api/swagger_ui.html"

    def finalize_response(self, request, response, *args, **kwargs):
        response = super().finalize_response(request, response, *args, **kwargs)
        response.csp_overrides = {"img-src": "'self' data:"}  # read by config.middleware
        return response

    def handle_exception(self, exc):
        # A person opening the docs unsigned goes to the login page and comes back.
        if isinstance(exc, exceptions.NotAuthenticated) and "script" not in self.request.GET:
            return redirect_to_login(self.request.get_full_path())
        return super().handle_exception(exc)
