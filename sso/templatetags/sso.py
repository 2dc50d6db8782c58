from urllib.parse import urlencode

from django import template
from django.urls import reverse

from sso import oidc

register = template.Library()


@register.inclusion_tag("registration/sso_buttons.html")
def sso_buttons(next_url: str = "", invitation: str = ""):
    """A sign-in link per configured provider, carrying where to go after and the
    invitation being accepted (no provider configured: nothing)."""
    query = urlencode({k: v for k, v in (("next", next_url), ("invitation", invitation)) if v})
    return {
        "providers": [
            (label, reverse("sso-oidc-login", args=[key]) + (f"?{query}" if query else ""))
            for key, label in oidc.configured()
        ]
    }
