"""Signing in at the test provider without a browser: follow its redirects and answer its
login and consent pages with requests, up to the redirect back to the platform."""

from __future__ import annotations

import base64
import hashlib
import html
import re
from urllib.parse import parse_qs, urlencode, urljoin, urlsplit

import requests


def sign_in_at_provider(authorize_url: str, login: str, *, session: requests.Session | None = None) -> str:
    """The URL the provider sends the browser back to (not followed) after `login` signs in."""
    s = session or requests.Session()
    issuer = re.match(r"https?://[^/]+", authorize_url).group(0)
    url = authorize_url
    for _ in range(20):
        response = s.get(url, allow_redirects=False, timeout=10)
        while response.status_code == 200:
            action = html.unescape(re.search(r'<form[^>]*action="([^"]+)"', response.text).group(1))
            if 'name="login"' in response.text:
                data = {"prompt": "login", "login": login, "password": "any password"}
            else:
                data = {"prompt": "consent"}
            response = s.post(urljoin(url, action), data=data, allow_redirects=False, timeout=10)
        assert response.status_code in (302, 303), (response.status_code, response.text[:500])
        url = urljoin(url, response.headers["location"])
        if not url.startswith(issuer):
            return url
    raise AssertionError("the provider kept redirecting")


def code_for(issuer: str, *, client_id: str, redirect_uri: str, login: str, nonce: str, verifier: str) -> str:
    """An authorization code the provider gives `client_id` for `login` (PKCE with `verifier`)."""
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    query = urlencode(
        {
            "response_type": "code",
            "client_id": client_id,
            "redirect_uri": redirect_uri,
            "scope": "openid email",
            "state": "s" * 16,
            "nonce": nonce,
            "code_challenge": challenge,
            "code_challenge_method": "S256",
        }
    )
    back = sign_in_at_provider(f"{issuer}/auth?{query}", login)
    return parse_qs(urlsplit(back).query)["code"][0]


def saml_answer(redirect_url: str, login: str, *, variant: str = "") -> dict[str, str]:
    """The SAML provider's answer for `login` to the request in `redirect_url`: the fields
    of the form its page posts to the platform (SAMLResponse, RelayState), and its action."""
    s = requests.Session()
    url = redirect_url + (f"&variant={variant}" if variant else "")
    form_page = s.get(url, timeout=10)
    form_page.raise_for_status()
    fields = dict(re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)"', form_page.text))
    fields = {name: html.unescape(value) for name, value in fields.items()}
    action = urljoin(url, re.search(r'<form[^>]*action="([^"]+)"', form_page.text).group(1))
    answer = s.post(action, data={**fields, "login": login, "password": "any password"}, timeout=10)
    answer.raise_for_status()
    posted = dict(re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)"', answer.text))
    posted = {name: html.unescape(value) for name, value in posted.items()}
    posted["action"] = html.unescape(re.search(r'<form[^>]*action="([^"]+)"', answer.text).group(1))
    return posted
