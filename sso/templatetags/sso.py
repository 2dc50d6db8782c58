from urllib.parse import urlencode

from django import template
from django.conf import settings
from django.urls import reverse

from sso import oidc
from sso.services import saml_configured

register = template.Library()


@register.inclusion_tag("registration/sso_buttons.html")
def sso_buttons(next_url: str = "", invitation: str = ""):
    """A sign-in link per configured provider, carrying where to go after and the
    invitation being accepted (no provider configured: nothing)."""
    query = urlencode({k: v for k, v in (("next", next_url), ("invitation", invitation)) if v})
    suffix = f"?{query}" if query else ""
    providers = [(label, reverse("sso-oidc-login", args=[key]) + suffix) for key, label in oidc.configured()]
    if saml_configured():
        providers.append((settings.SAML_LABEL, reverse("sso-saml-login") + suffix))
    return {"providers": providers}
